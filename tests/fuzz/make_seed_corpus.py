"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/), small valid inputs and a
few near misses, with numpy, safetensors and torch rather than the C++ code under test.
    .venv/bin/python tests/fuzz/make_seed_corpus.py [TARGET ...]"""
import io
import json
import os
import struct
import sys

import numpy as np
import torch
from safetensors.torch import save as safetensors_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from data_helpers import write_mmidx  # noqa: E402  (the numpy writer of the MMIDIDX format)


def put(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def indexed_dataset():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for name, docs, dtype in [("two_docs", [[[1, 2, 3], [4]], [[5, 6]]], np.uint16),
                                  ("int32", [[[70000, 1]]], np.int32), ("empty", [], np.uint16)]:
            prefix = os.path.join(tmp, name)
            write_mmidx(prefix, docs, dtype)
            idx, bin_ = open(prefix + ".idx", "rb").read(), open(prefix + ".bin", "rb").read()
            put("indexed_dataset", name, struct.pack("<I", len(idx)) + idx + bin_)
            put("indexed_dataset", name + "_short_bin", struct.pack("<I", len(idx)) + idx + bin_[:-1])


def gpt2_tokenizer():
    symbols = ["!", "h", "e", "l", "o", "Ġ", "w", "r", "d", "he", "ll", "llo", "hello", "<|endoftext|>"]
    vocab = json.dumps({s: i for i, s in enumerate(symbols)}).encode()
    merges = b"#version: 0.2\nh e\nl l\nll o\nhe llo\n"
    for name, text in [("hello", b"hello world!"), ("unicode", "h\u00e9llo \u4e16\u754c <|endoftext|>".encode())]:
        put("gpt2_tokenizer", name, struct.pack("<HH", len(vocab), len(merges)) + vocab + merges + text)
    put("gpt2_tokenizer", "bad_merge", struct.pack("<HH", len(vocab), 6) + vocab + b"h zz\n" + b"hi")


def punkt():
    """A small punkt_tab model (abbreviations, a collocation, starters, contexts) and text that
    reaches its rules, in both modes; and a malformed ortho_context.tab."""
    files = [b"dr\nu.s\ne.g", b"##number##\tpercent\ns\tbach", b"the\nhowever", b"dr\t4\nthe\t34\nbach\t2"]
    text = ("Dr. Smith went to the U.S. The end. J. S. Bach said (yes.) \u201cno.\u201d 3.14 percent!!! "
            "Ok... . . . next?\n\nNew \u039f\u0394\u039f\u03a3. \u0130st. \u65e5\u672c\u8a9e\u3002 x").encode() + b"\xff."
    for name, keep in [("plain", 0), ("keep_newlines", 1)]:
        put("punkt", name, bytes([keep]) + b"".join(struct.pack("<H", len(f)) for f in files) + b"".join(files) + text)
    bad = files[:3] + [b"dr\tmany"]
    put("punkt", "bad_ortho", b"\x00" + b"".join(struct.pack("<H", len(f)) for f in bad) + b"".join(bad) + b"A. B.")


def hf_tokenizer():
    """A tokenizer.json of each family's shape, trained small by HF tokenizers (hf_families.py)."""
    from hf_families import FAMILIES
    texts = ["hello world, it's 2024!", "caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \U0001f600", "don't   stop\n\nnow"] * 5
    for family in ("gpt2", "llama3", "qwen2", "llama2", "llama2_legacy"):
        data = FAMILIES[family](texts, vocab_size=300).to_str().encode()
        text = "<s>Hello  world<|end_of_text|> caf\u00e9\u0301 \U0001f44d\U0001f3fd 123456 x".encode() + b"\xff"
        put("hf_tokenizer", family, struct.pack("<H", len(data)) + data + text)


def tiktoken():
    """Megatron-LM's tiktoken JSON: the 256 bytes, then a few merged tokens."""
    import base64
    tokens = [bytes([i]) for i in range(256)] + [b"he", b"ll", b"hell", b"hello", b" w", b" wor", b"\xc3\xa9"]
    data = json.dumps([{"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": ""}
                       for i, t in enumerate(tokens)]).encode()
    for name, flag, text in [("v1", b"\x01", b"hello world <s>caf\xc3\xa9</s> 123"), ("v2", b"\x00", b"Hello\xff  x\n")]:
        put("tiktoken", name, struct.pack("<H", len(data)) + data + flag + text)


def sentencepiece():
    """Small .model files trained by the sentencepiece package: Llama 2's BPE shape, and unigram with a
    few normalization rules (a character map of 1 KB rather than NFKC's 240 KB, so the fuzzer runs fast)."""
    import sentencepiece as spm
    import tempfile
    texts = ["hello world, it's 2024!", "caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \U0001f600", "don't   stop now"] * 20
    text = "  Hello  world <mask> \uff46\uff55\uff4c\uff4c caf\u00e9\u0301 \U0001f44d 123 x".encode() + b"\xff"
    for name, config in [("bpe", dict(model_type="bpe", vocab_size=320, byte_fallback=True,
                                      normalization_rule_name="identity", remove_extra_whitespaces=False)),
                         ("unigram", dict(model_type="unigram", vocab_size=60, user_defined_symbols=["<mask>"]))]:
        model = io.BytesIO()
        with tempfile.NamedTemporaryFile("w", suffix=".tsv") as rules:
            rules.write("FF46\t66\nFF55\t75\nFF4C\t6C\n2460\t31\n3000\t20\nFB01\t66 69\n")  # full-width, (1), fi
            rules.flush()
            if name == "unigram":
                config["normalization_rule_tsv"] = rules.name
            spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model, minloglevel=2,
                                           hard_vocab_limit=False, **config)
        put("sentencepiece", name, struct.pack("<I", len(model.getvalue())) + model.getvalue() + text)


def npy():
    for name, array in [("int64", np.arange(6, dtype=np.int64).reshape(2, 3)), ("int32", np.arange(5, dtype=np.int32)),
                        ("empty", np.zeros(0, np.int64))]:
        buffer = io.BytesIO()
        np.save(buffer, array)
        put("npy", name, buffer.getvalue())


def safetensors():
    put("safetensors", "two", safetensors_bytes({"a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                                                 "b": torch.ones(2, dtype=torch.bfloat16)}))
    put("safetensors", "empty", safetensors_bytes({}))


def config_toml():
    put("config_toml", "tiny", open(os.path.join(HERE, "..", "..", "configs", "gpt2-tiny.toml")).read())
    put("config_toml", "types", 'bf16 = true\nsplit = "98,1,1"\ndata-path = ["0.3", "a"]\nlr = 1\n')
    put("config_toml", "bad", "hidden-size = [128\n")
    # Non-ASCII where toml++ 3.3 reached undefined behaviour, and where it is fine.
    put("config_toml", "non_ascii", 'seed = 1\u00e9\nsave = """\\\n  \u00e9"""\n')
    put("config_toml", "non_ascii_strings", "# caf\u00e9\nsave = '/tmp/caf\u00e9' # \u3001\n")


def deepspeed_json():
    put("deepspeed_json", "adam", json.dumps({
        "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0, "zero_optimization": {"stage": 1},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8}},
        "bf16": {"enabled": True}, "steps_per_print": 10}))
    put("deepspeed_json", "bad", '{"train_batch_size": 3,')


def tracker():
    for name, text in [("number", "12\n"), ("release", "release"), ("garbage", "two"), ("long", "9" * 30)]:
        put("tracker", name, text)


def checkpoint():
    buffer = io.BytesIO()
    torch.save({"iteration": 2, "args": {"num_layers": 2}, "model": {"w": torch.arange(4.0)}}, buffer)
    put("checkpoint", "small", buffer.getvalue())
    put("checkpoint", "cut", buffer.getvalue()[:300])


def checkpoint_pickle():
    # data.pkl as Python's torch.save writes it, with storages that fit the target's data/0 (64
    # bytes) and data/1 (32 bytes).
    import zipfile
    buffer = io.BytesIO()
    value = {"iteration": 2, "args": {"lr": 1e-3, "split": "98,1,1", "tied": True, "seq": [1, 2, 3]},
             "model": {"w": torch.arange(16.0), "b": torch.zeros(2, 2, dtype=torch.int64)},
             "shared": None, "pair": (1.5, -7)}
    value["same"] = value["model"]["w"]
    torch.save(value, buffer)
    with zipfile.ZipFile(buffer) as archive:
        put("checkpoint_pickle", "torch_save", archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl"))))
    put("checkpoint_pickle", "nested", b"\x80\x02" + b")" + b"\x85" * 2000 + b".")
    put("checkpoint_pickle", "huge_string", b"\x80\x02X\xff\xff\xff\xf0.")
    put("checkpoint_pickle", "memo_gap", b"\x80\x02Nr\xff\xff\xff\x00.")
    put("checkpoint_pickle", "setitem_short", b"\x80\x02}s.")
    put("checkpoint_pickle", "global", b"\x80\x02cos\nsystem\n.")


def dcp_metadata():
    """.metadata as torch.distributed.checkpoint writes it (protocol 4, memoised), the same object
    at protocol 2 (as ours are written), a chunk outside its tensor, and near misses."""
    import pickle
    import tempfile
    from torch.distributed.checkpoint import FileSystemReader, save
    with tempfile.TemporaryDirectory() as tmp:
        save({"w": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(2, dtype=torch.bfloat16)}, checkpoint_id=tmp,
             no_dist=True)
        raw = open(os.path.join(tmp, ".metadata"), "rb").read()
        metadata = FileSystemReader(tmp).read_metadata()
    metadata.storage_meta = None
    put("dcp_metadata", "torch_dcp", raw)
    put("dcp_metadata", "protocol2", pickle.dumps(metadata, protocol=2))
    put("dcp_metadata", "cut", raw[: len(raw) // 2])
    metadata.state_dict_metadata["w"].chunks[0].offsets = torch.Size([5, 0])
    put("dcp_metadata", "outside", pickle.dumps(metadata, protocol=2))


TARGETS = [indexed_dataset, gpt2_tokenizer, hf_tokenizer, tiktoken, sentencepiece, punkt, npy, safetensors, config_toml,
           deepspeed_json, tracker, checkpoint, checkpoint_pickle, dcp_metadata]
for make in TARGETS:  # all, or those named: make_seed_corpus.py dcp_metadata
    if len(sys.argv) == 1 or make.__name__ in sys.argv[1:]:
        make()
