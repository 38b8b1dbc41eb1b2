"""Context parallelism against sequence length: pretrain_gpt's step time and each rank's activation
memory at CP 1, 2 and 4 (one micro-batch of one sequence, the same model), measured in one run of
this script, each against CP 1 at the same length.

Step time is the median of the last half of the iterations' elapsed_ms (--metrics-file); the
activation memory is rank 0's allocator peak during the first iteration less what stays allocated
after it (the "(after 1 iterations) host memory" line on CPU ranks; parameters, gradients and
optimizer state are the same on every rank). On a 2-core machine the ranks of CP 2 and 4 share
the cores, so the step-time ratio there shows the overhead, not the speed-up.

    .venv/bin/python tools/bench/cp_bench.py --seq-lengths 1024 4096 --cp-comm-type p2p
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
MEMORY = re.compile(r"\[Rank 0\] \(after 1 iterations\) host memory \(MB\) \| allocated: ([\d.]+) \| "
                    r"max allocated: ([\d.]+)")


def run(a: argparse.Namespace, seq: int, cp: int) -> tuple[float, float]:
    """(median ms per iteration, rank 0's activation MB)."""
    binary = Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")) / "bin" / "pretrain_gpt"
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        cmd = [str(binary), "--num-layers", str(a.num_layers), "--hidden-size", str(a.hidden_size),
               "--num-attention-heads", str(a.heads), "--seq-length", str(seq), "--max-position-embeddings", str(seq),
               "--micro-batch-size", "1", "--global-batch-size", "1", "--train-iters", str(a.iters), "--lr", "1e-4",
               "--log-interval", "1", "--eval-iters", "0", "--attention-dropout", "0", "--hidden-dropout", "0",
               "--position-embedding-type", "rope", "--mock-data", "--vocab-size", "512",
               "--context-parallel-size", str(cp), "--cp-comm-type", a.cp_comm_type, "--metrics-file", str(metrics)]
        if cp > 1:
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(cp)] + cmd
        out = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"cp_bench: pretrain_gpt failed at seq {seq}, CP {cp}:\n{(out.stdout + out.stderr)[-3000:]}")
        times = [json.loads(line)["elapsed_ms"] for line in metrics.read_text().splitlines()
                 if json.loads(line).get("type") == "train"]
        memory = MEMORY.search(out.stdout + out.stderr)
        if not memory:
            sys.exit("cp_bench: no host-memory line (the CPU allocator cache is off?)")
        return statistics.median(times[len(times) // 2:]), float(memory.group(2)) - float(memory.group(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq-lengths", type=int, nargs="+", default=[1024, 4096])
    p.add_argument("--cp-sizes", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--cp-comm-type", default="p2p", choices=["p2p", "all_gather", "a2a"])
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--iters", type=int, default=6)
    a = p.parse_args()
    print(f"GPT {a.num_layers} layers x {a.hidden_size} hidden, {a.heads} heads, micro-batch 1, "
          f"--cp-comm-type {a.cp_comm_type}")
    print(f"{'seq':>6}{'CP':>4}{'step (ms)':>11}{'x CP 1':>8}{'activations (MB)':>18}{'x CP 1':>8}")
    for seq in a.seq_lengths:
        base = None
        for cp in a.cp_sizes:
            ms, mb = run(a, seq, cp)
            base = base or (ms, mb)
            print(f"{seq:6d}{cp:4d}{ms:11.1f}{ms / base[0]:8.2f}{mb:18.1f}{mb / base[1]:8.2f}")


if __name__ == "__main__":
    main()
