"""--tensorboard-dir: the last rank writes Megatron-LM's scalars to an event file that TensorBoard's
own reader opens, with the values of --metrics-file (which the iteration line prints)."""
import json
import os
import subprocess

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator  # TensorBoard's own reader

from test_bindings_pretrain import ENV, MPIRUN, PRETRAIN, command_line, tiny


def read_events(directory):
    files = [f for f in os.listdir(directory) if "tfevents" in f]
    assert len(files) == 1, files  # one writer: the last rank
    acc = event_accumulator.EventAccumulator(str(directory), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def f32(x):
    return float(np.float32(x))  # event files hold float32


def test_scalars_of_a_two_rank_run_as_megatron_lm_names_them(tmp_path):
    board = tmp_path / "board"
    flags = tiny(tmp_path, iters=6, tensorboard_dir=str(board), log_validation_ppl_to_tensorboard=True,
                 log_timers_to_tensorboard=True, log_throughput=True, log_world_size_to_tensorboard=True,
                 log_num_zeros_in_grad=True, log_params_norm=True, log_interval=3, eval_interval=3)
    metrics_file = tmp_path / "metrics.jsonl"
    # Info lines on: the timers' report is compared with their scalars.
    proc = subprocess.run(MPIRUN + ["-np", "2", PRETRAIN] + command_line(flags) + ["--metrics-file", str(metrics_file)],
                          capture_output=True, text=True, env=dict(ENV, MEGATRON_LOG_LEVEL="info"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    scalars = read_events(board)
    rows = [json.loads(line) for line in open(metrics_file)]
    evals = [r for r in rows if r["type"] != "train"]

    iterations = list(range(1, 7))
    samples = [8 * i for i in iterations]  # global batch 8
    for tag in ("learning-rate", "batch-size", "lm loss", "loss-scale", "world-size", "grad-norm"):
        assert [s for s, _ in scalars[tag]] == iterations, tag
        assert [s for s, _ in scalars[tag + " vs samples"]] == samples, tag
        assert [v for _, v in scalars[tag]] == [v for _, v in scalars[tag + " vs samples"]], tag
    assert [v for _, v in scalars["batch-size"]] == [8.0] * 6
    assert [v for _, v in scalars["world-size"]] == [2.0] * 6
    assert [v for _, v in scalars["loss-scale"]] == [1.0] * 6
    # The metrics file logs every third iteration, its loss averaged over the three: the scalars are
    # each iteration's own values, and average to it.
    for row in (r for r in rows if r["type"] == "train"):
        it = row["iteration"]
        window = [v for s, v in scalars["lm loss"] if it - 3 < s <= it]
        assert sum(window) / 3 == pytest.approx(row["lm loss"], rel=1e-6)
        assert dict(scalars["learning-rate"])[it] == f32(row["learning_rate"])
        assert dict(scalars["grad-norm"])[it] == f32(row["grad_norm"])
    # Validation (and the final test, under the same tags, as Megatron-LM writes it).
    assert [(s, v) for s, v in scalars["lm loss validation"]] == [(e["iteration"], f32(e["lm loss"])) for e in evals]
    assert [v for _, v in scalars["lm loss validation ppl"]] == [f32(e["lm loss PPL"]) for e in evals]
    assert [s for s, _ in scalars["lm loss validation vs samples"]] == [8 * e["iteration"] for e in evals]
    # --log-timers-to-tensorboard: seconds per iteration and TFLOP/s at each log interval.
    assert [s for s, _ in scalars["iteration-time"]] == [3, 6] and all(v > 0 for _, v in scalars["iteration-time"])
    assert [s for s, _ in scalars["throughput"]] == [3, 6]
    # Each timer as `<name>-time`: the slowest rank's seconds per iteration, as the log's (min, max).
    reports = [block for block in proc.stdout.split("(min, max) time across ranks (ms):")[1:]]
    assert len(reports) == 2, proc.stdout[-3000:]
    for name in ("forward-backward", "optimizer"):
        printed = [float(r.split(name + " ")[1].split("(")[1].split(")")[0].split(", ")[1]) for r in reports]
        assert [s for s, _ in scalars[name + "-time"]] == [3, 6], name
        assert [v for _, v in scalars[name + "-time"]] == pytest.approx([p / 1000 for p in printed], abs=6e-6), name
    # --log-num-zeros-in-grad, --log-params-norm: each iteration's values, the log interval's last
    # in the metrics file.
    for tag, key in (("num-zeros", "num_zeros"), ("params-norm", "params_norm")):
        assert [s for s, _ in scalars[tag]] == iterations, tag
        for row in (r for r in rows if r["type"] == "train"):
            assert dict(scalars[tag])[row["iteration"]] == f32(row[key]), tag


def test_interval_and_refusals(tmp_path):
    board = tmp_path / "board"
    flags = tiny(tmp_path, iters=4, tensorboard_dir=str(board), tensorboard_log_interval=2,
                 no_log_loss_scale_to_tensorboard=True)
    proc = subprocess.run([PRETRAIN] + command_line(flags), capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    scalars = read_events(board)
    assert [s for s, _ in scalars["lm loss"]] == [2, 4]
    assert "loss-scale" not in scalars and "world-size" not in scalars and "iteration-time" not in scalars
    for extra, message in ((["--wandb-project", "p"], "--wandb-project p: Weights & Biases needs network access"),
                           (["--log-timers-to-tensorboard"], "--log-*-to-tensorboard flags need --tensorboard-dir")):
        flags = tiny(tmp_path)
        proc = subprocess.run([PRETRAIN] + command_line(flags) + extra, capture_output=True, text=True, env=ENV,
                              timeout=60)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr
