"""GPTDataset indices and samples against a numpy re-statement of Megatron-LM's construction
(gpt_dataset.py _build_document_sample_shuffle_indices, helpers.cpp build_sample_idx, the
split bookends), numpy's RandomState for the shuffles, and torch.randperm for the cyclic sampler."""
import math
import os

import numpy as np
import pytest

from data_helpers import read_mmidx, run, write_mmidx


# --- reference ---------------------------------------------------------------------------------

def ref_split_ranges(split, n):
    weights = [float(x) for x in split.split(",")]
    weights += [0.0] * (3 - len(weights))
    w = (np.array(weights) / np.sum(weights)).tolist()
    ends = [0.0]
    for x in w:
        ends.append(ends[-1] + x)
    out = []
    for i in range(3):
        if ends[i + 1] <= ends[i]:
            out.append(None)
        else:
            out.append((int(round(ends[i] * float(n))), int(round(ends[i + 1] * float(n)))))
    return out


def ref_build_sample_idx(sizes, doc_idx, seq_length, num_epochs, tokens_per_epoch, drop_last, extra):
    if drop_last:
        num_samples = (num_epochs * tokens_per_epoch - extra) // seq_length
    else:
        num_samples = math.ceil(float(np.float32(num_epochs * tokens_per_epoch - extra) / np.float32(seq_length)))
    sample_idx = np.zeros((num_samples + 1, 2), dtype=np.int64)
    d, off = 0, 0
    k = 1
    while k <= num_samples:
        remaining = seq_length + extra
        while remaining != 0:
            doc_len = sizes[doc_idx[d]] - off
            remaining -= doc_len
            if remaining <= 0:
                off += remaining + doc_len - extra
                remaining = 0
            else:
                if d == len(doc_idx) - 1:
                    off = sizes[doc_idx[d]] - extra
                    break
                d += 1
                off = 0
        sample_idx[k] = (d, off)
        k += 1
    return sample_idx


def ref_indices(sizes, rng_range, num_samples, seq_length, seed, drop_last=True, extra=1):
    indices = np.arange(rng_range[0], rng_range[1], dtype=np.int32)
    tokens_per_epoch = int(np.sum(sizes[indices]))
    num_epochs = 1
    if num_samples is not None:
        tokens = tokens_per_epoch
        while tokens < num_samples * seq_length + extra:
            num_epochs += 1
            tokens += tokens_per_epoch
    if num_epochs == 1:
        separate = False
    else:
        sans_final = ((num_epochs - 1) * tokens_per_epoch - extra) // seq_length
        from_final = num_samples - sans_final
        per_epoch = (tokens_per_epoch - extra) // seq_length
        separate = from_final < int(0.80 * per_epoch)
    rs = np.random.RandomState(seed)

    def doc_index(epochs):
        di = np.mgrid[0:epochs, 0:len(indices)][1]
        di[:] = indices
        di = di.reshape(-1).astype(np.int32)
        rs.shuffle(di)
        return di

    if not separate:
        document_index = doc_index(num_epochs)
    else:
        document_index = np.concatenate([doc_index(num_epochs - 1), doc_index(1)])
    sample_index = ref_build_sample_idx(sizes, document_index, seq_length, num_epochs,
                                        tokens_per_epoch, drop_last, extra)
    total = sample_index.shape[0] - 1
    first = sans_final if separate else total
    a = np.arange(0, first, dtype=np.uint32)
    rs.shuffle(a)
    if first < total:
        b = np.arange(first, total, dtype=np.uint32)
        rs.shuffle(b)
        a = np.concatenate([a, b])
    return document_index, sample_index, a, num_epochs, separate


def ref_sample(tokens, pointers, sizes, itemsize, document_index, sample_index, shuffle_index, i,
               seq_length, extra=1, pad=-1):
    def get(doc, offset, length):
        start = pointers[doc] // itemsize + offset
        return tokens[start:start + length].astype(np.int64)

    k = shuffle_index[i]
    (d0, o0), (d1, o1) = sample_index[k], sample_index[k + 1]
    if d0 == d1:
        parts = [get(document_index[d0], o0, o1 - o0 + extra)]
    else:
        parts = []
        for j in range(d0, d1 + 1):
            off = 0 if j > d0 else o0
            length = sizes[document_index[j]] - off if j < d1 else o1 + extra
            parts.append(get(document_index[j], off, length))
    text = np.concatenate(parts)
    return np.concatenate([text, np.full(seq_length + extra - len(text), pad, np.int64)])


# --- tests -------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 1234, 2**32 - 1])
def test_shuffle_matches_numpy_random_state(seed):
    sizes = [1, 2, 7, 1000, 65537, 3]
    out = run("dataset_tool", "shuffle", "--seed", seed, "--sizes", ",".join(map(str, sizes))).stdout
    rs = np.random.RandomState(seed)
    for n, line in zip(sizes, out.strip().split("\n")):
        expected = np.arange(n, dtype=np.int64)
        rs.shuffle(expected)
        assert [int(x) for x in line.split()] == expected.tolist()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.RandomState(42)
    docs = []
    for d in range(300):
        length = int(rng.randint(1, 120))
        docs.append([(rng.randint(0, 50000, size=length - 1).tolist() + [50256])])
    path = tmp_path_factory.mktemp("corpus")
    prefix = str(path / "docs")
    write_mmidx(prefix, docs, np.uint16)
    return prefix


CASES = [
    # (seq_length, seed, split, num_samples)        what it exercises
    (32, 1234, "900,90,10", "none,none,none"),     # one epoch per split
    (64, 7, "98,2,0", "200,5,none"),               # 2+ epochs, test split absent
    (16, 3, "100", "1500"),                        # a little over one epoch: final epoch separate
    (16, 3, "100", "2700"),                        # nearly two epochs: one shuffle
    (128, 99, "80,10,10", "1000,300,300"),         # many epochs for the small splits
]


@pytest.mark.parametrize("seq_length, seed, split, counts", CASES)
def test_gpt_indices_and_samples_match_megatron(tmp_path, corpus, seq_length, seed, split, counts):
    out = tmp_path / "out"
    os.makedirs(out)
    run("dataset_tool", "gpt-indices", "--data-path", corpus, "--seq-length", seq_length,
        "--seed", seed, "--split", split, "--num-samples", counts, "--out", out,
        "--max-samples", 400)
    dtype, lengths, pointers, _, tokens = read_mmidx(corpus)
    sizes = np.array(lengths, dtype=np.int32)
    ranges = ref_split_ranges(split, len(sizes))
    counts = [None if c == "none" else int(c) for c in counts.split(",")] + [None] * 3
    for s, name in enumerate(["train", "valid", "test"]):
        if ranges[s] is None:
            assert not os.path.exists(out / f"{name}_shuffle_index.npy")
            continue
        doc, smp, shf, _, _ = ref_indices(sizes, ranges[s], counts[s], seq_length, seed)
        np.testing.assert_array_equal(np.load(out / f"{name}_document_index.npy"), doc)
        np.testing.assert_array_equal(np.load(out / f"{name}_sample_index.npy"), smp)
        np.testing.assert_array_equal(np.load(out / f"{name}_shuffle_index.npy"), shf)
        samples = np.load(out / f"{name}_samples.npy")
        for i in range(samples.shape[0]):
            expected = ref_sample(tokens, pointers, sizes, np.dtype(dtype).itemsize, doc, smp, shf,
                                  i, seq_length)
            np.testing.assert_array_equal(samples[i], expected)


def test_separate_final_epoch_flag(tmp_path, corpus):
    out = tmp_path / "o"
    os.makedirs(out)
    text = run("dataset_tool", "gpt-indices", "--data-path", corpus, "--seq-length", 16,
               "--split", "100", "--num-samples", "1500", "--out", out).stdout
    _, lengths, _, _, _ = read_mmidx(corpus)
    _, _, _, epochs, separate = ref_indices(np.array(lengths), (0, len(lengths)), 1500, 16, 1234)
    assert f"epochs {epochs} separate_final_epoch {int(separate)}" in text
    assert epochs == 2 and separate


def test_partial_validation_sample_is_padded(tmp_path, corpus):
    out = tmp_path / "o"
    os.makedirs(out)
    run("dataset_tool", "gpt-indices", "--data-path", corpus, "--seq-length", 50, "--split",
        "50,50", "--out", out, "--keep-partial-valid")
    dtype, lengths, pointers, _, tokens = read_mmidx(corpus)
    sizes = np.array(lengths)
    rng_range = ref_split_ranges("50,50", len(sizes))[1]
    doc, smp, shf, _, _ = ref_indices(sizes, rng_range, None, 50, 1234, drop_last=False)
    np.testing.assert_array_equal(np.load(out / "valid_sample_index.npy"), smp)
    samples = np.load(out / "valid_samples.npy")
    assert (samples == -1).any()
    for i in range(samples.shape[0]):
        np.testing.assert_array_equal(
            samples[i], ref_sample(tokens, pointers, sizes, 2, doc, smp, shf, i, 50))


def ref_cyclic(total, consumed, mbs, rank, dp, sharding, batches):
    import torch
    out = []
    while len(out) < batches:
        active = total - total % (mbs * dp)
        epoch, in_epoch = consumed // active, consumed % active
        g = torch.Generator()
        g.manual_seed(epoch)
        if sharding:
            bucket = (total // (mbs * dp)) * mbs
            idx = [rank * bucket + x for x in torch.randperm(bucket, generator=g).tolist()[in_epoch // dp:]]
        else:
            full = (total // mbs) * mbs
            idx = torch.randperm(full, generator=g).tolist()[in_epoch:][rank::dp]
        batch = []
        for i in idx:
            batch.append(i)
            if len(batch) == mbs:
                consumed += mbs * dp
                out.append(batch)
                batch = []
                if len(out) == batches:
                    break
    return out


@pytest.mark.parametrize("sharding", [False, True])
@pytest.mark.parametrize("consumed", [0, 24])
def test_cyclic_sampler_matches_torch_randperm(sharding, consumed):
    args = ["sampler", "--type", "cyclic", "--total", 103, "--consumed", consumed,
            "--micro-batch-size", 4, "--dp-rank", 1, "--dp-size", 3, "--batches", 30]
    if sharding:
        args.append("--data-sharding")
    got = [[int(x) for x in l.split()] for l in run("dataset_tool", *args).stdout.strip().split("\n")]
    assert got == ref_cyclic(103, consumed, 4, 1, 3, sharding, 30)


@pytest.mark.parametrize("seed, low, high", [(0, 1, 4096), (1234, 0, 7), (2**40 + 5, -3, 1000003),
                                             (2**33, 0, 2**32)])
def test_pcg64_integers_match_numpy_default_rng(seed, low, high):
    out = run("dataset_tool", "integers", "--seed", seed, "--low", low, "--high", high, "--n", 5000).stdout
    expected = np.random.default_rng(seed).integers(low, high, size=5000,
                                                    dtype=np.int32 if high <= 2**31 else np.uint32)
    assert [int(x) for x in out.split()] == expected.tolist()


def test_float_token_file_is_refused(tmp_path):
    prefix = str(tmp_path / "f")
    write_mmidx(prefix, [[[1, 2, 3]], [[4, 5]]], np.float32)
    proc = run("dataset_tool", "gpt-indices", "--data-path", prefix, "--seq-length", 2, "--out",
               tmp_path, check=False)
    assert proc.returncode != 0 and "expected integer token ids, found dtype float32" in proc.stderr
