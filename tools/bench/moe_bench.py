"""Mixture of experts, a Mixtral-shaped model (every layer MoE, top 2 of 8 SwiGLU experts):
pretrain_gpt's tokens/s and rank 0's peak memory at expert-parallel sizes 1, 2 and 4 (alltoall
dispatch); the bytes rank 0 sends to other ranks per token and MoE layer in the all-to-alls
(forward and backward) against the closed form for uniform routing, and the share of the step
they take; and the local experts run as grouped GEMMs (--moe-grouped-gemm) against one GEMM pair
per expert. Each table's ratios are against its first row, measured in the same run.

Step time is the median of the last half of the iterations' elapsed_ms (--metrics-file); memory
is the "(after 1 iterations)" line's max allocated (CPU: the host allocator's; CUDA: the device's).
The exchange is read from a --profile trace of rank 0 (two iterations): each all-to-all's range
records the rows it sends to other ranks. On a 2-core machine the ranks of EP 2 and 4 share the
cores, so their tokens/s shows the cost of the exchange, not the speed-up; on a GPU, run the
grouped GEMM table (one rank):

    .venv/bin/python tools/bench/moe_bench.py                        # CPU: EP table and grouped GEMM
    .venv/bin/python tools/bench/moe_bench.py --ep-sizes 1 --bf16    # a GPU: the grouped GEMM table
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
MEMORY = re.compile(r"\[Rank 0\] \(after 1 iterations\) (?:host|device|memory)[^|]*\| allocated: ([\d.]+) \| "
                    r"max allocated: ([\d.]+)")


def command(a: argparse.Namespace, ep: int, flags: list[str], metrics: Path) -> list[str]:
    binary = Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")) / "bin" / "pretrain_gpt"
    cmd = [str(binary), "--num-layers", str(a.num_layers), "--hidden-size", str(a.hidden_size),
           "--ffn-hidden-size", str(a.ffn_hidden_size), "--num-attention-heads", str(a.heads),
           "--seq-length", str(a.seq_length), "--micro-batch-size", str(a.micro_batch_size),
           "--global-batch-size", str(a.micro_batch_size * ep), "--train-iters", str(a.iters), "--lr", "1e-4",
           "--log-interval", "1", "--eval-iters", "0", "--attention-dropout", "0", "--hidden-dropout", "0",
           "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear", "--position-embedding-type", "rope",
           "--untie-embeddings-and-output-weights", "--mock-data", "--vocab-size", "1024",
           "--num-experts", str(a.experts), "--moe-router-topk", str(a.topk), "--moe-aux-loss-coeff", "1e-2",
           "--moe-token-dispatcher-type", "alltoall", "--expert-model-parallel-size", str(ep),
           "--metrics-file", str(metrics), *(["--bf16"] if a.bf16 else []), *flags]
    if ep > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(ep)] + cmd
    return cmd


def launch(a: argparse.Namespace, ep: int, flags: list[str], tmp: str) -> tuple[str, list[dict]]:
    metrics = Path(tmp) / "metrics.jsonl"
    out = subprocess.run(command(a, ep, flags, metrics), capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1")))
    if out.returncode != 0:
        sys.exit(f"moe_bench: pretrain_gpt failed at EP {ep} {flags}:\n{(out.stdout + out.stderr)[-3000:]}")
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    return out.stdout + out.stderr, [r for r in rows if r.get("type") == "train"]


def run(a: argparse.Namespace, ep: int, flags: list[str]) -> tuple[float, float]:
    """(median ms per iteration, rank 0's peak MB)."""
    with tempfile.TemporaryDirectory() as tmp:
        log, rows = launch(a, ep, flags, tmp)
        times = [r["elapsed_ms"] for r in rows]
        memory = MEMORY.search(log)
        return statistics.median(times[len(times) // 2:]), float(memory.group(2)) if memory else float("nan")


def exchange(a: argparse.Namespace, ep: int) -> tuple[float, float]:
    """(bytes rank 0 sends to other ranks per token and MoE layer, share of the step in all-to-alls),
    from a profile of iterations 3 and 4."""
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir = Path(tmp) / "trace"
        _, rows = launch(a, ep, ["--profile", "--use-pytorch-profiler", "--profile-step-start", "2",
                                 "--profile-step-end", "4", "--tensorboard-dir", str(trace_dir)], tmp)
        traces = sorted(trace_dir.glob("*.pt.trace.json"))
        if not traces:
            sys.exit(f"moe_bench: no trace in {trace_dir}")
        events = [e for e in json.loads(traces[0].read_text())["traceEvents"] if e.get("name") == "all_to_all"]
        sizes = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8}
        sent = sum(e["args"]["Input Dims"][0][0] * e["args"]["Input Dims"][0][1] *
                   sizes.get(e["args"]["Input type"][0], 4) for e in events)
        busy_ms = sum(e["dur"] for e in events) / 1e3
        step_ms = sum(r["elapsed_ms"] for r in rows if r["iteration"] in (3, 4))
        tokens = 2 * a.micro_batch_size * a.seq_length * a.num_layers  # per rank, two iterations, every layer MoE
        return sent / tokens, busy_ms / step_ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ep-sizes", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--ffn-hidden-size", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--seq-length", type=int, default=256)
    p.add_argument("--micro-batch-size", type=int, default=4)
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--bf16", action="store_true")
    a = p.parse_args()
    tokens = a.micro_batch_size * a.seq_length  # per rank and iteration
    print(f"Mixtral-shaped: {a.num_layers} layers x {a.hidden_size} hidden, {a.experts} experts of "
          f"{a.ffn_hidden_size}, top {a.topk}; {tokens} tokens per rank and iteration")
    if len(a.ep_sizes) > 1:
        print(f"{'EP':>4}{'step (ms)':>11}{'tokens/s':>11}{'x EP 1':>8}{'peak (MB)':>11}{'x EP 1':>8}")
        base = None
        for ep in a.ep_sizes:
            ms, mb = run(a, ep, [])
            rate = tokens * ep / ms * 1e3
            base = base or (rate, mb)
            print(f"{ep:4d}{ms:11.1f}{rate:11.0f}{rate / base[0]:8.2f}{mb:11.1f}{mb / base[1]:8.2f}")
    if len(a.ep_sizes) > 1:
        bytes_per_elem = 2 if a.bf16 else 4
        print(f"{'EP':>4}{'sent B/token/layer':>20}{'closed form':>13}{'x closed':>10}{'all-to-all share':>18}")
        for ep in a.ep_sizes[1:]:
            sent, share = exchange(a, ep)
            # Uniform routing: a token's k copies leave the rank with probability (EP - 1) / EP;
            # each travels there and back in the forward (tokens, and its probability in fp32) and
            # again in the backward (their gradients).
            away = a.topk * (ep - 1) / ep
            closed = away * (4 * a.hidden_size * bytes_per_elem + 2 * 4)
            print(f"{ep:4d}{sent:20.0f}{closed:13.0f}{sent / closed:10.2f}{share:18.1%}")
    print(f"{'experts as':>24}{'step (ms)':>11}{'x loop':>8}")
    loop, _ = run(a, 1, [])
    grouped, _ = run(a, 1, ["--moe-grouped-gemm"])
    print(f"{'one GEMM pair each':>24}{loop:11.1f}{1.0:8.2f}")
    print(f"{'grouped GEMMs':>24}{grouped:11.1f}{grouped / loop:8.2f}")


if __name__ == "__main__":
    main()
