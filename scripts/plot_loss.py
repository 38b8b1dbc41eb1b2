#!/usr/bin/env python3
"""Loss curve of a run from its --metrics-file (JSON lines written by pretrain_gpt).

    python scripts/plot_loss.py build/runs/gpt2-tiny/metrics.jsonl --output loss.png [--summary]
"""
import argparse
import json
import sys


def read(path):
    train, valid, test = [], [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_loss: {path}:{number}: not JSON ({e})")
            loss = record.get("lm loss")
            if loss is None:
                continue
            {"train": train, "valid": valid, "test": test}.get(record.get("type"), []).append(
                (record["iteration"], loss))
    if not train:
        sys.exit(f"plot_loss: {path} has no training iterations with an 'lm loss'")
    return train, valid, test


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics", help="JSONL metrics file")
    parser.add_argument("--output", default="loss.png", help="PNG to write")
    parser.add_argument("--summary", action="store_true", help="print first and last losses")
    args = parser.parse_args()
    train, valid, test = read(args.metrics)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(*zip(*train), label="train lm loss")
    if valid:
        ax.plot(*zip(*valid), "o-", label="validation lm loss")
    if test:
        ax.plot(*zip(*test), "s", label="test lm loss")
    ax.set_xlabel("iteration")
    ax.set_ylabel("lm loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    if args.summary:
        print(f"[plot_loss] train lm loss {train[0][1]:.4f} at iteration {train[0][0]} -> "
              f"{train[-1][1]:.4f} at iteration {train[-1][0]}")
        if valid:
            print(f"[plot_loss] validation lm loss {valid[0][1]:.4f} -> {valid[-1][1]:.4f}")
        if test:
            print(f"[plot_loss] test lm loss {test[-1][1]:.4f}")
        print(f"[plot_loss] wrote {args.output}")


if __name__ == "__main__":
    main()
