"""Megatron-LM's training options beyond the model: each against the plain run it must equal
where it changes nothing, and the same at every TP/PP/DP layout where it does."""
import json
import subprocess

import pytest
import numpy as np
from data_helpers import MPIRUN, program, TINY, write_mmidx


def train(tmp_path, name, *flags, ranks=1):
    """Losses by iteration, and the last rank's log."""
    metrics = tmp_path / f"{name}.jsonl"
    length = [] if {"--train-samples", "--train-iters"} & set(map(str, flags)) else ["--train-iters", "6"]
    data = [] if "--data-path" in map(str, flags) else ["--mock-data", "--vocab-size", "256"]
    cmd = [program("pretrain_gpt"), *TINY, *data, *length,
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


def batch_sizes(log):
    return [int(line.split("global batch size:")[1].split("|")[0]) for line in log.splitlines()
            if "global batch size:" in line]


RAMPUP = ["--micro-batch-size", "1", "--global-batch-size", "8", "--rampup-batch-size", "2", "2", "12",
          "--train-samples", "40"]


def test_rampup_batch_size_grows_the_batch_by_samples_and_resumes_exactly(tmp_path):
    # (8 - 2) / 2 = 3 increments, one per 12 / 3 = 4 samples: 2 at 0 and 2 consumed, 4 at 4, 6 at 8,
    # then 8 from 14 on; 7 iterations fit in 40 samples (38), the partial last batch dropped.
    flags = [*RAMPUP, "--save", tmp_path / "ck", "--save-interval", "3"]
    whole, log = train(tmp_path, "whole", *flags)
    assert batch_sizes(log) == [2, 2, 4, 6, 8, 8, 8]
    assert "iteration        7/       7 | consumed samples:           38 |" in log
    # Two data-parallel ranks draw the same batches.
    dp2, log = train(tmp_path, "dp2", *RAMPUP, ranks=2)
    assert batch_sizes(log) == [2, 2, 4, 6, 8, 8, 8] and close(dp2, whole)
    # From the iteration-3 checkpoint (8 samples consumed) the batch and the losses carry on.
    (tmp_path / "ck" / "latest_checkpointed_iteration.txt").write_text("3")
    rest, log = train(tmp_path, "rest", *RAMPUP, "--load", tmp_path / "ck")
    assert batch_sizes(log) == [6, 8, 8, 8] and rest == whole[3:]


@pytest.mark.parametrize("flags,message", [
    (["--rampup-batch-size", "2", "2"], "--rampup-batch-size takes 3 numbers, START INCREMENT SAMPLES (got 2)"),
    (["--rampup-batch-size", "2", "4", "12"], "--rampup-batch-size INCREMENT (4) must divide --global-batch-size - START (6)"),
    (["--rampup-batch-size", "8", "2", "12"], "--rampup-batch-size START (8) must be between 1 and --global-batch-size (8) - 1"),
])
def test_bad_rampup_is_one_line(tmp_path, flags, message):
    proc = subprocess.run([program("pretrain_gpt"), *TINY, "--mock-data", "--vocab-size", "256", "--micro-batch-size",
                           "1", "--global-batch-size", "8", "--train-samples", "40", *flags], capture_output=True,
                          text=True)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_rampup_with_train_iters_ramps_inside_those_iterations(tmp_path):
    # As Megatron-LM's GPT-3 script: iteration-based training, the batch growing by samples.
    _, log = train(tmp_path, "iters", *RAMPUP[:-2], "--train-iters", "5")
    assert batch_sizes(log) == [2, 2, 4, 6, 8]
    assert "iteration        5/       5 | consumed samples:           22 |" in log


def short_documents(tmp_path):
    """Documents of 1 or 40 tokens, each ending in the NullTokenizer's EOD (255): with
    --eod-mask-loss the micro-batches hold very different numbers of tokens with a loss."""
    rng = np.random.default_rng(3)
    docs = [[list(rng.integers(0, 255, rng.choice([1, 40]))) + [255]] for _ in range(400)]
    write_mmidx(str(tmp_path / "short"), docs, np.int32)
    return ["--data-path", str(tmp_path / "short"), "--tokenizer-type", "NullTokenizer", "--vocab-size", "256",
            "--split", "100,0,0", "--num-workers", "0", "--lr", "1e-2", "--train-iters", "8"]


def test_per_token_loss_divides_by_the_tokens_of_the_whole_batch_at_every_layout(tmp_path):
    data = short_documents(tmp_path)
    # Every micro-batch has the same number of tokens: the sum over all of them divided by their
    # count is the mean of the micro-batch means, in the loss and in the gradients.
    base, _ = train(tmp_path, "base", *data)
    for ranks, layout in ((1, []), (2, [])):
        same, _ = train(tmp_path, f"same{ranks}", *data, "--calculate-per-token-loss", *layout, ranks=ranks)
        assert close(same, base, rel=1e-6), (ranks, same, base)
    # Without the EOD tokens' losses the counts differ, and the two runs with them.
    masked, _ = train(tmp_path, "masked", *data, "--eod-mask-loss")
    per_token, _ = train(tmp_path, "per_token", *data, "--eod-mask-loss", "--calculate-per-token-loss")
    assert sum(abs(x - y) > 1e-4 * abs(y) for x, y in zip(per_token, masked)) >= 4, (per_token, masked)
    for layout in (["--tensor-model-parallel-size", "2"], ["--pipeline-model-parallel-size", "2"], []):
        got, _ = train(tmp_path, "layout" + "".join(layout), *data, "--eod-mask-loss", "--calculate-per-token-loss",
                       *layout, ranks=2)
        assert close(got, per_token, rel=2e-6), (layout, got, per_token)


def test_domino_checkpoints_resume_without_it_and_back(tmp_path):
    """A --domino run's checkpoint resumes as plain tensor parallelism and the other way round,
    continuing the plain run's losses (within 1e-5: Domino sums each weight gradient in halves)."""
    tp = ["--tensor-model-parallel-size", "2"]
    plain, _ = train(tmp_path, "plain", *tp, ranks=2)
    for first, then in ((["--domino"], []), ([], ["--domino"])):
        ck = tmp_path / f"ck{len(first)}"
        head, _ = train(tmp_path, "head", *tp, *first, "--save", ck, "--save-interval", "3", "--exit-interval", "3",
                        ranks=2)
        tail, _ = train(tmp_path, "tail", *tp, *then, "--load", ck, ranks=2)
        assert close(head + tail, plain), (first, head + tail, plain)


def test_no_mmap_bin_files_reads_the_same_tokens(tmp_path):
    # The .bin read with pread instead of mapped: the same batches, so the same losses bit for bit,
    # with the prefetch thread on and off and at DP 2.
    data = short_documents(tmp_path)
    base, _ = train(tmp_path, "base", *data)
    for ranks, workers in ((1, "0"), (1, "2"), (2, "1")):
        got, _ = train(tmp_path, f"read{ranks}{workers}", *data, "--no-mmap-bin-files", "--num-workers", workers,
                       ranks=ranks)
        want = base if ranks == 1 else train(tmp_path, "mapped2", *data, ranks=2)[0]
        assert got == want, (ranks, workers, got, want)


def learning_rates(tmp_path, name, *flags, expect_exit=0):
    """The learning rate of each iteration, and the run's stderr."""
    metrics = tmp_path / f"{name}.jsonl"
    cmd = [program("pretrain_gpt"), *TINY, "--mock-data", "--vocab-size", "256", "--lr-warmup-iters", "1",
           "--lr-decay-style", "cosine", "--min-lr", "1e-4", "--metrics-file", str(metrics), *map(str, flags)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == expect_exit, proc.stdout[-3000:] + proc.stderr[-3000:]
    if expect_exit:
        return None, proc.stderr
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [r["learning_rate"] for r in rows if r["type"] == "train"], proc.stdout


def test_resume_with_another_schedule_needs_one_of_megatron_lms_two_flags(tmp_path):
    ck = tmp_path / "ck"
    whole, _ = learning_rates(tmp_path, "whole", "--train-iters", "4", "--save", ck, "--save-interval", "2")
    longer, _ = learning_rates(tmp_path, "longer", "--train-iters", "8")
    (ck / "latest_checkpointed_iteration.txt").write_text("2")
    resume = ["--train-iters", "8", "--load", ck]
    # Another --train-iters is another decay length (in samples, as Megatron-LM counts it): refused.
    _, err = learning_rates(tmp_path, "refused", *resume, expect_exit=1)
    assert ("OptimizerParamScheduler: class input value 32 and checkpoint value 16 for total number of iterations "
            "do not match") in err, err
    assert "--override-opt_param-scheduler" in err and "--use-checkpoint-opt_param-scheduler" in err, err
    # The checkpoint's schedule: iterations 3 and 4 at the rates of the run that saved it.
    kept, log = learning_rates(tmp_path, "kept", *resume, "--use-checkpoint-opt_param-scheduler")
    assert kept[:2] == whole[2:] and " > using checkpoint value 16 for total number of iterations" in log
    # This run's: the rates of the 8-iteration run from iteration 3 on (Megatron-LM's spelling too).
    overridden, log = learning_rates(tmp_path, "overridden", *resume, "--override-opt_param-scheduler")
    assert overridden == longer[2:] and " > overriding total number of iterations value to 32" in log
    assert longer[2:4] != whole[2:]
    _, err = learning_rates(tmp_path, "both", *resume, "--override-opt-param-scheduler",
                            "--use-checkpoint-opt_param-scheduler", expect_exit=2)
    assert "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler exclude each other" in err, err


def test_kill_switch_stops_before_the_next_iteration_without_saving(tmp_path):
    # Megatron-DeepSpeed's --kill-switch-path: the file already there, no iteration runs and
    # nothing is saved; absent, the run is the plain one.
    switch = tmp_path / "kill-switch"
    switch.write_text("")
    flags = ["--kill-switch-path", switch, "--save", tmp_path / "ck", "--save-interval", "1"]
    losses, log = train(tmp_path, "killed", *flags)
    assert losses == [] and f"Detected kill switch at {switch}. Exiting" in log
    assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").glob("iter_*"))
    switch.unlink()
    losses, log = train(tmp_path, "kept", *flags)
    assert len(losses) == 6 and "Detected kill switch" not in log
