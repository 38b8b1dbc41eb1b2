"""How much communication pretrain_gpt hides behind compute: --overlap-grad-reduce at DP 2, --domino at TP 2.

Every collective on host tensors is given an injected cost (MEGATRON_INJECT_COMM_LATENCY_US, D per
collective, and MEGATRON_INJECT_COMM_US_PER_MB, T per MiB of its tensor; a group's collectives run
one after another on one link), so that communication costs time on a machine where it is nearly
free. pretrain_gpt trains a small GPT (configs/gpt2-tiny.toml) under mpirun -np 2 four times in
one run of this script: without and with the overlap, each without and with the injected cost.
The exposed communication of each is t(cost) - t(0), from the median iteration time of the last
half, and the overlap's share of the plain run's exposed time is what it hides.

  --mode grad-reduce  DP 2: the gradient buckets' all-reduces, after the backward pass or (with
                      --overlap-grad-reduce) each launched as the last micro-batch completes it
                      (--use-distributed-optimizer: each bucket reduced to its shards' ranks, and
                      with --overlap-param-gather the updated parameters gathered under the next
                      forward);
  --mode domino       TP 2: the tensor-parallel all-reduces, on the critical path or (with --domino)
                      half a micro-batch's under the other half's compute.

    .venv/bin/python tools/bench/comm_overlap_bench.py --mode grad-reduce --latency-us 2000
    .venv/bin/python tools/bench/comm_overlap_bench.py --mode grad-reduce --latency-us 2000 --use-distributed-optimizer
    .venv/bin/python tools/bench/comm_overlap_bench.py --mode domino --us-per-mb 20000
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
MODES = {
    "grad-reduce": ["--overlap-grad-reduce"],
    "domino": ["--domino"],
}


def variants(a: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """The rows: plain, the overlap, and with the distributed optimizer the overlapped parameter gather too."""
    rows = [("plain", []), (MODES[a.mode][0], MODES[a.mode])]
    if a.mode == "grad-reduce" and a.use_distributed_optimizer:
        rows.append(("+ --overlap-param-gather", MODES[a.mode] + ["--overlap-param-gather"]))
    return rows


def run(a: argparse.Namespace, switches: list[str], cost: bool) -> tuple[float, str]:
    """Median ms per iteration over the last half, and pretrain_gpt's bucket line."""
    binary = Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")) / "bin" / "pretrain_gpt"
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", str(binary),
               "--config", str(ROOT / "configs" / "gpt2-tiny.toml"), "--mock-data", "--vocab-size", "512",
               "--micro-batch-size", str(a.micro_batch_size),
               "--global-batch-size", str(a.micro_batches * a.micro_batch_size * (2 if a.mode == "grad-reduce" else 1)),
               "--train-iters", str(a.iters), "--lr-warmup-iters", "1", "--log-interval", "1", "--eval-iters", "0",
               "--metrics-file", str(metrics)]
        cmd += (["--ddp-bucket-size", str(a.bucket_size)] if a.mode == "grad-reduce"
                else ["--tensor-model-parallel-size", "2"])
        cmd += ["--use-distributed-optimizer"] if a.use_distributed_optimizer else []
        cmd += switches
        env = dict(os.environ, OMP_NUM_THREADS="1",
                   MEGATRON_INJECT_COMM_LATENCY_US=str(a.latency_us if cost else 0),
                   MEGATRON_INJECT_COMM_US_PER_MB=str(a.us_per_mb if cost else 0))
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            sys.exit(f"comm_overlap_bench: pretrain_gpt failed ({' '.join(cmd[7:])}):\n"
                     f"{(out.stdout + out.stderr)[-3000:]}")
        times = [json.loads(line)["elapsed_ms"] for line in metrics.read_text().splitlines()]
        buckets = re.search(r"Number of buckets for gradient [^:]*: (\d+)", out.stdout + out.stderr)
        return statistics.median(times[len(times) // 2:]), (f", {buckets.group(1)} gradient buckets of "
                                                           f"~{a.bucket_size} elements" if buckets else "")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=sorted(MODES), default="grad-reduce")
    p.add_argument("--latency-us", type=int, default=0, help="injected latency per collective (D)")
    p.add_argument("--us-per-mb", type=float, default=0, help="injected time per MiB of a collective's tensor (T)")
    p.add_argument("--bucket-size", type=int, default=50000, help="--ddp-bucket-size (elements), grad-reduce mode")
    p.add_argument("--micro-batch-size", type=int, default=8)
    p.add_argument("--micro-batches", type=int, default=1, help="per rank and step")
    p.add_argument("--iters", type=int, default=16)
    p.add_argument("--use-distributed-optimizer", action="store_true", help="grad-reduce mode: ZeRO-1")
    a = p.parse_args()
    if a.latency_us == 0 and a.us_per_mb == 0:
        sys.exit("comm_overlap_bench: give --latency-us and/or --us-per-mb")
    rows, detail = {}, ""
    for name, switches in variants(a):
        (free, detail), (slow, _) = run(a, switches, False), run(a, switches, True)
        rows[name] = (free, slow, slow - free)
    layout = ("DP 2" + (", distributed optimizer" if a.use_distributed_optimizer else "")
              if a.mode == "grad-reduce" else "TP 2")
    print(f"{layout}, configs/gpt2-tiny.toml, {a.micro_batches} micro-batch(es) of {a.micro_batch_size}{detail}; "
          f"injected per collective: {a.latency_us / 1e3:.1f} ms + {a.us_per_mb / 1e3:.1f} ms/MiB")
    print(f"{'':26}{'free (ms)':>11}{'with cost (ms)':>16}{'exposed (ms)':>14}")
    for name, (free, slow, exposed) in rows.items():
        print(f"{name:26}{free:11.2f}{slow:16.2f}{exposed:14.2f}")
    plain = rows["plain"]
    print(f"communication share of the plain step: {plain[2] / plain[1]:.0%}")
    for name, (free, slow, exposed) in list(rows.items())[1:]:
        print(f"{name}: hidden {1 - max(exposed, 0.0) / plain[2]:.0%}; step time with cost / plain: "
              f"{slow / plain[1]:.3f}x, / plain without cost: {slow / plain[0]:.3f}x, "
              f"/ itself without cost: {slow / free:.3f}x")

if __name__ == "__main__":
    main()
