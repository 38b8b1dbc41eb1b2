"""train_tokenizer: its merges equal a naive Python BPE trainer with the same rules, and its
files load in HF tokenizers, which then encodes exactly as our GPT2BPETokenizer."""
import json

import tokenizers

from data_helpers import gpt2_bytes_to_unicode, run

TEXTS = ["the cat sat on the mat", "the theme of these theses", "aaaa aaa aa a",
         "don't stop 123 1234 12", "naïve café 日本 日本語", "  spaced   out  ", "x\ny\n\nz"] * 3


def naive_merges(texts, vocab_size, min_frequency):
    """GPT-2 byte-to-unicode spelling, most frequent pair first, ties to smaller (left, right) id."""
    to_uni = gpt2_bytes_to_unicode()
    alphabet = sorted(to_uni.values())
    tokens = list(alphabet)
    ids = {t: i for i, t in enumerate(tokens)}
    import re
    # Words: the texts here only need letters/digits/space/newline rules; reuse the C++ split.
    words = {}
    for t in texts:
        for w in pretokenize(t):
            words[w] = words.get(w, 0) + 1
    seqs = {w: [ids[to_uni[b]] for b in w.encode()] for w in words}
    merges = []
    while len(merges) < vocab_size - 257:
        counts = {}
        for w, s in seqs.items():
            for p in zip(s, s[1:]):
                counts[p] = counts.get(p, 0) + words[w]
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        if counts[best] < min_frequency:
            break
        merged = tokens[best[0]] + tokens[best[1]]
        if merged not in ids:
            ids[merged] = len(tokens)
            tokens.append(merged)
        z = ids[merged]
        merges.append((tokens[best[0]], tokens[best[1]]))
        for w, s in seqs.items():
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(z)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return merges, tokens


def pretokenize(text):
    """The GPT-2 pattern for the characters used in TEXTS (letters, digits, ' and whitespace)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "'" and text[i + 1:i + 2] in ("s", "t", "m", "d"):
            out.append(text[i:i + 2]); i += 2; continue
        j = i + 1 if c == " " and i + 1 < n else i
        d = text[j]
        for cls in (str.isalpha, str.isdigit, lambda x: not (x.isspace() or x.isalpha() or x.isdigit())):
            if cls(d):
                k = j + 1
                while k < n and cls(text[k]):
                    k += 1
                out.append(text[i:k]); i = k; break
        else:
            k = i
            while k < n and text[k].isspace():
                k += 1
            end = k - 1 if (k < n and k - i > 1) else k
            out.append(text[i:end]); i = end
    return out


def test_merges_match_naive_trainer(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text("\n".join(json.dumps({"text": t}) for t in TEXTS) + "\n")
    run("train_tokenizer", "--input", src, "--output-dir", tmp_path, "--vocab-size", 320,
        "--min-frequency", 2)
    lines = (tmp_path / "merges.txt").read_text(encoding="utf-8").split("\n")
    assert lines[0] == "#version: 0.2"
    got = [tuple(l.split(" ")) for l in lines[1:] if l]
    expected, tokens = naive_merges(TEXTS, 320, 2)
    assert got == expected
    vocab = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
    assert vocab["<|endoftext|>"] == len(vocab) - 1
    assert [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])][:-1] == tokens


def test_trained_files_load_in_hf_with_identical_ids(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text("\n".join(json.dumps({"text": t}) for t in TEXTS * 5) + "\n")
    run("train_tokenizer", "--input", src, "--output-dir", tmp_path, "--vocab-size", 400)
    hf = tokenizers.ByteLevelBPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    probe = tmp_path / "p.jsonl"
    samples = TEXTS + ["the thematic cat's mat", "12345 日本語!"]
    probe.write_text("\n".join(json.dumps(t) for t in samples) + "\n")
    out = run("dataset_tool", "tokenize", "--vocab-file", tmp_path / "vocab.json", "--merge-file",
              tmp_path / "merges.txt", "--input", probe).stdout.split("\n")[:-1]
    for text, line in zip(samples, out):
        assert [int(x) for x in line.split()] == hf.encode(text).ids
