"""Shared helpers for the data tests: the build's programs and a numpy reader/writer of
Megatron's MMIDIDX format written from the format description, independent of the C++ code."""
import os
import socket
import struct
import subprocess

import numpy as np
import pytest

# Absolute, so that a test may run a program from its own working directory.
BUILD_DIR = os.path.abspath(os.environ.get("MEGATRON_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build")))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
# A model trained in seconds, dropout off (layouts compare losses).
TINY = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
        "--micro-batch-size", "2", "--global-batch-size", "4", "--lr", "1e-3", "--log-interval", "1",
        "--eval-iters", "0", "--attention-dropout", "0", "--hidden-dropout", "0"]
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}
CODES = {np.dtype(v): k for k, v in DTYPES.items()}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def program(name):
    """A built program; a missing one fails the test (the build is part of what is tested)."""
    path = os.path.join(BUILD_DIR, "bin", name)
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: build the project first (scripts/build.sh) or set MEGATRON_BUILD_DIR")
    return path


def check_args(flags, world_size):
    """pretrain_gpt --check-args FLAGS at WORLD_SIZE=world_size: the completed process."""
    env = dict(os.environ, WORLD_SIZE=str(world_size))
    return subprocess.run([program("pretrain_gpt"), "--check-args", *map(str, flags)], capture_output=True, text=True,
                          timeout=60, env=env)


def run(name, *args, check=True):
    proc = subprocess.run([program(name), *map(str, args)], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}): {proc.stderr}")
    return proc


def write_mmidx(prefix, documents, dtype):
    """documents: list of documents, each a list of sequences (lists of ints)."""
    lengths, data = [], []
    doc_idx = [0]
    for doc in documents:
        for seq in doc:
            lengths.append(len(seq))
            data.extend(seq)
        doc_idx.append(len(lengths))
    itemsize = np.dtype(dtype).itemsize
    pointers = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) * itemsize if lengths else np.zeros(0, np.int64)
    with open(prefix + ".bin", "wb") as f:
        f.write(np.array(data, dtype=dtype).tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", CODES[np.dtype(dtype)]))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(np.array(lengths, dtype=np.int32).tobytes())
        f.write(np.array(pointers, dtype=np.int64).tobytes())
        f.write(np.array(doc_idx, dtype=np.int64).tobytes())


def read_mmidx(prefix):
    """Returns (dtype, lengths, pointers, doc_idx, tokens) straight from the bytes."""
    raw = open(prefix + ".idx", "rb").read()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    assert struct.unpack("<Q", raw[9:17])[0] == 1
    dtype = DTYPES[raw[17]]
    s, d = struct.unpack("<QQ", raw[18:34])
    off = 34
    lengths = np.frombuffer(raw, np.int32, s, off)
    pointers = np.frombuffer(raw, np.int64, s, off + 4 * s)
    doc_idx = np.frombuffer(raw, np.int64, d, off + 12 * s)
    assert len(raw) == off + 12 * s + 8 * d
    tokens = np.fromfile(prefix + ".bin", dtype=dtype)
    return dtype, lengths, pointers, doc_idx, tokens


def gpt2_bytes_to_unicode():
    """GPT-2's byte -> printable character table, written out from its published definition."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_punkt_tab(params, nltk_data):
    """nltk's PunktParameters as NLTK's punkt_tab model for english under the NLTK_DATA folder
    `nltk_data` (its own save_punkt_params writes only inside NLTK's data folders); returns the
    model folder."""
    folder = os.path.join(nltk_data, "tokenizers", "punkt_tab", "english")
    os.makedirs(folder)
    for name, rows in (("abbrev_types.txt", params.abbrev_types), ("sent_starters.txt", params.sent_starters),
                       ("collocations.tab", ["\t".join(c) for c in params.collocations]),
                       ("ortho_context.tab", [f"{k}\t{v}" for k, v in params.ortho_context.items()])):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write("\n".join(sorted(rows)))
    return folder
