"""Datasets through the bindings: files written from Python (numpy arrays, torch tensors, lists)
are Megatron's bytes and are read by the C++ programs; files written by the C++ programs and by
an independent numpy writer read back in Python as zero-copy views; GPTDataset indices equal the
numpy reference; samplers and DataIterator hand out Megatron's batches."""
import numpy as np
import pytest
import torch

import megatron_cpp
from data_helpers import read_mmidx, run, write_mmidx
from test_gpt_dataset import ref_indices

DOCS = [[[5, 6, 7]], [[1], [2, 3]], [[9]], [[65535, 0, 4]]]


def write_with_bindings(prefix, docs, dtype):
    builder = megatron_cpp.IndexedDatasetBuilder(prefix + ".bin", dtype)
    kinds = [lambda s: np.array(s, np.int32), lambda s: torch.tensor(s), lambda s: list(s),
             lambda s: np.array(s, np.uint16)]
    for d, doc in enumerate(docs):
        for seq in doc:
            builder.add_item(kinds[d % len(kinds)](seq))
        builder.end_document()
    builder.finalize(prefix + ".idx")


@pytest.mark.parametrize("dtype", [np.uint16, np.int32, megatron_cpp.DType.INT64])
def test_python_written_files_are_megatrons_bytes_and_cpp_reads_them(tmp_path, dtype):
    np_dtype = dtype.numpy if isinstance(dtype, megatron_cpp.DType) else np.dtype(dtype)
    write_with_bindings(str(tmp_path / "py"), DOCS, dtype)
    write_mmidx(str(tmp_path / "ref"), DOCS, np_dtype.type)
    for ext in (".bin", ".idx"):
        assert (tmp_path / ("py" + ext)).read_bytes() == (tmp_path / ("ref" + ext)).read_bytes()
    # The C++ programs read it: merging it with itself gives the documents twice.
    write_mmidx(str(tmp_path / "twice"), DOCS + DOCS, np_dtype.type)
    run("merge_datasets", "--prefixes", tmp_path / "py", tmp_path / "py", "--output-prefix", tmp_path / "merged")
    assert (tmp_path / "merged.bin").read_bytes() == (tmp_path / "twice.bin").read_bytes()
    info = run("dataset_tool", "info", tmp_path / "py").stdout.split()
    assert info[info.index("documents") + 1] == "4" and info[info.index("sequences") + 1] == "5"


def test_cpp_and_numpy_written_files_read_back_as_views(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "1 2 3"}\n{"text": "7"}\n')
    run("preprocess_data", "--input", src, "--output-prefix", tmp_path / "pre", "--tokenizer-type", "NullTokenizer",
        "--vocab-size", 100, "--append-eod")
    pre = megatron_cpp.IndexedDataset(str(tmp_path / "pre_text_document"))
    assert [pre[i].tolist() for i in range(len(pre))] == [[1, 2, 3, 99], [7, 99]]
    assert pre.dtype == megatron_cpp.DType.UINT16 and pre[0].dtype == np.uint16

    write_mmidx(str(tmp_path / "np"), DOCS, np.uint16)
    ds = megatron_cpp.IndexedDataset(str(tmp_path / "np"))
    _, lengths, pointers, doc_idx, tokens = read_mmidx(str(tmp_path / "np"))
    assert (len(ds), ds.num_documents, ds.num_tokens) == (5, 4, len(tokens))
    np.testing.assert_array_equal(ds.sequence_lengths, lengths)
    np.testing.assert_array_equal(ds.sequence_pointers, pointers)
    np.testing.assert_array_equal(ds.document_indices, doc_idx)
    assert ds.get_document(1).tolist() == [1, 2, 3] and ds[-1].tolist() == [65535, 0, 4]
    assert ds.get(4, offset=1, length=1).tolist() == [0]
    # Views of the mapped .bin: read-only, no copy (sequences 1 and 2 are document 1's memory).
    view = ds[1]
    assert not view.flags.writeable and not view.flags.owndata
    assert np.shares_memory(ds.get_document(1), ds[2])
    with pytest.raises(IndexError, match=r"sequence 5 out of range for 5"):
        ds[5]


def test_builder_refuses_what_does_not_fit(tmp_path):
    builder = megatron_cpp.IndexedDatasetBuilder(str(tmp_path / "x.bin"), "uint8")
    with pytest.raises(RuntimeError, match=r"token id 300 .* does not fit uint8"):
        builder.add_item([300])
    with pytest.raises(TypeError, match=r"expected integer token ids, found dtype float64"):
        builder.add_item(np.array([1.5]))
    with pytest.raises(TypeError, match=r"expected integer token ids, found a Float tensor"):
        builder.add_item(torch.tensor([1.0]))
    with pytest.raises(TypeError, match=r"found float16"):
        megatron_cpp.IndexedDatasetBuilder(str(tmp_path / "y.bin"), np.float16)
    with pytest.raises(RuntimeError, match=r"lengths to sum to the 3 tokens, found 2"):
        builder.add_document(np.array([1, 2, 3]), [1, 1])
    with pytest.raises(RuntimeError, match=r"nowhere.idx: index file not found"):
        megatron_cpp.IndexedDataset(str(tmp_path / "nowhere"))


def test_gpt_dataset_indices_equal_the_numpy_reference(tmp_path):
    rng = np.random.RandomState(7)
    docs = [[list(rng.randint(0, 500, rng.randint(1, 40)))] for _ in range(60)]
    write_with_bindings(str(tmp_path / "corpus"), docs, np.uint16)
    ds = megatron_cpp.IndexedDataset(str(tmp_path / "corpus"))
    config = megatron_cpp.GPTDatasetConfig(sequence_length=16, random_seed=5, path_to_cache=str(tmp_path / "cache"))
    gpt = megatron_cpp.GPTDataset(ds, range=(0, 50), num_samples=200, config=config)
    doc, smp, shf, epochs, _ = ref_indices(ds.sequence_lengths, (0, 50), 200, 16, 5)
    np.testing.assert_array_equal(gpt.document_index, doc)
    np.testing.assert_array_equal(gpt.sample_index, smp)
    np.testing.assert_array_equal(gpt.shuffle_index, shf)
    assert gpt.num_epochs == epochs and not gpt.loaded_from_cache and not gpt.shuffle_index.flags.writeable
    # The same again comes from the cache files, memory-mapped.
    again = megatron_cpp.GPTDataset(ds, range=(0, 50), num_samples=200, config=config)
    assert again.loaded_from_cache and np.array_equal(again.shuffle_index, shf)
    tokens, _ = gpt.get(0)
    assert len(gpt[0]) == gpt.sample_length == 17 and gpt[0].tolist() == tokens.tolist()


def test_samplers_and_the_data_iterator_give_megatron_batches():
    assert list(megatron_cpp.MegatronPretrainingSampler(10, 2, 2, 1, 2)) == [[4, 5], [8, 9]]
    sampler = megatron_cpp.MegatronPretrainingSampler(8, 0, 2, 0, 1)
    train, valid, test = megatron_cpp.build_mock_gpt_datasets(
        64, 63, [8, 2, 2], megatron_cpp.GPTDatasetConfig(sequence_length=8))
    it = megatron_cpp.DataIterator(train, sampler, megatron_cpp.BatchOptions(eod_token=63, eod_mask_loss=True), prefetch=1)
    batch = next(it)
    assert set(batch) == {"text", "tokens", "labels", "loss_mask", "attention_mask", "position_ids"}
    assert batch["tokens"].shape == (2, 8) and batch["tokens"].dtype == torch.int64
    samples = torch.tensor(np.stack([train[0], train[1]]))
    assert torch.equal(batch["tokens"], samples[:, :-1]) and torch.equal(batch["labels"], samples[:, 1:])
    assert torch.equal(batch["text"], samples)  # what Megatron-LM's legacy get_batch splits itself
    assert torch.equal(batch["loss_mask"], (batch["tokens"] != 63).float())
    assert it.consumed_samples == 2 and len(list(it)) == 3
    with pytest.raises(StopIteration):
        next(it)
    assert megatron_cpp.build_batch(train, [0, 1])["tokens"].shape == (2, 8)
