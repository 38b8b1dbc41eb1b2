"""How much of ColumnParallelLinear's backward collective is hidden behind its weight-gradient GEMM.

Every collective is given an injected latency D (MEGATRON_INJECT_COMM_LATENCY_US), so that
communication costs time on a machine where it is nearly free. At TP 2 (mpirun -np 2) it times
forward + backward of
  - overlapped: megatron_cpp.ColumnParallelLinear, whose backward launches the input-gradient
    all-reduce before the weight-gradient GEMM and waits after it;
  - serial: the same GEMMs through copy_to_tensor_model_parallel_region + torch's linear, whose
    backward all-reduce waits before anything else runs,
once with D = 0 and once with D, in one run of this script. The exposed communication of each is
t(D) - t(0) (medians of the slowest rank); printed is the part of D each hides, and the ratio of
their step times at D.

    .venv/bin/python tools/bench/linear_overlap_bench.py [--latency-us 20000] [--tokens 2048]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def worker(a: argparse.Namespace) -> None:
    import torch
    import megatron_cpp

    world = megatron_cpp.init_distributed(megatron_cpp.LauncherEnv.from_environment())
    tp = world.size()
    torch.manual_seed(0)
    layer = megatron_cpp.ColumnParallelLinear(a.hidden, a.ffn, tp_group=world)
    weight = torch.randn(a.ffn // tp, a.hidden).requires_grad_()
    bias = torch.zeros(a.ffn // tp).requires_grad_()
    x = torch.randn(a.tokens, 1, a.hidden)
    grad = torch.randn(a.tokens, 1, a.ffn // tp)

    def overlapped():
        inp = x.clone().requires_grad_()
        layer.forward(inp).backward(grad)

    def serial():
        inp = x.clone().requires_grad_()
        total = megatron_cpp.copy_to_tensor_model_parallel_region(inp, world)
        torch.nn.functional.linear(total, weight, bias).backward(grad)

    result = {}
    for name, step in (("overlapped", overlapped), ("serial", serial)):
        for _ in range(3):
            step()
        times = []
        for _ in range(a.iters):
            world.barrier()
            start = time.perf_counter()
            step()
            times.append((time.perf_counter() - start) * 1e3)
        # The median step, of the slowest rank: steady against the odd slow step on a busy machine.
        elapsed = torch.tensor([sorted(times)[len(times) // 2]], dtype=torch.float64)
        world.all_reduce(elapsed, megatron_cpp.ReduceOp.MAX)
        result[name] = elapsed.item()
    if world.rank() == 0:
        print("RESULT " + json.dumps(result), flush=True)


def run(a: argparse.Namespace, latency_us: int) -> dict:
    env = dict(os.environ, MEGATRON_INJECT_COMM_LATENCY_US=str(latency_us), OMP_NUM_THREADS="1",
               PYTHONPATH=str(Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")) / "python"))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(a.np), sys.executable,
           __file__, "--worker", "--tokens", str(a.tokens), "--hidden", str(a.hidden), "--ffn", str(a.ffn),
           "--iters", str(a.iters)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"linear_overlap_bench: the D={latency_us} us run failed:\n{out.stderr[-3000:]}")
    line = next(l for l in out.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--np", type=int, default=2, help="tensor-parallel size (ranks)")
    p.add_argument("--latency-us", type=int, default=20000, help="injected latency per collective")
    p.add_argument("--tokens", type=int, default=2048, help="s x b")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--ffn", type=int, default=2048, help="output size (split over the ranks)")
    p.add_argument("--iters", type=int, default=21)
    a = p.parse_args()
    if a.worker:
        worker(a)
        return
    free, slow = run(a, 0), run(a, a.latency_us)
    injected = a.latency_us / 1e3
    print(f"TP {a.np}, tokens {a.tokens}, {a.hidden} -> {a.ffn}, injected latency {injected:.1f} ms per collective")
    print(f"{'':12}{'D = 0 (ms)':>12}{'D (ms)':>10}{'exposed (ms)':>14}")
    exposed = {}
    for name in ("serial", "overlapped"):
        exposed[name] = slow[name] - free[name]
        print(f"{name:12}{free[name]:12.2f}{slow[name]:10.2f}{exposed[name]:14.2f}")
    # One collective per step (the backward all-reduce; the forward has none without sequence
    # parallelism), so D is the communication injected per step.
    hidden = {name: 1 - max(exposed[name], 0.0) / injected for name in exposed}
    print(f"hidden of the {injected:.1f} ms injected per step: serial {hidden['serial']:.0%}, "
          f"overlapped {hidden['overlapped']:.0%} (overlapped / serial step time at D: "
          f"{slow['overlapped'] / slow['serial']:.3f}x)")

if __name__ == "__main__":
    main()
