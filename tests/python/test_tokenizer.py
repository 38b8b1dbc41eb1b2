"""GPT-2 byte-level BPE: our ids equal HF tokenizers' ByteLevelBPETokenizer ids on the same
vocab.json/merges.txt (trained here by HF on a varied corpus), and decoding gives the text back."""
import json
import os
import random
import unicodedata

import numpy as np
import pytest

from data_helpers import gpt2_bytes_to_unicode, read_mmidx, run

import tokenizers

SPECIAL = [
    "Hello world", "I'm sure they'll say we've done it; don't you? 'S 'T 'RE", "it's", "'s'", "''",
    "a   b", "a \n b", "trailing spaces   ", "   leading", "\n\n\tx", "tab\there", "\r\nwindows\r\n",
    "12345 3.14159 1,000,000 0x1F", "²³ ٣٤ Ⅻ ½", "😀👍🏽 family 👨‍👩‍👧‍👦", "日本語のテキスト、中文。",
    "مرحبا بالعالم", "Привет, мир!", "e\u0301 café naïve", "nbsp\u00a0here", "ideo\u3000space",
    "<|endoftext|>", "email@example.com https://x.org/a?b=c#d", "!!!???...", "$$$ 100% #1",
    "", " ", "  ", "\u2028line\u2029para", "x" * 300, " " * 100 + "y", "a\u0085b", "mixed123abc456",
    "CamelCaseWord ALLCAPS lowercase", "tokens\u200bwith\u200czero\u200dwidth", "\x00\x01ctrl\x7f",
    "ogham\u1680space", "mongolian\u180evs", "fs\x1c\x1d\x1e\x1fus", "  \u3000 \u2003x", "a\u00ad-b",
    "\U0001d400\U0001d7ce math", "ﬁ ligature", "Ⅷ ⅷ ↉", "x\ufeffbom", "'S'LL'Ve 've'd", "a''s",
]


def corpus():
    """Training text: Python's own module docstrings plus the special cases, repeated."""
    import inspect
    import collections, json as js, string, textwrap, argparse, email, http, unittest
    texts = []
    for mod in (collections, js, string, textwrap, argparse, email, http, unittest):
        for _, obj in inspect.getmembers(mod):
            doc = inspect.getdoc(obj)
            if doc:
                texts.append(doc)
    return texts + SPECIAL * 3


def random_strings(n, seed):
    rng = random.Random(seed)
    pools = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
             (0x900, 0x97F), (0x2000, 0x206F), (0x3000, 0x30FF), (0x4E00, 0x4FFF),
             (0xAC00, 0xAD00), (0x1F300, 0x1F6FF), (0x0, 0x20)]
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(0, 40)):
            lo, hi = rng.choice(pools)
            c = chr(rng.randint(lo, hi))
            if unicodedata.category(c) in ("Cn", "Cs"):
                continue
            chars.append(c)
            if rng.random() < 0.2:
                chars.append(rng.choice([" ", "  ", "'s", "\n", "'ll"]))
        out.append("".join(chars))
    return out


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("bpe")
    tok = tokenizers.ByteLevelBPETokenizer()
    tok.train_from_iterator(corpus(), vocab_size=3000, min_frequency=2,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    tok.save_model(str(path))
    return str(path / "vocab.json"), str(path / "merges.txt")


def our_ids(tmp_path, vocab, texts):
    src = tmp_path / "texts.jsonl"
    src.write_text("\n".join(json.dumps(t) for t in texts) + "\n")
    out = run("dataset_tool", "tokenize", "--vocab-file", vocab[0], "--merge-file", vocab[1],
              "--input", src).stdout
    lines = out.split("\n")[:-1]
    assert len(lines) == len(texts)
    return lines


def test_matches_hf_tokenizers(tmp_path, vocab):
    hf = tokenizers.ByteLevelBPETokenizer(vocab[0], vocab[1])
    texts = SPECIAL + random_strings(1500, 0) + corpus()[:200]
    lines = our_ids(tmp_path, vocab, texts)
    mismatches = []
    for text, line in zip(texts, lines):
        assert "!roundtrip" not in line, repr(text)
        ours = [int(x) for x in line.split()]
        if ours != hf.encode(text).ids:
            mismatches.append(text)
    assert not mismatches, f"{len(mismatches)} texts differ, e.g. {mismatches[:3]!r}"


def test_preprocess_data_matches_hf(tmp_path, vocab):
    hf = tokenizers.ByteLevelBPETokenizer(vocab[0], vocab[1])
    eod = hf.token_to_id("<|endoftext|>")
    docs = SPECIAL[:20] + random_strings(200, 1)
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps({"text": d}) for d in docs) + "\n")
    prefix = str(tmp_path / "out")
    run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type",
        "GPT2BPETokenizer", "--vocab-file", vocab[0], "--merge-file", vocab[1], "--append-eod",
        "--workers", 3, "--batch-lines", 7)
    dtype, lengths, _, doc_idx, tokens = read_mmidx(prefix + "_text_document")
    assert dtype == np.uint16
    expected = []
    for d in docs:
        ids = hf.encode(d).ids
        expected.extend(ids + [eod] if ids else [])
    assert tokens.tolist() == expected
    assert len(doc_idx) == len(docs) + 1  # empty documents stay, with no sequences


def test_invalid_utf8_roundtrips_but_is_not_json(tmp_path, vocab):
    import megatron_cpp
    # The tokenizer takes any bytes: each undecodable byte is a symbol of its own.
    raw = b"ok \xff\xfe bad \xc3( end \xed\xa0\x80"
    tokens = megatron_cpp.GPT2BPETokenizer(vocab[0], vocab[1]).tokenize(raw)
    vocab_json = json.load(open(vocab[0]))
    inv = {v: k for k, v in vocab_json.items()}
    # Undo GPT-2's byte-to-unicode mapping.
    byte_of = {c: b for b, c in gpt2_bytes_to_unicode().items()}
    assert bytes(byte_of[ch] for t in tokens for ch in inv[t]) == raw
    # JSON text is UTF-8 (RFC 8259; Python's json and Megatron-LM's preprocess_data refuse it too):
    # the line is named with the fault, its bytes are not echoed (text=True would fail to decode
    # them), and --skip-malformed skips and counts it.
    src = tmp_path / "raw.jsonl"
    src.write_bytes(b'{"text": "' + raw + b'"}\n{"text": "fine"}\n')
    prefix = str(tmp_path / "out")
    flags = ["--input", src, "--output-prefix", prefix, "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file",
             vocab[0], "--merge-file", vocab[1]]
    proc = run("preprocess_data", *flags, check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "raw.jsonl:1: malformed JSON: parse error at line 1, column 14" in lines[0], lines
    assert "ill-formed UTF-8" in lines[0] and "--skip-malformed" in lines[0], lines
    run("preprocess_data", *flags, "--skip-malformed")
    _, _, _, doc_idx, tokens = read_mmidx(prefix + "_text_document")
    hf = tokenizers.ByteLevelBPETokenizer(vocab[0], vocab[1])
    assert tokens.tolist() == hf.encode("fine").ids and len(doc_idx) == 2
