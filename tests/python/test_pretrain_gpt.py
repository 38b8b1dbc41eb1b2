"""pretrain_gpt end to end on the default corpus (built without downloads by
tools/prepare_default_data.sh): 2 ranks under mpirun, the loss goes down, the metrics file and the
log agree, and bad flags give one clear line."""
import json
import os
import subprocess

import pytest
from data_helpers import MPIRUN

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("MEGATRON_BUILD_DIR", os.path.join(ROOT, "build"))
PRETRAIN = os.path.join(BUILD_DIR, "bin", "pretrain_gpt")


@pytest.fixture(scope="module")
def default_data():
    subprocess.run(["bash", os.path.join(ROOT, "tools", "prepare_default_data.sh"), BUILD_DIR],
                   check=True, capture_output=True)
    data = os.path.join(ROOT, "data")
    return ["--data-path", os.path.join(data, "python_docs_text_document"),
            "--tokenizer-type", "GPT2BPETokenizer",
            "--vocab-file", os.path.join(data, "tokenizer", "vocab.json"),
            "--merge-file", os.path.join(data, "tokenizer", "merges.txt")]


def tiny(tmp_path, iters):
    return ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
            "--seq-length", "64", "--micro-batch-size", "4", "--global-batch-size", "16",
            "--train-iters", str(iters), "--lr", "3e-3", "--min-lr", "3e-4", "--lr-warmup-iters", "2",
            "--lr-decay-style", "cosine", "--attention-dropout", "0", "--hidden-dropout", "0",
            "--log-interval", "5", "--eval-interval", str(iters), "--eval-iters", "2",
            "--data-cache-path", str(tmp_path / "cache"), "--metrics-file", str(tmp_path / "metrics.jsonl")]


def test_loss_decreases_on_the_default_corpus(tmp_path, default_data):
    run = subprocess.run(MPIRUN + ["-np", "2", PRETRAIN] + tiny(tmp_path, 40) + default_data,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    train = [r for r in records if r["type"] == "train"]
    assert [r["iteration"] for r in train] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert train[-1]["lm loss"] < train[0]["lm loss"] - 1.0, train
    assert {r["type"] for r in records} >= {"valid", "test"}
    # The last rank prints Megatron's iteration line with the same loss.
    assert f"lm loss: {train[-1]['lm loss']:.6E}" in run.stdout
    assert "iteration       40/      40 | consumed samples:          640 |" in run.stdout
    # Megatron-LM's timer report follows each iteration line.
    assert "(min, max) time across ranks (ms):" in run.stdout
    assert "forward-backward ......" in run.stdout and "optimizer ......" in run.stdout


@pytest.mark.parametrize("flags,message", [
    (["--global-batch-size", "6"], "--global-batch-size (6) is not divisible by --micro-batch-size (4) x data-parallel size (2) = 8"),
    (["--tensor-model-parallel-size", "3"], "world size (2) is not divisible by --tensor-model-parallel-size (3)"),
    (["--lr-decay-style", "spiral"], "--lr-decay-style"),
    # Megatron-LM's own rule for its deprecated switch (the Mixtral script gives it beside rope).
    (["--no-position-embedding"], "--no-position-embedding is deprecated, use --position-embedding-type"),
])
def test_bad_flags_are_one_clear_line(tmp_path, default_data, flags, message):
    run = subprocess.run(MPIRUN + ["-np", "2", PRETRAIN] + tiny(tmp_path, 5) + default_data + flags,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    lines = [l for l in run.stderr.splitlines() if l.startswith("pretrain_gpt:")]
    assert len(lines) == 1, run.stderr
    assert message in lines[0]


def test_missing_data_names_the_file(tmp_path):
    run = subprocess.run([PRETRAIN] + tiny(tmp_path, 5) + [
        "--data-path", str(tmp_path / "nowhere"), "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "nowhere" in run.stderr and "pretrain_gpt:" in run.stderr, run.stderr


def test_megatron_script_flags_and_early_exits(tmp_path, default_data):
    """Flags from Megatron-LM's launch scripts run: the no-op switches are named in one warning
    (--overlap-grad-reduce is not one: it overlaps), --exit-interval and --exit-duration-in-mins
    save and stop early, as Megatron-LM does."""
    ckpt = tmp_path / "ckpt"
    switches = ["--use-mcore-models", "--use-flash-attn", "--overlap-grad-reduce", "--transformer-impl", "local",
                "--no-gradient-accumulation-fusion", "--recompute-activations", "--rerun-mode", "validate_results"]
    run = subprocess.run(MPIRUN + ["-np", "2", PRETRAIN] + tiny(tmp_path, 10) + default_data + switches
                         + ["--exit-interval", "4", "--save", str(ckpt)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout + run.stderr
    assert ("these Megatron-LM flags have no effect in megatron-cpp (see --help): --use-mcore-models "
            "--use-flash-attn --no-gradient-accumulation-fusion --rerun-mode\n") in out
    # One bucket per parameter group (weights, then biases and norms) at the default 40M elements.
    assert "Number of buckets for gradient all-reduce: 2 (overlapped with the backward pass)" in out
    assert "exiting program at iteration 4" in run.stdout
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    train = [r for r in map(json.loads, open(tmp_path / "metrics.jsonl")) if r["type"] == "train"]
    assert train[-1]["iteration"] == 4  # the partial log window is flushed before stopping

    refused = subprocess.run([PRETRAIN] + tiny(tmp_path, 10) + default_data + ["--rerun-mode", "report_stats"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--rerun-mode report_stats (rerunning iterations" in refused.stderr

    run = subprocess.run([PRETRAIN] + tiny(tmp_path, 10) + default_data
                         + ["--exit-duration-in-mins", "1e-6", "--save", str(tmp_path / "ckpt2")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "exiting program after" in run.stdout
    assert (tmp_path / "ckpt2" / "latest_checkpointed_iteration.txt").read_text().strip() == "1"


def test_overlapped_param_gather_gives_the_same_run(tmp_path, default_data):
    """pretrain_gpt at DP 2 with the distributed optimizer and an untied output layer: with
    --overlap-param-gather every layer (and the model, for its embedding) waits for its own part of
    the gather, as the start-up line says, and the losses are those of the gather at the end of the
    step, bit for bit; without --overlap-grad-reduce the flag is one clear line."""
    losses = {}
    for overlap in (False, True):
        flags = ["--use-distributed-optimizer", "--untie-embeddings-and-output-weights", "--ddp-bucket-size", "20000",
                 "--metrics-file", str(tmp_path / f"metrics{overlap}.jsonl"), "--log-interval", "1"]
        flags += ["--overlap-grad-reduce", "--overlap-param-gather"] if overlap else []
        run = subprocess.run(MPIRUN + ["-np", "2", PRETRAIN] + tiny(tmp_path, 6) + default_data + flags,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        said = "Parameter all-gather overlapped with the next forward pass" in run.stdout + run.stderr
        assert said == overlap
        losses[overlap] = [r["lm loss"] for r in map(json.loads, open(tmp_path / f"metrics{overlap}.jsonl"))
                           if r["type"] == "train"]
    assert len(losses[True]) == 6 and losses[True] == losses[False]
    run = subprocess.run([PRETRAIN] + tiny(tmp_path, 2) + default_data
                         + ["--use-distributed-optimizer", "--overlap-param-gather"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "--overlap-param-gather needs --overlap-grad-reduce" in run.stderr
