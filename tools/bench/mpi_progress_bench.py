"""What the MPI progress thread buys: an all_reduce_async launched before work of about its own
length, waited after it, at DP 2 under mpirun, with the thread (the default) and without it
(MEGATRON_MPI_PROGRESS=0, the operation advancing only inside its wait), in one run of this
script. The work is a sleep (the host idle while a GPU computes) or, with --matmul, matrix
products on one thread per rank (CPU training, every core busy). Prints allreduce_bench's rows for
both and, per size, the time of launch + work + wait without the thread over with it.

    .venv/bin/python tools/bench/mpi_progress_bench.py
    .venv/bin/python tools/bench/mpi_progress_bench.py --matmul
"""
from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rows(progress: bool, a: argparse.Namespace) -> list[list[str]]:
    binary = Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")) / "bin" / "allreduce_bench"
    env = dict(os.environ, MEGATRON_MPI_PROGRESS="1" if progress else "0")
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2",
           "-x", "MEGATRON_MPI_PROGRESS", str(binary), "--overlap", "--min-bytes", str(a.min_mib << 20),
           "--max-bytes", str(a.max_mib << 20), "--rounds", str(a.rounds)] + ([] if a.matmul else ["--sleep"])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    print(f"# MEGATRON_MPI_PROGRESS={env['MEGATRON_MPI_PROGRESS']}\n{out}", end="")
    return [line.split() for line in out.splitlines() if line and not line.startswith("#")][1:]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--matmul", action="store_true", help="matrix products as the work, not a sleep")
    p.add_argument("--min-mib", type=int, default=1)
    p.add_argument("--max-mib", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    without, with_thread = rows(False, a), rows(True, a)
    print(f"{'bytes':>12} {'overlapped ms, no thread':>25} {'with thread':>12} {'ratio':>7}")
    for w, t in zip(without, with_thread):
        print(f"{w[0]:>12} {float(w[3]):25.2f} {float(t[3]):12.2f} {float(w[3]) / float(t[3]):7.2f}")


if __name__ == "__main__":
    main()
