"""TikTokenizer: Megatron-LM's tiktoken JSON (ranks of byte strings, ids after the special
tokens). Our ids equal tiktoken's own Encoding built as Megatron-LM builds it (its v1 and v2
patterns, special tokens allowed in the text), on a multilingual corpus and on invalid UTF-8;
decoding gives tiktoken's bytes; preprocess_data appends </s>."""
import base64
import json

import pytest

from data_helpers import gpt2_bytes_to_unicode, read_mmidx, run
from hf_families import FAMILIES
from test_hf_tokenizer import INVALID
from test_tokenizer import SPECIAL, corpus, random_strings

import tiktoken
megatron_cpp = pytest.importorskip("megatron_cpp")

# Megatron-LM's patterns and special tokens (megatron/core/tokenizers/text/libraries/tiktoken_tokenizer.py).
PATTERNS = {
    "v1": r"[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
    "v2": (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
           r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|"
           r"\s+(?!\S)|\s+"),
}
NUM_SPECIAL = 20
SPECIALS = ["<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>"] + [
    f"<SPECIAL_{i}>" for i in range(7, NUM_SPECIAL)]


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory):
    """A byte-level BPE trained by HF tokenizers, written as Megatron-LM's tiktoken JSON: the 256
    bytes first, then the merged tokens in the order they were learned."""
    hf = FAMILIES["gpt2"](corpus())
    byte_of = {c: b for b, c in gpt2_bytes_to_unicode().items()}
    entries = [bytes([i]) for i in range(256)]
    for token, _ in sorted(hf.get_vocab().items(), key=lambda kv: kv[1]):
        spelled = bytes(byte_of[c] for c in token) if all(c in byte_of for c in token) else None
        if spelled is not None and spelled not in entries:
            entries.append(spelled)
    path = tmp_path_factory.mktemp("tiktoken") / "tokenizer.json"
    path.write_text(json.dumps([{"rank": i, "token_bytes": base64.b64encode(b).decode(),
                                 "token_str": b.decode("utf-8", "replace")} for i, b in enumerate(entries)]))
    return path, entries


def reference(entries, pattern, vocab_size):
    ranks = {b: i + NUM_SPECIAL for i, b in enumerate(entries[:vocab_size - NUM_SPECIAL])}
    return tiktoken.Encoding(name="test", pat_str=PATTERNS[pattern], mergeable_ranks=ranks,
                             special_tokens={t: i for i, t in enumerate(SPECIALS)})


@pytest.mark.parametrize("pattern", ["v1", "v2"])
def test_ids_and_bytes_equal_tiktoken(vocabulary, pattern):
    path, entries = vocabulary
    vocab_size = NUM_SPECIAL + len(entries) - 7  # Megatron-LM cuts the list to vocab_size
    ref = reference(entries, pattern, vocab_size)
    ours = megatron_cpp.TikTokenizer(str(path), pattern, NUM_SPECIAL, vocab_size)
    assert (ours.vocab_size, ours.eod, ours.bos) == (vocab_size, 2, 1)
    texts = SPECIAL + random_strings(300, 5) + ["<s>hi</s> <SPECIAL_13><sep>x<unk><SPECIAL_7", "<<s>>"]
    for text in texts:
        expected = ref.encode(text, allowed_special="all")
        assert ours.tokenize(text) == expected, text
        assert ours.detokenize_bytes(expected) == ref.decode_bytes(expected), text
    for raw in INVALID:
        assert ours.tokenize(raw) == ref.encode(raw.decode("utf-8", "replace"), allowed_special="all"), raw


def test_preprocess_data_appends_the_end_of_document(vocabulary, tmp_path):
    path, entries = vocabulary
    vocab_size = NUM_SPECIAL + len(entries)
    ref = reference(entries, "v1", vocab_size)
    docs = SPECIAL[:30] + random_strings(100, 9)
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps({"text": d}) for d in docs) + "\n")
    prefix = str(tmp_path / "out")
    run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type", "TikTokenizer",
        "--tokenizer-model", path, "--tiktoken-pattern", "v1", "--tiktoken-num-special-tokens", NUM_SPECIAL,
        "--vocab-size", vocab_size, "--append-eod", "--workers", 2)
    _, _, _, _, tokens = read_mmidx(prefix + "_text_document")
    expected = []
    for d in docs:
        ids = ref.encode(d, allowed_special="all")
        expected.extend(ids + [2] if ids else [])
    assert tokens.tolist() == expected


def test_what_cannot_be_read_is_named(vocabulary, tmp_path):
    path, entries = vocabulary
    good = json.loads(path.read_text())
    cases = {
        "short.json": (good[:300], "expected a JSON list of at least"),
        "rank.json": (good[:300] + [dict(good[300], rank=301)] + good[301:], "entry 300: expected {\"rank\": 300"),
        "base64.json": (good[:300] + [dict(good[300], token_bytes="@@@")] + good[301:], "entry 300: expected"),
        "bytes.json": ([dict(good[1], rank=0)] + good[1:], "the first 256 tokens must be the single bytes"),
        "repeat.json": (good[:300] + [dict(good[300], token_bytes=good[299]["token_bytes"])] + good[301:],
                        "entry 300: its bytes are empty or repeat"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_text(json.dumps(data))
        with pytest.raises(RuntimeError) as e:
            megatron_cpp.TikTokenizer(str(tmp_path / name), "v2", NUM_SPECIAL, NUM_SPECIAL + len(entries))
        assert str(tmp_path / name) in str(e.value) and message in str(e.value), (name, str(e.value))
    with pytest.raises(RuntimeError, match="--tiktoken-pattern: expected v1 or v2, found 'v3'"):
        megatron_cpp.TikTokenizer(str(path), "v3", NUM_SPECIAL, NUM_SPECIAL + len(entries))


def test_a_vocabulary_short_of_the_256_bytes_is_refused(vocabulary):
    path, _ = vocabulary
    with pytest.raises(RuntimeError, match="leaves fewer than the 256 single-byte tokens"):
        megatron_cpp.TikTokenizer(str(path), "v2", 1000, 1100)
