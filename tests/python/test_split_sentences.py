"""preprocess_data --split-sentences against nltk's punkt, as Megatron-LM's preprocess_data.py
uses it: each sentence nltk finds becomes one sequence of the document (_sentence files), with
--keep-newlines through Megatron-LM's pattern that keeps the whitespace after a sentence. The
model is trained here with nltk's PunktTrainer and written in NLTK's punkt_tab form."""
import json
import random
import unicodedata

import numpy as np
import pytest
import tokenizers
from data_helpers import read_mmidx, run, write_punkt_tab
from nltk.tokenize import punkt as nltk_punkt


class KeepNewlines(nltk_punkt.PunktLanguageVars):
    # Megatron-LM's --keep-newlines pattern: the word before the end and the whitespace after it
    # are part of the match, so the next sentence starts at the next token.
    _period_context_fmt = r"""
        \S*
        %(SentEndChars)s
        \s*
        (?=(?P<after_tok>
            %(NonWord)s
            |
            (?P<next_tok>\S+)
        ))"""


WORDS = ("the a of Dr. Mr. Mrs. St. Inc. U.S. e.g. etc. vs. J. S. Bach Smith went to Washington on Jan. 5 "
         "1999 and met Prof. Ortiz who said it was 3.14 percent").split()

# Pieces that reach every rule: abbreviations, initials, numbers, ellipses in three spellings,
# closing quotes and brackets (ASCII, curly, guillemets), "--", blank lines, whitespace that
# Python's str.strip() and nltk's regex \s see differently (\x1c), case rules (Ü, dotted İ, Greek
# final sigma), CJK, emoji, combining marks, non-Latin digits.
PIECES = ["Dr.", "Mr.", "U.S.", "e.g.", "etc.", "J.", "S.", "Bach", "the", "The", "However", "Über.", "über",
          "ÜBER.", "3.14", "5.", "1999.", "-5,3.", ",", ";", ":", "--", "-", "...", "..", ". . .", ". . . .", "!",
          "?", "!!!", "?!", "(", ")", "\"", "'", "“", "”", "‘", "’", "«", "»", "[", "]", "{", "}", "*", "@", "#",
          "&", "`", " ", "  ", "\n", "\n\n", "\t", "\r", "\x1c", "\u3000", "\u00a0", "word", "Word", "WORD",
          "İst.", "a.", "B.", "ΟΔΟΣ.", "ΟΔΟΣ'.", "ΣΣ.", "日本語。", "emoji😀.", "e\u0301te.", "x", "Y", "٣.", "Ⅻ.",
          "_.", ".", "a-b.", "co-Dr.", "1.2.3"]

KNOWN = ["Hello world. This is Dr. Smith. He said (quote.) Next one.\" Then “this.” And 'that.' ok",
         "Very bad acting!!! I promise.", "(Sent1.) Sent2.", "  leading. Trailing.   ", "", "   ",
         "A.\n\nB. c.", "He went to the U.S. The end.", "J. S. Bach was here. So was I.",
         "It costs 3.14 percent. Yes.", "Xy ΟΔΟΣ. hello there. ΣΣ. again"]


def documents(seed, n=400):
    rng = random.Random(seed)
    # Assigned code points (as the tokenizer tests draw them: byte-level BPE's pre-tokenizer
    # classes follow the Unicode version of each implementation).
    pool = [chr(c) for c in rng.sample(range(0x20, 0x30000), 3000)
            if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")]
    docs = []
    for _ in range(n):
        text = ""
        for _ in range(rng.randint(0, 40)):
            text += rng.choice(PIECES) if rng.random() < 0.8 else rng.choice(pool)
            if rng.random() < 0.8:
                text += rng.choice(["", " ", " ", " ", "\n"])
        docs.append(text)
    return KNOWN + docs


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """NLTK_DATA holding tokenizers/punkt_tab/english, and nltk's parameters."""
    rng = random.Random(0)
    train = []
    for _ in range(3000):
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 15)))
        train.append(s[0].upper() + s[1:] + rng.choice([".", ".", "!", "?"]))
    trainer = nltk_punkt.PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    trainer.train(" ".join(train), finalize=True)
    params = trainer.get_params()
    assert params.abbrev_types and params.ortho_context and params.sent_starters is not None
    # Lowered forms that only str.lower()'s special cases produce.
    params.abbrev_types |= {"dr", "e.g", "u.s", "inc", "über", "i\u0307st", "οδος", "σς"}
    params.collocations |= {("##number##", "percent"), ("s", "bach")}
    params.sent_starters |= {"the", "however"}
    root = tmp_path_factory.mktemp("nltk_data")
    write_punkt_tab(params, str(root))
    return root, params


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("bpe")
    tok = tokenizers.ByteLevelBPETokenizer()
    tok.train_from_iterator(documents(1) + [" ".join(WORDS)] * 5, vocab_size=600, min_frequency=2,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    tok.save_model(str(path))
    return str(path / "vocab.json"), str(path / "merges.txt")


@pytest.mark.parametrize("keep_newlines", [False, True])
def test_sentences_are_nltks(tmp_path, monkeypatch, model, vocab, keep_newlines):
    root, params = model
    lang_vars = KeepNewlines() if keep_newlines else nltk_punkt.PunktLanguageVars()
    splitter = nltk_punkt.PunktSentenceTokenizer(params, lang_vars=lang_vars)
    docs = documents(2)
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    monkeypatch.setenv("NLTK_DATA", str(root))
    prefix = str(tmp_path / "out")
    run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type", "GPT2BPETokenizer",
        "--vocab-file", vocab[0], "--merge-file", vocab[1], "--append-eod", "--split-sentences", "--workers", 2,
        *(["--keep-newlines"] if keep_newlines else []))
    _, lengths, _, doc_idx, tokens = read_mmidx(prefix + "_text_sentence")

    hf = tokenizers.ByteLevelBPETokenizer(*vocab)
    eod = hf.token_to_id("<|endoftext|>")
    sentences = [splitter.tokenize(d) for d in docs]
    assert sum(len(s) > 1 for s in sentences) > 100  # the corpus splits, often
    mismatched = []
    seq = 0
    for d, (doc, sents) in enumerate(zip(docs, sentences)):
        ids = [hf.encode(s).ids for s in sents]
        ids = [i for i in ids if i]
        if ids:
            ids[-1] = ids[-1] + [eod]
        begin, end = doc_idx[d], doc_idx[d + 1]
        got = [tokens[sum(lengths[:k]):sum(lengths[:k + 1])].tolist() for k in range(begin, end)]
        if got != ids:
            mismatched.append((doc, sents, [hf.decode(g) for g in got]))
        seq = end
    assert seq == len(lengths) and len(doc_idx) == len(docs) + 1
    assert not mismatched, f"{len(mismatched)} documents differ, e.g. {mismatched[:2]!r}"
    assert np.sum(lengths) == len(tokens)


def test_missing_model_and_old_pickle_are_named(tmp_path, monkeypatch):
    src = tmp_path / "docs.jsonl"
    src.write_text(json.dumps({"text": "One. Two."}) + "\n")
    flags = ["--input", src, "--output-prefix", tmp_path / "out", "--tokenizer-type", "NullTokenizer",
             "--vocab-size", 10, "--split-sentences"]
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setenv("HOME", str(tmp_path))
    proc = run("preprocess_data", *flags, "--lang", "klingon", check=False)
    assert proc.returncode != 0
    message = proc.stderr.strip().splitlines()[-1]
    assert "--split-sentences: no punkt_tab model for --lang klingon" in message, proc.stderr
    assert str(tmp_path / "nowhere" / "tokenizers" / "punkt_tab" / "klingon") in message
    assert "nltk.download('punkt_tab')" in message

    # Only NLTK's old pickled model: named, and not unpickled.
    pickled = tmp_path / "nowhere" / "tokenizers" / "punkt"
    pickled.mkdir(parents=True)
    (pickled / "english.pickle").write_bytes(b"\x80\x04not really")
    proc = run("preprocess_data", *flags, check=False)
    assert proc.returncode != 0 and f"found {pickled / 'english.pickle'}" in proc.stderr, proc.stderr
    assert "punkt_tab" in proc.stderr

    # Megatron-LM ignores --keep-newlines without --split-sentences: a document per sequence.
    src.write_text(json.dumps({"text": "1 2 3"}) + "\n")
    proc = run("preprocess_data", *flags[:-1], "--keep-newlines")
    assert "--keep-newlines has no effect without --split-sentences" in proc.stderr, proc.stderr
    _, lengths, _, _, tokens = read_mmidx(str(tmp_path / "out_text_document"))
    assert lengths.tolist() == [3] and tokens.tolist() == [1, 2, 3]


def test_a_malformed_model_file_is_named(tmp_path, monkeypatch, model):
    root, _ = model
    bad = tmp_path / "tokenizers" / "punkt_tab" / "english"
    bad.mkdir(parents=True)
    for f in (root / "tokenizers" / "punkt_tab" / "english").iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    (bad / "ortho_context.tab").write_text("dr\t4\nthe\tmany\n")
    src = tmp_path / "docs.jsonl"
    src.write_text(json.dumps({"text": "One. Two."}) + "\n")
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    proc = run("preprocess_data", "--input", src, "--output-prefix", tmp_path / "out", "--tokenizer-type",
               "NullTokenizer", "--vocab-size", 10, "--split-sentences", check=False)
    assert proc.returncode != 0
    assert f"{bad / 'ortho_context.tab'}:2: expected a word, a tab and its context flags" in proc.stderr, proc.stderr
