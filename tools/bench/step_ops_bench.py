#!/usr/bin/env python3
"""What one training step asks of the host, measurable without a GPU: the ATen operators it
dispatches and the device-to-host reads it waits for, pretrain() against the plain PyTorch loop of
the same model (tests/python/gpt_reference.py, torch.optim.AdamW(fused=True), foreach gradient
clipping, loss.item()) in the same process and the same run.

On a GPU every dispatched operator is host time and most are kernel launches, and every read back
stalls the host until the device catches up; a step that dispatches fewer operators and reads back
once can keep the GPU busy. Both sides are counted by torch.profiler over k and k + n iterations,
and the difference divided by n, so that start-up and the first step's lazy set-up cancel.
"operators" counts every dispatch (nested ones included), "top-level" only those no other operator
dispatched. Read-backs: ours through megatron_cpp.host_readback_count(), the library's one helper
(and top-level .item() calls, which should be none); PyTorch's are its top-level .item() calls.
Targets: ours at most 0.8x PyTorch's operators, exactly 1 read-back.

    .venv/bin/python tools/bench/step_ops_bench.py                 # GPT-2 124M: 12 layers, 768 wide
    .venv/bin/python tools/bench/step_ops_bench.py --num-layers 2 --iters 4   # quicker
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from gpt_reference import GPT, Config  # noqa: E402

READS = ("aten::item", "aten::_local_scalar_dense")


def counts(prof) -> collections.Counter:
    """Per kind: every aten dispatch, the top-level ones, and top-level .item() calls."""
    c = collections.Counter()
    for e in prof.events():
        if not e.name.startswith("aten::"):
            continue
        c["operators"] += 1
        parent = e.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is None:
            c["top-level"] += 1
            if e.name in READS:
                c["item"] += 1
    return c


def per_iteration(run, k: int, n: int) -> dict:
    """run(iters) -> extra counts; (counts over k + n) - (counts over k), divided by n."""
    def measure(iters):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            extra = run(iters)
        c = counts(prof)
        c.update(extra)
        return c
    short, long = measure(k), measure(k + n)
    return {key: (long[key] - short[key]) / n for key in set(short) | set(long)}


def ours(a: argparse.Namespace):
    import megatron_cpp

    def run(iters):
        with tempfile.TemporaryDirectory() as tmp:
            flags = {"num_layers": a.num_layers, "hidden_size": a.hidden_size, "num_attention_heads": a.heads,
                     "seq_length": a.seq_length, "max_position_embeddings": a.seq_length,
                     "micro_batch_size": a.micro_batch_size, "global_batch_size": a.global_batch_size,
                     "train_iters": iters, "lr": 6e-4, "weight_decay": 0.1, "clip_grad": 1.0,
                     "attention_dropout": 0, "hidden_dropout": 0, "mock_data": True, "vocab_size": a.vocab,
                     "log_interval": 1_000_000, "eval_iters": 0, "device": "cpu", "data_cache_path": tmp}
            before = megatron_cpp.host_readback_count()
            megatron_cpp.pretrain(flags)
            return {"read-backs": megatron_cpp.host_readback_count() - before}
    return run


def pytorch(a: argparse.Namespace):
    torch.manual_seed(0)
    h = a.hidden_size
    cfg = Config(vocab_size=a.vocab, hidden_size=h, num_layers=a.num_layers, num_heads=a.heads, num_kv_heads=a.heads,
                 ffn_hidden_size=4 * h, max_seq_len=a.seq_length, fused=True)
    micro = a.global_batch_size // a.micro_batch_size
    data = torch.randint(0, a.vocab, (micro, a.micro_batch_size, a.seq_length + 1))

    def run(iters):
        model = GPT(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
        for _ in range(iters):
            opt.zero_grad(set_to_none=False)
            total = 0.0
            for m in range(micro):
                loss = model(data[m, :, :-1], data[m, :, 1:]).float().mean() / micro
                loss.backward()
                total += loss.detach()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
            opt.step()
            total.item()  # the loss, for the log line
        return {}
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-layers", type=int, default=12)
    ap.add_argument("--hidden-size", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq-length", type=int, default=64, help="operator counts do not depend on it")
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--micro-batch-size", type=int, default=1)
    ap.add_argument("--global-batch-size", type=int, default=2, help="micro-batches per step: global / micro")
    ap.add_argument("--warmup", type=int, default=1, help="k: iterations whose counts are subtracted")
    ap.add_argument("--iters", type=int, default=2, help="n: iterations counted")
    a = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))

    got = {"pretrain()": per_iteration(ours(a), a.warmup, a.iters),
           "PyTorch eager": per_iteration(pytorch(a), a.warmup, a.iters)}
    got["PyTorch eager"]["read-backs"] = got["PyTorch eager"].get("item", 0)
    print(f"# per training step: {a.num_layers} layers, hidden {a.hidden_size}, {a.heads} heads, vocab {a.vocab}, "
          f"{a.global_batch_size // a.micro_batch_size} micro-batches; torch {torch.__version__}, CPU")
    print(f"{'':15} {'operators':>10} {'top-level':>10} {'read-backs':>11} {'top-level .item()':>18}")
    for name, c in got.items():
        print(f"{name:15} {c.get('operators', 0):10.1f} {c.get('top-level', 0):10.1f} {c.get('read-backs', 0):11.1f} "
              f"{c.get('item', 0):18.1f}")
    mine, ref = got["pretrain()"], got["PyTorch eager"]
    ratio = mine.get("operators", 0) / ref["operators"]
    top_ratio = mine.get("top-level", 0) / ref["top-level"]
    print(f"pretrain() / PyTorch eager: operators {ratio:.3f}, top-level {top_ratio:.3f} (target <= 0.8: "
          f"{'met' if ratio <= 0.8 else 'missed'}); read-backs per step {mine.get('read-backs', 0):g} "
          f"(target 1: {'met' if mine.get('read-backs', 0) == 1 and mine.get('item', 0) == 0 else 'missed'})")


if __name__ == "__main__":
    main()
