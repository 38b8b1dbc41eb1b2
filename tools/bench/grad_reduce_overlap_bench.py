"""How much of the data-parallel gradient reduce --overlap-grad-reduce hides behind the backward pass.

Every collective is given an injected latency D (MEGATRON_INJECT_COMM_LATENCY_US), so that
communication costs time on a machine where it is nearly free. pretrain_gpt trains a small GPT at
DP 2 (mpirun -np 2, --micro-batches per step, gradient buckets of --bucket-size elements) four
times in one run of this script: without and with --overlap-grad-reduce, each at D = 0 and at D.
The exposed communication of each is t(D) - t(0), the median iteration time of the last half.
Without overlap every bucket's all-reduce is waited for after the backward pass; with it each is
launched as the last micro-batch completes it, so only the last bucket's (the embedding's) and the
step's other collectives (the loss average) remain exposed.

    .venv/bin/python tools/bench/grad_reduce_overlap_bench.py [--latency-us 20000] [--bucket-size 50000]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(a: argparse.Namespace, overlap: bool, latency_us: int) -> tuple[float, int]:
    """Median ms per iteration over the last half, and the number of buckets pretrain_gpt reports."""
    binary = Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")) / "bin" / "pretrain_gpt"
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", str(binary),
               "--config", str(ROOT / "configs" / "gpt2-tiny.toml"), "--mock-data", "--vocab-size", "512",
               "--micro-batch-size", str(a.micro_batch_size), "--global-batch-size", str(2 * a.micro_batches * a.micro_batch_size),
               "--train-iters", str(a.iters), "--lr-warmup-iters", "1", "--log-interval", "1", "--eval-iters", "0",
               "--ddp-bucket-size", str(a.bucket_size), "--metrics-file", str(metrics)]
        if overlap:
            cmd.append("--overlap-grad-reduce")
        env = dict(os.environ, MEGATRON_INJECT_COMM_LATENCY_US=str(latency_us), OMP_NUM_THREADS="1")
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            sys.exit(f"grad_reduce_overlap_bench: pretrain_gpt failed (overlap {overlap}, D {latency_us} us):\n"
                     f"{(out.stdout + out.stderr)[-3000:]}")
        times = [json.loads(line)["elapsed_ms"] for line in metrics.read_text().splitlines()]
        buckets = re.search(r"Number of buckets for gradient all-reduce: (\d+)", out.stdout + out.stderr)
        return statistics.median(times[len(times) // 2:]), int(buckets.group(1)) if buckets else 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--latency-us", type=int, default=20000, help="injected latency per collective")
    p.add_argument("--bucket-size", type=int, default=50000, help="--ddp-bucket-size (elements)")
    p.add_argument("--micro-batch-size", type=int, default=4)
    p.add_argument("--micro-batches", type=int, default=2, help="per rank and step (only the last one's backward "
                   "overlaps the reduce)")
    p.add_argument("--iters", type=int, default=16)
    a = p.parse_args()
    injected = a.latency_us / 1e3
    rows = {}
    for name, overlap in (("serial", False), ("overlapped", True)):
        (free, buckets), (slow, _) = run(a, overlap, 0), run(a, overlap, a.latency_us)
        rows[name] = (free, slow, slow - free)
    print(f"DP 2, configs/gpt2-tiny.toml, {a.micro_batches} micro-batch(es) of {a.micro_batch_size}, {buckets} gradient buckets of "
          f"~{a.bucket_size} elements, injected latency {injected:.1f} ms per collective")
    print(f"{'':12}{'D = 0 (ms)':>12}{'D (ms)':>10}{'exposed (ms)':>14}")
    for name, (free, slow, exposed) in rows.items():
        print(f"{name:12}{free:12.2f}{slow:10.2f}{exposed:14.2f}")
    serial, overlapped = rows["serial"][2], rows["overlapped"][2]
    print(f"exposed communication hidden by --overlap-grad-reduce: {1 - max(overlapped, 0.0) / serial:.0%} "
          f"({serial / injected:.1f} D -> {overlapped / injected:.1f} D); step time at D, overlapped / serial: "
          f"{rows['overlapped'][1] / rows['serial'][1]:.3f}x")


if __name__ == "__main__":
    main()
