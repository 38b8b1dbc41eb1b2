"""Python side of tools/bench/gpt_bench: forward + backward of the plain PyTorch GPT in
tests/python/gpt_reference.py (fused kernels) on the same shape, printing one
`ms/step <ms> faults <page faults>` line per measured step."""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))
from gpt_reference import GPT, Config  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    for name, default in [("layers", 12), ("hidden", 768), ("heads", 12), ("vocab", 50304),
                          ("seq", 256), ("batch", 1), ("max-seq", 1024), ("steps", 5),
                          ("warmup", 2), ("threads", 0)]:
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--unfused", action="store_true", help="written-out norm and attention")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = Config(vocab_size=a.vocab, hidden_size=a.hidden, num_layers=a.layers, num_heads=a.heads,
                 num_kv_heads=a.heads, ffn_hidden_size=4 * a.hidden, max_seq_len=a.max_seq,
                 fused=not a.unfused)
    model = GPT(cfg)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.02)
    ids = torch.randint(a.vocab, (a.batch, a.seq + 1))
    x, y = ids[:, :-1], ids[:, 1:]
    times = []
    for step in range(a.warmup + a.steps):
        for p in model.parameters():
            p.grad = None
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        model(x, y).mean().backward()
        if step >= a.warmup:
            times.append((time.perf_counter() - t0,
                          resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0))
    for t, faults in times:
        print(f"ms/step {1000 * t:.2f} faults {faults}", flush=True)


if __name__ == "__main__":
    main()
