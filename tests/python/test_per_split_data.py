"""Megatron-LM's data sources beside --data-path: a blend per split (--train/valid/test-data-path,
or the JSON file of --per-split-data-args-path) and --data-args-path. Each split's samples against
megatron-core's BlendedMegatronDatasetBuilder with blend_per_split on the same files; runs with
each form of the flags."""
import json
import warnings

import numpy as np
import pytest
import torch

from data_helpers import check_args, write_mmidx
from test_checkpoint import PRETRAIN, run, tiny

warnings.filterwarnings("ignore")
VOCAB = 250  # tiny()'s; NullTokenizer's end of document is 249


def write_prefixes(tmp_path):
    rng = np.random.default_rng(3)
    for name, count in (("a", 120), ("b", 80), ("c", 60)):
        docs = [[rng.integers(0, VOCAB - 1, int(rng.integers(1, 60))).tolist()] for _ in range(count)]
        write_mmidx(str(tmp_path / name), docs, np.uint16)
    return {name: str(tmp_path / name) for name in "abc"}


class _Tokenizer:
    """The attributes megatron-core's dataset config reads from a tokenizer."""
    vocab_size, eod = VOCAB, VOCAB - 1
    unique_identifiers = {"class": "test_per_split_data", "vocab_size": VOCAB}


def test_each_split_from_its_own_blend_gives_megatron_cores_samples(tmp_path):
    mcore_builder = pytest.importorskip("megatron.core.datasets.blended_megatron_dataset_builder",
                                        reason="megatron-core is not installed: scripts/setup.sh pins it")
    from megatron.core.datasets.gpt_dataset import GPTDataset as McoreGPTDataset
    from megatron.core.datasets.gpt_dataset import GPTDatasetConfig as McoreConfig
    from megatron_cpp.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron_cpp.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    p = write_prefixes(tmp_path)
    # A weighted train blend, a single-prefix valid split, no test split.
    per_split = [([p["a"], p["b"]], [0.3, 0.7]), ([p["c"]], None), None]
    sizes = [400, 50, 0]
    started = not torch.distributed.is_initialized()
    if started:  # megatron-core's blend asks for the rank when it caches: a group of one
        torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    try:
        theirs = mcore_builder.BlendedMegatronDatasetBuilder(
            McoreGPTDataset, sizes, lambda: True,
            McoreConfig(random_seed=1234, sequence_length=32, blend_per_split=per_split, tokenizer=_Tokenizer(),
                        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
                        path_to_cache=str(tmp_path / "theirs"))).build()
    finally:
        if started:
            torch.distributed.destroy_process_group()
    # Megatron-LM's scripts pass --split along with the per-split paths; it does not apply.
    ours = BlendedMegatronDatasetBuilder(
        GPTDataset, sizes, lambda: True,
        GPTDatasetConfig(random_seed=1234, sequence_length=32, blend_per_split=per_split, split="969,30,1",
                         path_to_cache=str(tmp_path / "ours"))).build()
    for name, mine, their in zip(("train", "valid", "test"), ours, theirs):
        if their is None or len(their) == 0:
            assert mine is None, name
            continue
        assert len(mine) == len(their), name
        for i in range(len(their)):
            assert np.array_equal(their[i]["tokens"].numpy(), mine[i][:-1]), (name, i)
            assert np.array_equal(their[i]["labels"].numpy(), mine[i][1:]), (name, i)


def data_run(tmp_path, name, *flags):
    """A tiny run on the files, evaluating every 2 iterations: its train and validation losses."""
    metrics = tmp_path / f"{name}.jsonl"
    base = [f for f in tiny(4, "--eval-iters", "1", "--eval-interval", "2") if f != "--mock-data"]
    run([PRETRAIN, *base, "--tokenizer-type", "NullTokenizer", "--data-cache-path", str(tmp_path / "cache"),
         "--metrics-file", str(metrics), *flags])
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [(r["type"], r["iteration"], r["lm loss"]) for r in records]


def test_per_split_paths_train_and_validate_on_their_own_files_in_either_form(tmp_path):
    p = write_prefixes(tmp_path)
    inline = data_run(tmp_path, "inline", "--train-data-path", "0.4", p["a"], "0.6", p["b"], "--valid-data-path",
                      p["c"], "--test-data-path", p["c"])
    assert {t for t, _, _ in inline} >= {"train", "valid"}, inline
    spec = tmp_path / "per_split.json"
    spec.write_text(json.dumps({"train": f"0.4 {p['a']} 0.6 {p['b']}", "valid": [p["c"]], "test": [p["c"]]}))
    assert data_run(tmp_path, "file", "--per-split-data-args-path", str(spec)) == inline
    # The validation split is c's whole documents, not a cut of the training files.
    other = data_run(tmp_path, "other", "--train-data-path", "0.4", p["a"], "0.6", p["b"], "--valid-data-path",
                     p["a"], "--test-data-path", p["c"])
    assert [r for r in other if r[0] == "train"] == [r for r in inline if r[0] == "train"]
    assert [r for r in other if r[0] == "valid"] != [r for r in inline if r[0] == "valid"]


def test_data_args_path_is_data_path_read_from_a_file(tmp_path):
    p = write_prefixes(tmp_path)
    words = tmp_path / "data_args.txt"
    words.write_text(f"0.5 {p['a']}\n0.5 {p['b']}\n")
    assert data_run(tmp_path, "file", "--data-args-path", str(words), "--split", "80,10,10") == \
        data_run(tmp_path, "flag", "--data-path", "0.5", p["a"], "0.5", p["b"], "--split", "80,10,10")


@pytest.mark.parametrize("flags,message", [
    (["--data-path", "x", "--train-data-path", "y"], "give one data source"),
    (["--valid-data-path", "y"], "--valid-data-path and --test-data-path need --train-data-path"),
    (["--train-data-path", "y", "--per-split-data-args-path", "f.json"],
     "give --train/valid/test-data-path or --per-split-data-args-path, not both"),
    (["--train-data-path", "0.5", "y", "z"], "--train-data-path: a weighted blend is pairs of weight and prefix"),
])
def test_data_sources_that_do_not_fit_are_refused_naming_the_flags(flags, message):
    base = [f for f in tiny(2) if f != "--mock-data"]
    proc = check_args([*base, "--tokenizer-type", "NullTokenizer", *flags], 1)
    assert proc.returncode == 2 and message in proc.stdout, proc.stdout


def test_a_per_split_file_without_a_split_names_the_file_and_the_key(tmp_path):
    spec = tmp_path / "per_split.json"
    spec.write_text(json.dumps({"train": ["a"], "valid": None}))
    base = [f for f in tiny(2) if f != "--mock-data"]
    proc = run([PRETRAIN, *base, "--tokenizer-type", "NullTokenizer", "--per-split-data-args-path", str(spec)],
               check=False)
    assert proc.returncode != 0 and f"--per-split-data-args-path {spec}: no \"test\" key" in proc.stderr, \
        proc.stderr[-2000:]
