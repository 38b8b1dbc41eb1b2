"""MMIDIDX files: ours are byte-identical to a writer built from the format description, and
bad files fail with one line naming the file."""
import json
import os

import numpy as np
import pytest

from data_helpers import read_mmidx, run, write_mmidx

DOCS = [[[5, 6, 7]], [[1], [2, 3]], [], [[65535, 0]]]


@pytest.mark.parametrize("dtype", [np.uint16, np.int32, np.int64, np.uint8])
def test_merge_of_spec_files_is_byte_identical(tmp_path, dtype):
    docs = DOCS if dtype != np.uint8 else [[[5, 6, 7]], [[1], [2, 3]], [], [[255, 0]]]
    a, b = str(tmp_path / "in" / "a"), str(tmp_path / "in" / "b")
    os.makedirs(tmp_path / "in")
    write_mmidx(a, docs[:2], dtype)
    write_mmidx(b, docs[2:], dtype)
    write_mmidx(str(tmp_path / "expected"), docs, dtype)
    out = str(tmp_path / "merged")
    run("merge_datasets", "--input", tmp_path / "in", "--output-prefix", out)
    for ext in (".bin", ".idx"):
        assert open(out + ext, "rb").read() == open(str(tmp_path / "expected") + ext, "rb").read()
    info = run("dataset_tool", "info", out).stdout.split()
    assert info[info.index("documents") + 1] == "4"
    assert info[info.index("sequences") + 1] == "4"


def test_preprocess_null_tokenizer_writes_spec_files(tmp_path):
    lines = [{"text": "1 2 3"}, {"text": "7"}, {"text": ["4 5", "6"]}]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    prefix = str(tmp_path / "out")
    run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type",
        "NullTokenizer", "--vocab-size", 100, "--append-eod", "--workers", 2)
    dtype, lengths, pointers, doc_idx, tokens = read_mmidx(prefix + "_text_document")
    assert dtype == np.uint16
    # EOD = vocab_size - 1 = 99 closes each document's last sentence.
    assert tokens.tolist() == [1, 2, 3, 99, 7, 99, 4, 5, 6, 99]
    assert lengths.tolist() == [4, 2, 2, 2]
    assert pointers.tolist() == [0, 8, 12, 16]
    assert doc_idx.tolist() == [0, 1, 2, 4]


def test_preprocess_partitions_give_megatron_lms_merged_order(tmp_path, monkeypatch):
    # Megatron-LM deals line i to partition i % N, then merges partitions 0..N-1 in order; with
    # --keep-sequential-samples a partition is a run of consecutive lines.
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": str(i)}) + "\n" for i in range(10)))
    for flags, order in ((["--partitions", 3], [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]),
                         (["--partitions", 3, "--keep-sequential-samples"], list(range(10))),
                         (["--partitions", 1], list(range(10)))):
        prefix = str(tmp_path / "out")
        run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type", "NullTokenizer",
            "--vocab-size", 100, "--batch-lines", 2, "--workers", 2, *flags)
        _, _, _, doc_idx, tokens = read_mmidx(prefix + "_text_document")
        assert tokens.tolist() == order and doc_idx.tolist() == list(range(11)), flags
    # A malformed line is named by its line in the file, whichever partition reads it.
    src.write_text("".join(json.dumps({"text": str(i)}) + "\n" for i in range(5)) + '{"text": \n')
    proc = run("preprocess_data", "--input", src, "--output-prefix", str(tmp_path / "bad"), "--tokenizer-type",
               "NullTokenizer", "--vocab-size", 100, "--partitions", 4, check=False)
    assert proc.returncode != 0 and f"{src}:6:" in proc.stderr, proc.stderr
    # Sentence splitting needs NLTK's punkt model: without one, one line saying so, nothing written.
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "no_nltk_data"))
    monkeypatch.setenv("HOME", str(tmp_path))
    proc = run("preprocess_data", "--input", src, "--output-prefix", str(tmp_path / "ss"), "--tokenizer-type",
               "NullTokenizer", "--vocab-size", 100, "--split-sentences", check=False)
    assert proc.returncode != 0 and "--split-sentences" in proc.stderr and "punkt_tab" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not list(tmp_path.glob("ss*"))


def test_preprocess_reports_malformed_lines(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"text": "1 2"}\n{"text": "3"\n{"text": "4"}\n')
    prefix = str(tmp_path / "out")
    args = ["--input", src, "--output-prefix", prefix, "--tokenizer-type", "NullTokenizer",
            "--vocab-size", 10]
    proc = run("preprocess_data", *args, check=False)
    assert proc.returncode != 0
    assert f"{src}:2:" in proc.stderr and "malformed JSON" in proc.stderr
    assert not os.path.exists(prefix + "_text_document.idx")  # nothing half-written
    assert not [p for p in os.listdir(tmp_path) if "tmp" in p]
    proc = run("preprocess_data", *args, "--skip-malformed")
    assert "1 malformed lines skipped" in proc.stderr
    _, _, _, doc_idx, tokens = read_mmidx(prefix + "_text_document")
    assert tokens.tolist() == [1, 2, 4]
    assert len(doc_idx) == 3


@pytest.mark.parametrize("damage, message", [
    (lambda idx, bin_: (b"XXXXXXXXX" + idx[9:], bin_), "magic"),
    (lambda idx, bin_: (idx[:-4], bin_), "bytes"),
    (lambda idx, bin_: (idx, bin_[:-2]), "truncated"),
    (lambda idx, bin_: (idx[:17] + b"\x0c" + idx[18:], bin_), "dtype code"),
])
def test_corrupted_files_fail_with_one_line(tmp_path, damage, message):
    prefix = str(tmp_path / "d")
    write_mmidx(prefix, DOCS, np.uint16)
    idx, bin_ = open(prefix + ".idx", "rb").read(), open(prefix + ".bin", "rb").read()
    idx, bin_ = damage(idx, bin_)
    open(prefix + ".idx", "wb").write(idx)
    open(prefix + ".bin", "wb").write(bin_)
    proc = run("dataset_tool", "info", prefix, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr and prefix in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_missing_pair_is_named(tmp_path):
    prefix = str(tmp_path / "d")
    write_mmidx(prefix, DOCS, np.uint16)
    os.remove(prefix + ".bin")
    proc = run("dataset_tool", "info", prefix, check=False)
    assert proc.returncode != 0 and prefix + ".bin" in proc.stderr and "not found" in proc.stderr


def test_preprocess_several_keys_and_merge_order(tmp_path):
    src = tmp_path / "two.jsonl"
    src.write_text('{"a": "1 2", "b": "3"}\n{"a": "4", "b": "5 6 7"}\n')
    prefix = str(tmp_path / "o")
    run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type",
        "NullTokenizer", "--vocab-size", 70000, "--json-keys", "a", "b")
    dtype_a, _, _, _, tokens_a = read_mmidx(prefix + "_a_document")
    _, _, _, _, tokens_b = read_mmidx(prefix + "_b_document")
    assert dtype_a == np.int32  # vocabulary >= 65500
    assert tokens_a.tolist() == [1, 2, 4] and tokens_b.tolist() == [3, 5, 6, 7]
    # --prefixes merges in the order given (b then a).
    out = str(tmp_path / "m")
    run("merge_datasets", "--prefixes", prefix + "_b_document", prefix + "_a_document",
        "--output-prefix", out)
    _, _, _, doc_idx, tokens = read_mmidx(out)
    assert tokens.tolist() == [3, 5, 6, 7, 1, 2, 4] and doc_idx.tolist() == [0, 1, 2, 3, 4]
