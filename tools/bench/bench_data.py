#!/usr/bin/env python3
"""Data pipeline benchmarks, each printed as a ratio against a reference measured in this run.

  1. Tokenization throughput (MB/s of JSONL) per thread count T:
       preprocess_data --workers T   vs  HF tokenizers ByteLevelBPETokenizer.encode_batch with
       T Rayon threads (texts already in memory)  vs  a plain-Python Megatron-style loop
       (json.loads, GPT-2 regex + BPE with a word cache, numpy writes), one process.
     Then with --tokenizer-type HuggingFaceTokenizer on tokenizer.json files shaped as Llama 3
     (regex split + byte-level BPE) and Llama 2 (metaspace BPE with byte fallback) ship them (HF
     tokenizers trains them here, tests/python/hf_families.py) vs that tokenizer.json's own
     Tokenizer.encode_batch with T Rayon threads; and --tokenizer-type TikTokenizer on the GPT-2
     vocabulary written as Megatron-LM's tiktoken JSON vs tiktoken's encode_batch with T threads
     (the Encoding built as Megatron-LM builds it, v2 pattern); and --tokenizer-type
     Llama2Tokenizer on a .model of Llama 2's shape (BPE, identity normalizer, byte fallback; the
     sentencepiece package trains it here) vs sentencepiece's encode with T threads.
  2. GPTDataset index building on 1 M documents / 100 M tokens (bench_data) vs numpy's
     RandomState.shuffle of the same document and sample indices (what Megatron-LM spends in numpy).
  3. Sample fetch: samples/s of build_batch vs a numpy re-statement of Megatron's __getitem__.
  Also --split-sentences: preprocess_data --workers T with a punkt model trained here by nltk vs
  Megatron-LM's path in one Python process (nltk's punkt per document, HF encode per sentence).

    python3 tools/bench/bench_data.py --build-dir build [--threads 1 2] [--max-mb 16]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def build_corpus(path, max_mb):
    """Standard-library docstrings (tools/make_corpus.py) plus module sources, as JSONL."""
    import sysconfig
    docs = os.path.join(os.path.dirname(path), "docs.jsonl")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_corpus.py"), "--output", docs],
                   check=True, capture_output=True)
    size = 0
    with open(path, "w", encoding="utf-8") as out:
        for line in open(docs, encoding="utf-8"):
            out.write(line)
            size += len(line)
        stdlib = sysconfig.get_paths()["stdlib"]
        for root, dirs, names in os.walk(stdlib):
            dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "__pycache__"))
            for name in sorted(names):
                if size > max_mb * 1e6:
                    return
                if name.endswith(".py"):
                    try:
                        text = open(os.path.join(root, name), encoding="utf-8").read()
                    except UnicodeDecodeError:
                        continue
                    line = json.dumps({"text": text}, ensure_ascii=False) + "\n"
                    out.write(line)
                    size += len(line)


# --- plain-Python Megatron-style reference -------------------------------------------------------

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


class PythonGPT2:
    # \p{L} and \p{N} approximated with the re module's Unicode classes (no third-party regex).
    PATTERN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")

    def __init__(self, vocab_file, merges_file):
        self.encoder = json.load(open(vocab_file, encoding="utf-8"))
        lines = open(merges_file, encoding="utf-8").read().split("\n")[1:]
        self.ranks = {tuple(l.split(" ")): i for i, l in enumerate(lines) if l}
        self.byte_encoder = bytes_to_unicode()
        self.cache = {}
        self.eod = self.encoder["<|endoftext|>"]

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = list(token)
        while len(word) > 1:
            pairs = [(self.ranks.get(p, 1 << 60), i) for i, p in enumerate(zip(word, word[1:]))]
            rank, _ = min(pairs)
            if rank == 1 << 60:
                break
            first, second = word[_], word[_ + 1]
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == first and word[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        ids = [self.encoder[w] for w in word]
        self.cache[token] = ids
        return ids

    def tokenize(self, text):
        ids = []
        for tok in self.PATTERN.findall(text):
            ids.extend(self.bpe("".join(self.byte_encoder[b] for b in tok.encode("utf-8"))))
        return ids


def python_preprocess(corpus, vocab, merges, out_prefix):
    tok = PythonGPT2(vocab, merges)
    t0 = time.perf_counter()
    size = 0
    lengths = []
    with open(out_prefix + ".bin", "wb") as out:
        for line in open(corpus, encoding="utf-8"):
            ids = tok.tokenize(json.loads(line)["text"]) + [tok.eod]
            out.write(np.array(ids, dtype=np.uint16).tobytes())
            lengths.append(len(ids))
            size += len(line)
    return size / (time.perf_counter() - t0) / 1e6


HF_JSON_SCRIPT = r"""
import json, sys, time, tokenizers
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
size = sum(len(l) for l in open(sys.argv[1], encoding="utf-8"))
tok = tokenizers.Tokenizer.from_file(sys.argv[2])
tok.encode_batch(texts[:200])
t0 = time.perf_counter()
tok.encode_batch(texts)
print(size / (time.perf_counter() - t0) / 1e6)
"""

SENTENCEPIECE_SCRIPT = r"""
import json, sys, time, sentencepiece
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
size = sum(len(l) for l in open(sys.argv[1], encoding="utf-8"))
sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[2])
sp.encode(texts[:200], num_threads=int(sys.argv[3]))
t0 = time.perf_counter()
sp.encode(texts, num_threads=int(sys.argv[3]))
print(size / (time.perf_counter() - t0) / 1e6)
"""

TIKTOKEN_SCRIPT = r"""
import base64, json, sys, time, tiktoken
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
size = sum(len(l) for l in open(sys.argv[1], encoding="utf-8"))
n_special, threads = int(sys.argv[3]), int(sys.argv[4])
ranks = {base64.b64decode(e["token_bytes"]): e["rank"] + n_special for e in json.load(open(sys.argv[2]))}
specials = ["<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>"]
specials += [f"<SPECIAL_{i}>" for i in range(len(specials), n_special)]
enc = tiktoken.Encoding(name="bench", pat_str=sys.argv[5], mergeable_ranks=ranks,
                        special_tokens={t: i for i, t in enumerate(specials)})
enc.encode_batch(texts[:200], num_threads=threads, allowed_special="all")
t0 = time.perf_counter()
enc.encode_batch(texts, num_threads=threads, allowed_special="all")
print(size / (time.perf_counter() - t0) / 1e6)
"""

# Megatron-LM's v2 tiktoken pattern (tests/python/test_tiktoken.py checks our tokenizer against it).
TIKTOKEN_V2 = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
               r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|"
               r"\s+(?!\S)|\s+")

# Megatron-LM's --split-sentences path in one process: nltk's punkt on each document (in pieces
# of 10^6 characters), then each sentence tokenized (here by HF tokenizers, faster than
# Megatron-LM's own Python GPT-2 tokenizer).
SPLIT_SCRIPT = r"""
import json, sys, time, tokenizers
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
d = sys.argv[4]
params = PunktParameters()
lines = lambda name: [l.rstrip("\n") for l in open(f"{d}/{name}", encoding="utf-8") if l.strip()]
params.abbrev_types = set(lines("abbrev_types.txt"))
params.sent_starters = set(lines("sent_starters.txt"))
params.collocations = {tuple(l.split("\t")) for l in lines("collocations.tab")}
for l in lines("ortho_context.tab"):
    k, v = l.split("\t")
    params.ortho_context[k] = int(v)
splitter = PunktSentenceTokenizer(params)
tok = tokenizers.ByteLevelBPETokenizer(sys.argv[2], sys.argv[3])
size = sum(len(l) for l in open(sys.argv[1], encoding="utf-8"))
t0 = time.perf_counter()
for line in open(sys.argv[1], encoding="utf-8"):
    text = json.loads(line)["text"]
    for piece in range(0, len(text), 1000000):
        for sentence in splitter.tokenize(text[piece:piece + 1000000]):
            tok.encode(sentence)
print(size / (time.perf_counter() - t0) / 1e6)
"""

HF_SCRIPT = r"""
import json, sys, time, tokenizers
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
size = sum(len(l) for l in open(sys.argv[1], encoding="utf-8"))
tok = tokenizers.ByteLevelBPETokenizer(sys.argv[2], sys.argv[3])
tok.encode_batch(texts[:200])
t0 = time.perf_counter()
tok.encode_batch(texts)
print(size / (time.perf_counter() - t0) / 1e6)
"""


def main():
    parser = argparse.ArgumentParser(description="data pipeline benchmarks")
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-mb", type=float, default=16)
    parser.add_argument("--vocab-size", type=int, default=50257)
    parser.add_argument("--skip-index", action="store_true")
    args = parser.parse_args()
    binary = lambda name: os.path.join(args.build_dir, "bin", name)
    work = tempfile.mkdtemp(prefix="bench_data_")
    corpus = os.path.join(work, "corpus.jsonl")
    build_corpus(corpus, args.max_mb)
    mb = os.path.getsize(corpus) / 1e6

    import tokenizers
    trainer = tokenizers.ByteLevelBPETokenizer()
    texts = [json.loads(l)["text"] for l in open(corpus, encoding="utf-8")]
    trainer.train_from_iterator(texts, vocab_size=args.vocab_size, min_frequency=2,
                                special_tokens=["<|endoftext|>"], show_progress=False)
    trainer.save_model(work)
    vocab, merges = os.path.join(work, "vocab.json"), os.path.join(work, "merges.txt")
    print(f"corpus: {mb:.1f} MB, {len(texts)} documents; vocabulary {len(json.load(open(vocab)))} "
          f"tokens (HF-trained byte-level BPE)")

    print("\n== tokenization (MB/s of JSONL) ==")
    py = python_preprocess(corpus, vocab, merges, os.path.join(work, "py"))
    for t in args.threads:
        t0 = time.perf_counter()
        proc = subprocess.run([binary("preprocess_data"), "--input", corpus, "--output-prefix",
                        os.path.join(work, "ours"), "--tokenizer-type", "GPT2BPETokenizer",
                        "--vocab-file", vocab, "--merge-file", merges, "--append-eod", "--workers",
                        str(t), "--log-interval", "100000000"], check=True, capture_output=True,
                       text=True)
        wall = mb / (time.perf_counter() - t0)
        # The tool's own rate: reading, JSON, tokenizing and writing, without process start-up
        # and vocabulary loading (HF's timing leaves those out as well).
        ours = float(re.search(r"([0-9.]+) MB/s\)\.\s*$", proc.stderr).group(1)) * 1.048576
        env = dict(os.environ, RAYON_NUM_THREADS=str(t), TOKENIZERS_PARALLELISM="true")
        hf = float(subprocess.run([sys.executable, "-c", HF_SCRIPT, corpus, vocab, merges], env=env,
                                  check=True, capture_output=True, text=True).stdout)
        print(f"threads {t}: preprocess_data {ours:.2f} MB/s ({wall:.2f} with start-up) | HF encode_batch {hf:.2f} MB/s | "
              f"ratio vs HF {ours / hf:.2f}x | vs plain Python (1 process, {py:.2f} MB/s) "
              f"{ours / t / py:.1f}x per thread")

    # A punkt model trained on the corpus by nltk's PunktTrainer, written in punkt_tab form.
    from nltk.tokenize.punkt import PunktTrainer
    punkt_trainer = PunktTrainer()
    punkt_trainer.train("\n".join(texts)[:2000000], finalize=True)
    params = punkt_trainer.get_params()
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    from data_helpers import write_punkt_tab
    punkt = write_punkt_tab(params, os.path.join(work, "nltk_data"))
    print("\n== --split-sentences: punkt, then GPT-2 BPE per sentence (MB/s of JSONL) ==")
    ref = float(subprocess.run([sys.executable, "-c", SPLIT_SCRIPT, corpus, vocab, merges, punkt], check=True,
                               capture_output=True, text=True).stdout)
    for t in args.threads:
        proc = subprocess.run([binary("preprocess_data"), "--input", corpus, "--output-prefix",
                               os.path.join(work, "ss"), "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", vocab,
                               "--merge-file", merges, "--append-eod", "--split-sentences", "--workers", str(t),
                               "--log-interval", "100000000"], check=True, capture_output=True, text=True,
                              env=dict(os.environ, NLTK_DATA=os.path.join(work, "nltk_data")))
        ours = float(re.search(r"([0-9.]+) MB/s\)\.\s*$", proc.stderr).group(1)) * 1.048576
        print(f"threads {t}: preprocess_data {ours:.2f} MB/s | nltk punkt + HF encode, 1 process {ref:.2f} MB/s | "
              f"{ours / t / ref:.1f}x per thread")

    from hf_families import FAMILIES
    for family in ("llama3", "llama2"):
        path = os.path.join(work, f"{family}.json")
        FAMILIES[family](texts, vocab_size=args.vocab_size).save(path)
        print(f"\n== tokenizer.json shaped as {family} (HuggingFaceTokenizer; MB/s of JSONL) ==")
        for t in args.threads:
            proc = subprocess.run([binary("preprocess_data"), "--input", corpus, "--output-prefix",
                                   os.path.join(work, family), "--tokenizer-type", "HuggingFaceTokenizer",
                                   "--tokenizer-model", path, "--append-eod", "--workers", str(t),
                                   "--log-interval", "100000000"], check=True, capture_output=True, text=True)
            ours = float(re.search(r"([0-9.]+) MB/s\)\.\s*$", proc.stderr).group(1)) * 1.048576
            env = dict(os.environ, RAYON_NUM_THREADS=str(t), TOKENIZERS_PARALLELISM="true")
            hf = float(subprocess.run([sys.executable, "-c", HF_JSON_SCRIPT, corpus, path], env=env,
                                      check=True, capture_output=True, text=True).stdout)
            print(f"threads {t}: preprocess_data {ours:.2f} MB/s | HF Tokenizer.encode_batch {hf:.2f} MB/s | "
                  f"ratio vs HF {ours / hf:.2f}x")

    import base64
    from data_helpers import gpt2_bytes_to_unicode
    byte_of = {c: b for b, c in gpt2_bytes_to_unicode().items()}
    entries = [bytes([i]) for i in range(256)]
    seen = set(entries)
    for token, _ in sorted(json.load(open(vocab, encoding="utf-8")).items(), key=lambda kv: kv[1]):
        if all(c in byte_of for c in token) and bytes(byte_of[c] for c in token) not in seen:
            seen.add(bytes(byte_of[c] for c in token))
            entries.append(bytes(byte_of[c] for c in token))
    tik = os.path.join(work, "tiktoken.json")
    json.dump([{"rank": i, "token_bytes": base64.b64encode(b).decode(), "token_str": ""} for i, b in enumerate(entries)],
              open(tik, "w"))
    n_special = 1000
    print("\n== Megatron-LM tiktoken JSON, GPT-2 vocabulary (TikTokenizer; MB/s of JSONL) ==")
    for t in args.threads:
        proc = subprocess.run([binary("preprocess_data"), "--input", corpus, "--output-prefix",
                               os.path.join(work, "tik"), "--tokenizer-type", "TikTokenizer", "--tokenizer-model", tik,
                               "--tiktoken-num-special-tokens", str(n_special), "--vocab-size",
                               str(n_special + len(entries)), "--append-eod", "--workers", str(t),
                               "--log-interval", "100000000"], check=True, capture_output=True, text=True)
        ours = float(re.search(r"([0-9.]+) MB/s\)\.\s*$", proc.stderr).group(1)) * 1.048576
        ref = float(subprocess.run([sys.executable, "-c", TIKTOKEN_SCRIPT, corpus, tik, str(n_special), str(t),
                                    TIKTOKEN_V2], check=True, capture_output=True, text=True).stdout)
        print(f"threads {t}: preprocess_data {ours:.2f} MB/s | tiktoken encode_batch {ref:.2f} MB/s | "
              f"ratio vs tiktoken {ours / ref:.2f}x")

    import io
    import sentencepiece
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, minloglevel=2, model_type="bpe", vocab_size=32000,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False, split_digits=True,
        max_sentence_length=1 << 20, input_sentence_size=20000, shuffle_input_sentence=True)
    sp_model = os.path.join(work, "tokenizer.model")
    open(sp_model, "wb").write(model.getvalue())
    print("\n== SentencePiece .model of Llama 2's shape, 32000 pieces (Llama2Tokenizer; MB/s of JSONL) ==")
    for t in args.threads:
        proc = subprocess.run([binary("preprocess_data"), "--input", corpus, "--output-prefix",
                               os.path.join(work, "sp"), "--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model",
                               sp_model, "--append-eod", "--workers", str(t), "--log-interval", "100000000"],
                              check=True, capture_output=True, text=True)
        ours = float(re.search(r"([0-9.]+) MB/s\)\.\s*$", proc.stderr).group(1)) * 1.048576
        ref = float(subprocess.run([sys.executable, "-c", SENTENCEPIECE_SCRIPT, corpus, sp_model, str(t)],
                                   check=True, capture_output=True, text=True).stdout)
        print(f"threads {t}: preprocess_data {ours:.2f} MB/s | sentencepiece encode {ref:.2f} MB/s | "
              f"ratio vs sentencepiece {ours / ref:.2f}x")

    if args.skip_index:
        return
    print("\n== GPTDataset indices: 1 M documents, 100 M tokens, seq 2048 ==")
    rng = np.random.RandomState(0)
    lengths = rng.randint(1, 200, size=1_000_000).astype(np.int32)
    lengths[-1] += 100_000_000 - int(lengths.sum())  # exactly 100 M tokens
    prefix = os.path.join(work, "big")
    with open(prefix + ".idx", "wb") as f:
        import struct
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8))
        f.write(struct.pack("<QQ", len(lengths), len(lengths) + 1))
        f.write(lengths.tobytes())
        f.write((np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)]) * 2).tobytes())
        f.write(np.arange(len(lengths) + 1, dtype=np.int64).tobytes())
    with open(prefix + ".bin", "wb") as f:
        f.truncate(int(lengths.sum()) * 2)  # sparse: index building reads only the .idx
    num_samples = 100_000
    out = subprocess.run([binary("bench_data"), "--data-path", prefix, "--seq-length", "2048",
                          "--num-samples", str(num_samples), "--micro-batch-size", "8",
                          "--batches", "500", "--cache-dir", os.path.join(work, "cache")],
                         check=True, capture_output=True, text=True).stdout
    print(out.strip())
    built = float(re.search(r"index build: .* ([0-9.]+) s", out).group(1))
    epochs = int(re.search(r"(\d+) epochs", out).group(1))
    t0 = time.perf_counter()
    rs = np.random.RandomState(1234)
    doc = np.tile(np.arange(len(lengths), dtype=np.int32), epochs)
    rs.shuffle(doc)
    shuffle = np.arange(num_samples + 1000, dtype=np.uint32)
    rs.shuffle(shuffle)
    ref = time.perf_counter() - t0
    print(f"index build {built:.2f} s vs numpy's shuffles alone {ref:.2f} s: {ref / built:.1f}x")

    print("\n== sample fetch (seq 2048) ==")
    m = re.search(r"fetch \(attention mask off\): (\d+) samples/s", out)
    ours = float(m.group(1))
    cache = os.path.join(work, "cache")
    files = sorted(os.listdir(cache))
    load = lambda suffix: np.load(os.path.join(cache, [f for f in files if f.endswith(suffix)][0]))
    doc_i, smp_i, shf_i = load("document_index.npy"), load("sample_index.npy"), load("shuffle_index.npy")
    tokens = np.memmap(prefix + ".bin", dtype=np.uint16, mode="r")
    ptr = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)])
    t0 = time.perf_counter()
    n = 2000
    for i in range(n):
        k = shf_i[i]
        (d0, o0), (d1, o1) = smp_i[k], smp_i[k + 1]
        parts = []
        for j in range(d0, d1 + 1):
            d = doc_i[j]
            off = o0 if j == d0 else 0
            end = o1 + 1 if j == d1 else lengths[d]
            parts.append(tokens[ptr[d] + off:ptr[d] + end])
        text = np.concatenate(parts).astype(np.int64)
        tok, lab = text[:-1], text[1:]
        pos = np.arange(2048)
        loss = np.ones(2048, np.float32)
    ref = n / (time.perf_counter() - t0)
    print(f"build_batch {ours:.0f} samples/s vs numpy __getitem__ {ref:.0f} samples/s: {ours / ref:.1f}x")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
