#!/usr/bin/env python3
"""Training-step speed of pretrain_gpt next to a plain PyTorch-Python loop of the same model
(tests/python/gpt_reference.py, torch's fused kernels) in the same run: same shapes, AdamW, gradient
clipping, micro-batch accumulation, fp32 on this CPU. Rounds alternate; the best of each side counts.

    .venv/bin/python tools/bench/train_bench.py [--config configs/gpt2-tiny.toml] [--rounds 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from gpt_reference import GPT, Config  # noqa: E402


def cpp_ms_per_iteration(binary: Path, config: Path, vocab: int, iters: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        cmd = [str(binary), "--config", str(config), "--mock-data", "--vocab-size", str(vocab),
               "--train-iters", str(iters), "--log-interval", str(iters // 2), "--eval-iters", "0",
               "--lr-warmup-iters", "1", "--device", "cpu", "--metrics-file", str(metrics)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"train_bench: pretrain_gpt failed:\n{run.stderr[-2000:]}")
        records = [json.loads(line) for line in metrics.read_text().splitlines()]
        return records[-1]["elapsed_ms"]  # the second half: past start-up


def python_ms_per_iteration(c: dict, vocab: int, iters: int) -> float:
    torch.manual_seed(0)
    h = c["hidden-size"]
    cfg = Config(vocab_size=vocab, hidden_size=h, num_layers=c["num-layers"], num_heads=c["num-attention-heads"],
                 num_kv_heads=c["num-attention-heads"], ffn_hidden_size=4 * h, max_seq_len=c["seq-length"],
                 fused=True)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], weight_decay=c.get("weight-decay", 0.01))
    mbs, gbs, s = c["micro-batch-size"], c["global-batch-size"], c["seq-length"]
    micro = gbs // mbs
    data = torch.randint(0, vocab, (iters * micro, mbs, s + 1))
    times = []
    for it in range(iters):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        for m in range(micro):
            batch = data[it * micro + m]
            loss = model(batch[:, :-1], batch[:, 1:]).mean() / micro
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), c.get("clip-grad", 1.0))
        opt.step()
        times.append(time.perf_counter() - start)
    half = times[len(times) // 2:]
    return 1000 * sum(half) / len(half)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "gpt2-tiny.toml"))
    ap.add_argument("--binary", default=str(Path(os.environ.get("MEGATRON_BUILD_DIR", ROOT / "build")) / "bin" / "pretrain_gpt"))
    ap.add_argument("--vocab", type=int, default=8192, help="vocabulary (a multiple of 128: no padding)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    c = tomllib.loads(Path(a.config).read_text())
    cpp, py = [], []
    for _ in range(a.rounds):
        cpp.append(cpp_ms_per_iteration(Path(a.binary), Path(a.config), a.vocab, a.iters))
        py.append(python_ms_per_iteration(c, a.vocab, a.iters))
    tokens = c["global-batch-size"] * c["seq-length"]
    best_cpp, best_py = min(cpp), min(py)
    print(f"# {Path(a.config).name}: {c['num-layers']} layers, hidden {c['hidden-size']}, seq {c['seq-length']}, "
          f"global batch {c['global-batch-size']} (micro {c['micro-batch-size']}), vocab {a.vocab}, fp32, "
          f"{torch.get_num_threads()} threads")
    print(f"pretrain_gpt      {best_cpp:9.1f} ms/iteration  {tokens / best_cpp * 1000:9.0f} tokens/s")
    print(f"PyTorch (Python)  {best_py:9.1f} ms/iteration  {tokens / best_py * 1000:9.0f} tokens/s")
    print(f"ratio (pretrain_gpt / PyTorch): {best_cpp / best_py:.3f}")


if __name__ == "__main__":
    main()
