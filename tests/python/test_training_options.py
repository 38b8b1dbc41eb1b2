"""Megatron-LM's training options beyond the model: each against the plain run it must equal
where it changes nothing, and the same at every TP/PP/DP layout where it does."""
import json
import subprocess

import pytest
from data_helpers import MPIRUN, program, TINY


def train(tmp_path, name, *flags, ranks=1):
    """Losses by iteration, and the last rank's log."""
    metrics = tmp_path / f"{name}.jsonl"
    cmd = [program("pretrain_gpt"), *TINY, "--mock-data", "--vocab-size", "256", "--train-iters", "6",
           "--lr-warmup-iters", "1", "--lr-decay-style", "cosine", "--min-lr", "1e-4", "--seed", "5",
           "--metrics-file", str(metrics), *map(str, flags)]
    proc = subprocess.run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + cmd, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [r["lm loss"] for r in records if r["type"] == "train"], proc.stdout


def close(a, b, rel=1e-5):
    return len(a) == len(b) and all(abs(x - y) <= rel * abs(y) for x, y in zip(a, b))


def test_decoupled_lr_trains_the_embedding_and_output_layer_at_their_own_rate(tmp_path):
    base, _ = train(tmp_path, "base")
    # The decoupled groups at the other groups' rates: the same run (to rounding: the groups order
    # the flat buffers, and with them the gradient norm's sum, differently).
    same, _ = train(tmp_path, "same", "--decoupled-lr", "1e-3", "--decoupled-min-lr", "1e-4")
    assert close(same, base, rel=1e-6)
    decoupled, log = train(tmp_path, "decoupled", "--decoupled-lr", "3e-2")
    # Warm-up starts at 0, so the rates differ from the second update on.
    assert close(decoupled[:2], base[:2], rel=1e-6) and all(abs(x - y) > 1e-5 for x, y in zip(decoupled[2:], base[2:]))
    assert "| learning rate: 1.000000E-03 | decoupled learning rate: 3.000000E-02 |" in log
    for layout in (["--tensor-model-parallel-size", "2"], ["--pipeline-model-parallel-size", "2"], []):
        got, _ = train(tmp_path, "layout" + "".join(layout), "--decoupled-lr", "3e-2", *layout, ranks=2)
        assert close(got, decoupled), (layout, got, decoupled)


def test_decoupled_min_lr_above_decoupled_lr_is_refused(tmp_path):
    proc = subprocess.run([program("pretrain_gpt"), *TINY, "--mock-data", "--vocab-size", "256", "--train-iters", "2",
                           "--decoupled-lr", "1e-3", "--decoupled-min-lr", "1e-2"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "--decoupled-min-lr (0.01) must not exceed --decoupled-lr (0.001)" in proc.stderr, proc.stderr
