"""Chaos: a 2-rank job trained under an outer restart loop while a driver kills a random rank
(SIGKILL) or stops one (SIGSTOP, until the peers' collective timeout ends the job) at random
moments, saves included, at least 10 times. Each restart resumes from --load of the same folder;
the final checkpoint and the losses after the last restart equal an uninterrupted run's, bit for
bit."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import torch

from data_helpers import MPIRUN, program

ITERS = 500


def job(ck: Path, metrics: Path, timeout_minutes: str = "0.05") -> list[str]:
    """The short collective timeout ends a stopped rank's peers; fault-free runs get Megatron-LM's
    default, so that a loaded machine does not end them."""
    return MPIRUN + ["-np", "2", program("pretrain_gpt"),
                     "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
                     "--micro-batch-size", "2", "--global-batch-size", "8", "--train-iters", str(ITERS),
                     "--lr", "2e-3", "--min-lr", "2e-4", "--lr-warmup-iters", "2", "--lr-decay-style", "cosine",
                     "--mock-data", "--vocab-size", "256", "--attention-dropout", "0", "--hidden-dropout", "0",
                     "--tensor-model-parallel-size", "2", "--log-interval", "1", "--eval-iters", "0",
                     "--save", str(ck), "--load", str(ck), "--save-interval", "1", "--keep-last-checkpoints", "2",
                     "--distributed-timeout-minutes", timeout_minutes, "--metrics-file", str(metrics)]


def losses(metrics: Path) -> dict[int, float]:
    return {r["iteration"]: r["lm loss"] for r in map(json.loads, metrics.read_text().splitlines())
            if r["type"] == "train"}


def ranks_of(launcher: subprocess.Popen) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def tracker(ck: Path) -> int:
    path = ck / "latest_checkpointed_iteration.txt"
    return int(path.read_text()) if path.exists() else 0


def test_killed_and_stopped_ranks_lose_nothing(tmp_path):
    reference = subprocess.run(job(tmp_path / "ref", tmp_path / "ref.jsonl", "10"), capture_output=True, text=True,
                               timeout=300)
    assert reference.returncode == 0, reference.stderr[-3000:]

    ck, rng = tmp_path / "chaos", random.Random(20261125)
    faults, restarts = [], 0
    while len(faults) < 10:
        launcher = subprocess.Popen(job(ck, tmp_path / f"run{restarts}.jsonl"), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        metrics = tmp_path / f"run{restarts}.jsonl"
        restarts += 1
        # Faults land in training and its saves: after this run's first iteration line.
        while launcher.poll() is None and not (metrics.exists() and metrics.stat().st_size > 0):
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 0.5))
        ranks = ranks_of(launcher)
        if launcher.poll() is not None or len(ranks) != 2:
            launcher.wait()
            continue  # finished (or between processes) before the fault: just go on
        sig = rng.choice([signal.SIGKILL, signal.SIGKILL, signal.SIGSTOP])
        os.kill(rng.choice(ranks), sig)
        faults.append((signal.Signals(sig).name, tracker(ck)))
        try:
            _, err = launcher.communicate(timeout=120)
        finally:
            try:
                os.killpg(launcher.pid, signal.SIGKILL)  # what is left of the job, a stopped rank included
            except ProcessLookupError:
                pass
        assert launcher.returncode != 0, err[-3000:]
        if sig == signal.SIGSTOP:
            assert "timed out" in err or "time out" in err or "MPI_ABORT" in err, err[-3000:]
        if tracker(ck) == ITERS:  # the faults came too late: start over
            break
    assert len(faults) >= 10, faults
    # The last restart runs to the end.
    final = tmp_path / "final.jsonl"
    done = subprocess.run(job(ck, final, "10"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert tracker(ck) == ITERS
    resumed = losses(final)
    assert resumed and all(losses(tmp_path / "ref.jsonl")[i] == v for i, v in resumed.items()), (faults, resumed)
    for rank_dir in ["mp_rank_00", "mp_rank_01"]:
        got = torch.load(ck / f"iter_{ITERS:07d}" / rank_dir / "model_optim_rng.pt", weights_only=True)
        want = torch.load(tmp_path / "ref" / f"iter_{ITERS:07d}" / rank_dir / "model_optim_rng.pt", weights_only=True)
        for name, tensor in want["model"].items():
            assert torch.equal(got["model"][name], tensor), (name, faults)
        assert got["consumed_train_samples"] == want["consumed_train_samples"] == ITERS * 8
