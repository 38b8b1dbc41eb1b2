"""The run's own checks and housekeeping from Megatron-LM's flags: the replica hash check
(--check-weight-hash-across-dp-replicas-interval, --test-mode), --save-retain-interval,
--timing-log-option and --logging-level."""
import os
import re
import subprocess

from data_helpers import MPIRUN, TINY, program

MOCK = ["--mock-data", "--vocab-size", "256", "--lr-warmup-iters", "1", "--seed", "5"]


def pretrain(*flags, ranks=1, env=None, expect=0):
    """The run; with expect=1 it must fail, each rank's lines tagged with its rank."""
    cmd = [program("pretrain_gpt"), *TINY, *MOCK, *map(str, flags)]
    launcher = MPIRUN + ["-np", str(ranks)] + (["--tag-output"] if expect else []) if ranks > 1 else []
    proc = subprocess.run(launcher + cmd, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, **(env or {})))
    assert (proc.returncode == 0) == (expect == 0), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_weight_hash_check_passes_on_agreeing_replicas_at_every_interval():
    for layout in (["--tensor-model-parallel-size", "2"],  # 2 x DP 2
                   ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params"]):  # ZeRO-3
        proc = pretrain("--train-iters", "4", "--check-weight-hash-across-dp-replicas-interval", "2", *layout,
                        ranks=4 if layout[0].startswith("--tensor") else 2)
        assert re.findall(r">>> Weight hashes match after (\d+) iterations", proc.stdout) == ["2", "4"], layout


def test_a_replica_changed_on_one_rank_stops_every_rank_naming_the_parameter():
    # Rank 3 of TP 2 x DP 2 holds data-parallel copy 1 of tensor-parallel rank 1's parameters.
    proc = pretrain("--train-iters", "4", "--tensor-model-parallel-size", "2",
                    "--check-weight-hash-across-dp-replicas-interval", "2", ranks=4, expect=1,
                    env={"MEGATRON_FAULT_INJECTION": "replica_check:change_a_parameter@3"})
    assert ">>> Weight hashes match" not in proc.stdout
    named = re.findall(r"\[\d+,(\d)\]<stderr>:.*parameter (\S+) differs between its data-parallel copies at iteration 2: "
                       r"rank 1 holds one copy, rank 3 another", proc.stdout + proc.stderr)
    assert {r for r, _ in named} == {"1", "3"}, proc.stdout[-3000:] + proc.stderr[-3000:]
    changed = re.findall(r"\[fault injection\] rank 3 changes its copy of (\S+)", proc.stderr)
    assert len(changed) == 1 and {p for _, p in named} == set(changed), (changed, named)
    others = re.findall(r"\[\d+,(\d)\]<stderr>:.*parameter copies differ on other ranks at iteration 2",
                        proc.stdout + proc.stderr)
    assert set(others) == {"0", "2"}, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_test_mode_also_compares_the_tensor_parallel_copies_each_iteration():
    ok = pretrain("--train-iters", "3", "--tensor-model-parallel-size", "2", "--test-mode", ranks=2)
    assert re.findall(r">>> Weight hashes match after (\d+) iterations", ok.stdout) == ["1", "2", "3"]
    # Without data parallelism only the tensor-parallel comparison can see rank 1's change.
    bad = pretrain("--train-iters", "3", "--tensor-model-parallel-size", "2", "--test-mode", ranks=2, expect=1,
                   env={"MEGATRON_FAULT_INJECTION": "replica_check:change_a_parameter@1"})
    out = bad.stdout + bad.stderr
    assert len(re.findall(r"\[\d+,[01]\]<stderr>:.*differs between its tensor-parallel copies at iteration 1: rank 0 holds "
                          r"one copy, rank 1 another", out)) == 2, out[-3000:]


def iterations_in(folder):
    return sorted(int(name[5:]) for name in os.listdir(folder) if re.fullmatch(r"iter_\d{7}", name))


def test_save_retain_interval_keeps_its_multiples_and_the_latest(tmp_path):
    save = tmp_path / "ckpt"
    flags = ["--save", save, "--save-interval", "1", "--save-retain-interval", "2"]
    pretrain("--train-iters", "7", *flags)
    assert iterations_in(save) == [2, 4, 6, 7]
    assert (save / "latest_checkpointed_iteration.txt").read_text().strip() == "7"
    # Resumed: the last run's final checkpoint (7) is off the interval too once a newer one exists.
    pretrain("--train-iters", "10", "--load", save, "--override-opt_param-scheduler", *flags)
    assert iterations_in(save) == [2, 4, 6, 8, 10]
    refused = subprocess.run([program("pretrain_gpt"), *TINY, *MOCK, "--train-iters", "2", "--save", str(save),
                              "--save-interval", "2", "--save-retain-interval", "3"], capture_output=True, text=True)
    assert refused.returncode == 2 and "--save-retain-interval (3) must be a multiple of --save-interval (2)" in \
        refused.stderr, refused.stderr


def timer_blocks(log, header):
    return [block.split("\n [")[0] for block in log.split(header)[1:]]


def test_timing_log_option_prints_max_or_every_ranks_time():
    for option, header in (("max", "max time across ranks (ms):"), ("all", "times across ranks (ms):"),
                           ("minmax", "(min, max) time across ranks (ms):")):
        proc = pretrain("--train-iters", "2", "--log-interval", "2", "--timing-log-option", option,
                        "--pipeline-model-parallel-size", "2", ranks=2)
        blocks = timer_blocks(proc.stdout, header)
        assert len(blocks) == 1, (option, proc.stdout[-2000:])
        lines = blocks[0].strip("\n").splitlines()
        if option == "all":
            # Each timer, then one line per rank: both pipeline stages ran forward-backward.
            at = lines.index("  forward-backward:")
            assert [ln.split(":")[0] for ln in lines[at + 1:at + 3]] == ["     rank  0", "     rank  1"], lines
            assert all(float(ln.split(":")[1]) > 0 for ln in lines[at + 1:at + 3])
        else:
            row = next(ln for ln in lines if ln.startswith("    forward-backward "))
            # Megatron-LM's layout: the name and a space padded with dots to 48 characters.
            assert row[4:52] == "forward-backward ".ljust(48, "."), row
            value = row[52:].strip(": ")
            assert re.fullmatch(r"\d+\.\d\d" if option == "max" else r"\(\d+\.\d\d, \d+\.\d\d\)", value), row


def test_logging_level_ten_shows_the_debug_lines():
    flags = ["--train-iters", "2", "--check-weight-hash-across-dp-replicas-interval", "1"]
    quiet = pretrain(*flags, ranks=2)
    assert "[debug]" not in quiet.stdout
    loud = pretrain(*flags, "--logging-level", "10", ranks=2)
    assert "Setting logging level to 10" in loud.stdout
    assert len(re.findall(r"\[rank [01]/2\] \[debug\] \[training\] comparing \d+ parameter hashes over 2 "
                          r"data-parallel ranks", loud.stdout)) == 4, loud.stdout[-3000:]
    env = pretrain(*flags, ranks=2, env={"MEGATRON_LOGGING_LEVEL": "10"})
    assert "[debug]" in env.stdout
    # Above 10 the iteration lines stay, as Megatron-LM prints them whatever its logger's level.
    high = pretrain(*flags, "--logging-level", "40", ranks=2)
    assert "[debug]" not in high.stdout and high.stdout.count(" iteration ") >= 2
