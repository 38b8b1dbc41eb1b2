"""--profile --use-pytorch-profiler, as Megatron-LM's: one Kineto trace of the iterations after
--profile-step-start up to --profile-step-end, on the ranks of --profile-ranks, written into
--tensorboard-dir under torch.profiler's trace name, with the library's named ranges (forward,
loss, backward, optimizer, each layer) around the operators; and the flag mistakes refused."""
import glob
import json
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("MEGATRON_BUILD_DIR", os.path.join(ROOT, "build"))
PRETRAIN = os.path.join(BUILD_DIR, "bin", "pretrain_gpt")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def flags(tmp_path, iters=5):
    return ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
            "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", str(iters), "--lr", "1e-3",
            "--mock-data", "--vocab-size", "128", "--eval-iters", "0", "--device", "cpu",
            "--data-cache-path", str(tmp_path / "cache")]


def user_ranges(trace):
    return [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]


def test_trace_of_the_window_on_the_chosen_rank(tmp_path):
    tb = tmp_path / "tb"
    run = subprocess.run(MPIRUN + ["-np", "2", PRETRAIN] + flags(tmp_path) +
                         ["--profile", "--use-pytorch-profiler", "--profile-step-start", "1", "--profile-step-end", "3",
                          "--profile-ranks", "1", "--tensorboard-dir", str(tb)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # The last rank's TensorBoard event file shares the folder, as in Megatron-LM.
    files = sorted(f for f in os.listdir(tb) if "tfevents" not in f)
    assert len(files) == 1 and files[0].endswith(".pt.trace.json"), files  # rank 1 only, no temporary left
    trace = json.load(open(tb / files[0]))
    ranges = user_ranges(trace)
    # Iterations 2 and 3, two micro-batches each (global 4 / (micro 2 x DP 2) = 1: one micro-batch per rank).
    assert ranges.count("optimizer") == 2, ranges
    assert ranges.count("forward") == 2 and ranges.count("backward") == 2 and ranges.count("loss") == 2, ranges
    assert ranges.count("decoder.layers.0") == 2 and ranges.count("decoder.layers.1") == 2, ranges
    ops = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "cpu_op"}
    assert "aten::_fused_adamw_" in ops and "aten::mm" in ops, sorted(ops)[:50]
    assert "iterations 2-3: trace written to" in run.stdout + run.stderr


def test_a_window_cut_short_by_the_end_of_training_is_written(tmp_path):
    tb = tmp_path / "tb"
    run = subprocess.run([PRETRAIN] + flags(tmp_path, iters=3) +
                         ["--profile", "--use-pytorch-profiler", "--profile-step-start", "2", "--profile-step-end", "10",
                          "--tensorboard-dir", str(tb)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (path,) = glob.glob(str(tb / "*.pt.trace.json"))
    assert user_ranges(json.load(open(path))).count("optimizer") == 1  # iteration 3 only


@pytest.mark.parametrize("extra,message", [
    (["--profile", "--use-pytorch-profiler"], "--use-pytorch-profiler writes its trace into --tensorboard-dir"),
    (["--profile", "--profile-step-start", "4", "--profile-step-end", "4"],
     "--profile-step-end (4) must be after --profile-step-start (4)"),
    (["--profile", "--profile-ranks", "0", "3"], "--profile-ranks names rank 3, but the world has 1 ranks"),
    (["--profile"], "--profile without --use-pytorch-profiler marks CUDA profiler ranges for nsys"),
])
def test_profile_mistakes_are_one_clear_line(tmp_path, extra, message):
    run = subprocess.run([PRETRAIN] + flags(tmp_path) + extra, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert message in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and "terminate called" not in run.stderr
