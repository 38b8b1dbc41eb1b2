"""Checkpoint formats against each other: pretrain_gpt's save and load time and peak host memory with
--ckpt-format torch and torch_dist at 1, 2 and 4 ranks (data-parallel, distributed optimizer), and
the training time each save costs with and without --async-save, all measured in one run of this
script; the torch_dist columns are also given as a ratio to torch's at the same rank count.

Save and load times are pretrain_gpt's own log lines ("successfully saved checkpoint ... [ S s, M
MB ]", the median over the run's saves; "successfully loaded checkpoint ... [ S s ]"). Peak host
memory is the largest maximum resident set of the ranks (/usr/bin/time), for the run that saves and
for the one that loads. The time a save costs training is the median, over the saves but the last,
of the time from rank 0's "saving checkpoint" line to the start of the next iteration (the last
rank's log line of it less its elapsed time). On a 2-core machine the ranks share the cores.

    .venv/bin/python tools/bench/checkpoint_bench.py --ranks 1 2 4 --num-layers 8 --hidden-size 512
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
SAVED = re.compile(r"successfully saved checkpoint from iteration +\d+ to .* \[ ([\d.]+) s, ([\d.]+) MB \]")
LOADED = re.compile(r"successfully loaded checkpoint from .* \[ ([\d.]+) s \]")
RSS = re.compile(r"^maxrss_kb (\d+)$", re.M)
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] \[rank \d+/")
ITERATION = re.compile(r" iteration +\d+/ *\d+ \|.*elapsed time per iteration \(ms\): ([\d.]+)")


def pretrain(a: argparse.Namespace, ranks: int, *extra: str) -> tuple[str, float]:
    """(the log, the largest rank's peak resident MB)."""
    binary = Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")) / "bin" / "pretrain_gpt"
    cmd = ["/usr/bin/time", "-f", "maxrss_kb %M", str(binary), "--num-layers", str(a.num_layers), "--hidden-size",
           str(a.hidden_size), "--num-attention-heads", "8", "--seq-length", "128", "--max-position-embeddings", "128",
           "--micro-batch-size", "1", "--global-batch-size", str(4 * ranks), "--lr", "1e-4", "--log-interval", "1",
           "--eval-iters", "0", "--mock-data", "--vocab-size", "8192", "--device", "cpu", "--num-workers", "0",
           "--use-distributed-optimizer", *extra]
    proc = subprocess.run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + cmd, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    peak = max(int(kb) for kb in RSS.findall(proc.stderr)) / 1024
    return proc.stdout, peak


def stalls(log: str) -> list[float]:
    """Per save but the last: seconds from its "saving checkpoint" line to the start of the next
    iteration (that iteration's log line less its elapsed time): what the save kept training from."""
    out, saving = [], None
    for line in log.splitlines():
        stamp = STAMP.match(line)
        if not stamp:
            continue
        at = datetime.datetime.fromisoformat(stamp.group(1)).timestamp()
        if "saving checkpoint at iteration" in line:
            saving = at
        elif saving is not None and (step := ITERATION.search(line)):
            out.append(at - float(step.group(1)) / 1000 - saving)
            saving = None
    return out


def measure(a: argparse.Namespace, fmt: str, ranks: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        ck = Path(tmp) / "ck"
        saving = ["--train-iters", str(a.iters), "--save-interval", str(a.save_interval), "--ckpt-format", fmt]
        log, peak_save = pretrain(a, ranks, *saving, "--save", str(ck))
        saves = [(float(s), float(mb)) for s, mb in SAVED.findall(log)]
        lost = stalls(log)
        log, _ = pretrain(a, ranks, *saving, "--async-save", "--save", str(Path(tmp) / "async"))
        lost_async = stalls(log)
        log, peak_load = pretrain(a, ranks, "--train-iters", str(a.iters + 1), "--load", str(ck),
                                     "--use-checkpoint-opt_param-scheduler")
        load = float(LOADED.search(log).group(1))
    return {"save_s": statistics.median(s for s, _ in saves), "mb": saves[0][1], "load_s": load,
            "peak_save_mb": peak_save, "peak_load_mb": peak_load, "lost_s": statistics.median(lost),
            "lost_async_s": statistics.median(lost_async)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--num-layers", type=int, default=8)
    p.add_argument("--hidden-size", type=int, default=512)
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--save-interval", type=int, default=2)
    a = p.parse_args()
    print(f"GPT {a.num_layers} layers x {a.hidden_size}, fp32, CPU; {a.iters} iterations, a save every "
          f"{a.save_interval}")
    print(f"{'ranks':>5} {'format':>10} {'MB':>7} {'save s':>7} {'load s':>7} {'peak save MB':>12} "
          f"{'peak load MB':>12} {'lost/save s':>11} {'async lost s':>12}")
    for ranks in a.ranks:
        rows = {fmt: measure(a, fmt, ranks) for fmt in ("torch", "torch_dist")}
        for fmt, r in rows.items():
            print(f"{ranks:>5} {fmt:>10} {r['mb']:>7.1f} {r['save_s']:>7.3f} {r['load_s']:>7.3f} "
                  f"{r['peak_save_mb']:>12.0f} {r['peak_load_mb']:>12.0f} {r['lost_s']:>11.3f} {r['lost_async_s']:>12.3f}")
        t, d = rows["torch"], rows["torch_dist"]
        print(f"{ranks:>5} {'ratio':>10} {'':>7} {d['save_s'] / t['save_s']:>7.2f} {d['load_s'] / t['load_s']:>7.2f} "
              f"{d['peak_save_mb'] / t['peak_save_mb']:>12.2f} {d['peak_load_mb'] / t['peak_load_mb']:>12.2f}")


if __name__ == "__main__":
    main()
