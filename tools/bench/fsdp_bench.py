"""Sharded data parallelism at DP 2: step time and peak memory of each --data-parallel-sharding-strategy,
and what ZeRO-3's prefetch hides of its parameter gathers.

pretrain_gpt trains configs/gpt2-tiny.toml under mpirun -np 2 (host tensors, MPI) once per strategy:
no_shard, optim (ZeRO-1), optim_grads (ZeRO-2), optim_grads_params (ZeRO-3). Each row gives the median
iteration time of the last half, its ratio to no_shard measured in the same run of this script, the
peak host memory rank 0 allocated by the end of the first iteration (pretrain_gpt's "max allocated",
blocks of 16 KiB and more), and what rank 0 holds for parameters, gradients, main parameters and
optimizer state at start-up.

Then no_shard and ZeRO-3 with and without --no-fsdp-prefetch, each without and with an injected cost
per collective (MEGATRON_INJECT_COMM_LATENCY_US; a group's collectives run one after another on one
link): the exposed communication is t(cost) - t(0), and the prefetch's share of ZeRO-3's is what it
hides.

    .venv/bin/python tools/bench/fsdp_bench.py --latency-us 2000
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
STRATEGIES = {
    "no_shard": [],
    "optim": ["--use-distributed-optimizer"],
    "optim_grads": ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads"],
    "optim_grads_params": ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params"],
}


def run(a: argparse.Namespace, flags: list[str], latency_us: int) -> tuple[float, float, list[float]]:
    """Median ms per iteration over the last half, rank 0's peak MiB, rank 0's start-up MiB held."""
    binary = Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")) / "bin" / "pretrain_gpt"
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", str(binary),
               "--config", str(ROOT / "configs" / "gpt2-tiny.toml"), "--mock-data", "--vocab-size", "512",
               "--num-layers", str(a.num_layers), "--hidden-size", str(a.hidden_size),
               "--micro-batch-size", str(a.micro_batch_size),
               "--global-batch-size", str(2 * a.micro_batches * a.micro_batch_size), "--train-iters", str(a.iters),
               "--lr-warmup-iters", "1", "--log-interval", "1", "--eval-iters", "0", "--metrics-file", str(metrics),
               *flags]
        env = dict(os.environ, OMP_NUM_THREADS="1", MEGATRON_INJECT_COMM_LATENCY_US=str(latency_us))
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        log = out.stdout + out.stderr
        if out.returncode != 0:
            sys.exit(f"fsdp_bench: pretrain_gpt failed ({' '.join(flags)}):\n{log[-3000:]}")
        times = [json.loads(line)["elapsed_ms"] for line in metrics.read_text().splitlines()]
        peak = re.search(r"\[Rank 0\] \(after 1 iterations\) host memory \(MB\) \| allocated: [\d.]+ \| "
                         r"max allocated: ([\d.]+)", log)
        held = re.search(r"\[Rank 0\] memory \(MB\) after optimizer setup \(\w+\) \| params: ([\d.]+) \| grads: "
                         r"([\d.]+) \| main params: ([\d.]+) \| optimizer state: ([\d.]+)", log)
        if not peak or not held:
            sys.exit(f"fsdp_bench: no memory report in the log of {' '.join(flags)}:\n{log[-3000:]}")
        return statistics.median(times[len(times) // 2:]), float(peak.group(1)), [float(v) for v in held.groups()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--latency-us", type=int, default=2000, help="injected latency per collective, prefetch rows")
    p.add_argument("--micro-batch-size", type=int, default=8)
    p.add_argument("--hidden-size", type=int, default=128, help="a larger model makes the sharded bytes count more")
    p.add_argument("--num-layers", type=int, default=4, help="ZeRO-3 holds two or three layers whole at a time")
    p.add_argument("--micro-batches", type=int, default=1, help="per rank and step")
    p.add_argument("--iters", type=int, default=16)
    a = p.parse_args()
    print(f"DP 2 (MPI), configs/gpt2-tiny.toml with {a.num_layers} layers of hidden size {a.hidden_size}, "
          f"{a.micro_batches} micro-batch(es) of {a.micro_batch_size}")
    print(f"{'strategy':20}{'step (ms)':>11}{'/ no_shard':>12}{'peak (MiB)':>12}"
          f"{'params':>9}{'grads':>8}{'main':>8}{'optim':>8}  (MiB held at start-up)")
    rows = {name: run(a, flags, 0) for name, flags in STRATEGIES.items()}
    base = rows["no_shard"][0]
    for name, (ms, peak, held) in rows.items():
        print(f"{name:20}{ms:11.2f}{ms / base:11.3f}x{peak:12.1f}" + "".join(f"{v:8.2f}" for v in held))
    print(f"\nZeRO-3 parameter gathers with an injected {a.latency_us / 1e3:.1f} ms per collective:")
    print(f"{'':22}{'free (ms)':>11}{'with cost (ms)':>16}{'exposed (ms)':>14}")
    exposed, slow = {}, {}
    for name, flags in (("no_shard", []), ("ZeRO-3, prefetch", STRATEGIES["optim_grads_params"]),
                        ("ZeRO-3, no prefetch", STRATEGIES["optim_grads_params"] + ["--no-fsdp-prefetch"])):
        free, slow[name] = run(a, flags, 0)[0], run(a, flags, a.latency_us)[0]
        exposed[name] = slow[name] - free
        print(f"{name:22}{free:11.2f}{slow[name]:16.2f}{exposed[name]:14.2f}")
    hidden = 1 - max(exposed["ZeRO-3, prefetch"], 0.0) / exposed["ZeRO-3, no prefetch"]
    print(f"hidden by the prefetch: {hidden:.0%} of ZeRO-3's exposed communication; ZeRO-3 (prefetch) / no_shard "
          f"step time: {rows['optim_grads_params'][0] / base:.3f}x without cost, "
          f"{slow['ZeRO-3, prefetch'] / slow['no_shard']:.3f}x with it")


if __name__ == "__main__":
    main()
