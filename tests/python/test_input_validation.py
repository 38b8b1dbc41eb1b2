"""Bad input and faults on the way in, as a user meets them: every program ends with one line
"program: error: ..." and an exit code (2: the command line, 1: a failure while running), never
a signal; no checkpoint is replaced or its tracker moved back unless a flag says so."""
import json
import os
import subprocess
import zipfile

import pytest
import torch
from safetensors.torch import load_file, save_file

import megatron_cpp
from data_helpers import MPIRUN, program, TINY, write_mmidx


# One decay length, so that resumes with another --train-iters keep the saved schedule.
MOCK = ["--mock-data", "--vocab-size", "256", "--lr-decay-iters", "8"]


def run(cmd, env=None, timeout=240):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)


def one_error(proc, name, code):
    """The run ended by exit (not a signal) with `code` and one error line; returns that line."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    lines = [l for l in proc.stderr.splitlines() if l.startswith(f"{name}: error: ")]
    assert lines, proc.stderr[-3000:]
    assert len(set(lines)) == 1, lines  # ranks may each say the same line
    assert "terminate called" not in proc.stderr and "frame #" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


def pretrain(*flags, env=None):
    return run([program("pretrain_gpt"), *TINY, *map(str, flags)], env=env)


def test_config_file_that_does_not_parse_trains_nothing(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text("seed = 3\nhidden-size = [128\n")
    line = one_error(pretrain(*MOCK, "--train-iters", "2", "--config", config), "pretrain_gpt", 2)
    assert f"--config {config}:2:" in line and "not valid TOML" in line


def test_partial_launcher_environment_is_one_line():
    line = one_error(pretrain(*MOCK, "--train-iters", "2", env={"RANK": "0"}), "pretrain_gpt", 2)
    assert "RANK is set but WORLD_SIZE is not" in line


@pytest.mark.parametrize("tp", [1, 2])
def test_token_id_beyond_the_vocabulary_names_file_document_and_id(tmp_path, tp):
    prefix = str(tmp_path / "corpus")
    docs = [[[i % 200 + 1 for i in range(40)] + [0]] for _ in range(30)]
    docs[7][0][5] = 300  # one id past --vocab-size 256
    write_mmidx(prefix, docs, "int32")
    flags = ["--data-path", prefix, "--tokenizer-type", "NullTokenizer", "--vocab-size", "256", "--split", "1,0,0",
             "--train-iters", "40", "--tensor-model-parallel-size", tp, "--data-cache-path", tmp_path / "cache"]
    cmd = [program("pretrain_gpt"), *TINY, *map(str, flags)]
    proc = run(MPIRUN + ["-np", str(tp)] + cmd if tp > 1 else cmd)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"{prefix}.bin: document 7 holds token id 300 at position 5, outside the vocabulary [0, 256)" in proc.stderr


def test_a_run_that_cannot_fit_stops_before_allocating():
    line = one_error(pretrain(*MOCK, "--train-iters", "2", "--hidden-size", "1048576", "--num-attention-heads", "16"),
                     "pretrain_gpt", 1)
    assert "[memory] this rank needs about" in line and "--tensor-model-parallel-size" in line


def test_preprocess_data_refuses_a_directory_and_warns_on_empty_input(tmp_path):
    common = ["--output-prefix", tmp_path / "out", "--tokenizer-type", "NullTokenizer", "--vocab-size", "10"]
    proc = run([program("preprocess_data"), "--input", tmp_path, *map(str, common)])
    assert "is a directory" in one_error(proc, "preprocess_data", 1)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    proc = run([program("preprocess_data"), "--input", empty, *map(str, common)])
    assert proc.returncode == 0 and "holds no documents" in proc.stderr, proc.stderr
    proc = run([program("preprocess_data"), "--input", empty, "--workers", "0", *map(str, common)])
    assert "--workers" in one_error(proc, "preprocess_data", 2)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A 2-iteration checkpoint of the tiny model (and its Hugging Face export)."""
    root = tmp_path_factory.mktemp("ckpt")
    proc = pretrain(*MOCK, "--train-iters", "2", "--save", root / "ckpt", "--save-interval", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run([program("convert_checkpoint"), "--load", str(root / "ckpt"), "--export-hf", str(root / "hf")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


def copy(src, dst):
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    return dst


def test_tracker_problems_are_errors_not_fresh_starts(tmp_path, checkpoint):
    ckpt = copy(checkpoint / "ckpt", tmp_path / "ckpt")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("1" * 23)
    line = one_error(pretrain(*MOCK, "--train-iters", "4", "--load", ckpt), "pretrain_gpt", 1)
    assert "latest_checkpointed_iteration.txt should hold an iteration number or 'release', found '111" in line
    (ckpt / "latest_checkpointed_iteration.txt").unlink()
    line = one_error(pretrain(*MOCK, "--train-iters", "4", "--load", ckpt, "--save", ckpt), "pretrain_gpt", 1)
    assert "holds 1 checkpoint(s) (iter_0000002) but no latest_checkpointed_iteration.txt" in line
    assert sorted(n for n in os.listdir(ckpt) if n != "save.lock") == ["iter_0000002"]  # nothing written
    # An absent folder is a fresh start, as launch scripts expect on their first run.
    proc = pretrain(*MOCK, "--train-iters", "1", "--load", tmp_path / "absent")
    assert proc.returncode == 0 and "training starts from random weights" in proc.stdout + proc.stderr


def test_a_fresh_run_does_not_rewind_another_runs_checkpoints(tmp_path, checkpoint):
    ckpt = copy(checkpoint / "ckpt", tmp_path / "ckpt")
    line = one_error(pretrain(*MOCK, "--train-iters", "1", "--save", ckpt, "--save-interval", "1"),
                     "pretrain_gpt", 1)
    assert "its tracker names iteration 2 but this run starts at iteration 0" in line
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    proc = pretrain(*MOCK, "--train-iters", "1", "--save", ckpt, "--save-interval", "1", "--allow-save-rewind")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "1"


def test_checkpoint_without_checksums_is_checked_by_its_zip_crcs(tmp_path, checkpoint):
    ckpt = copy(checkpoint / "ckpt", tmp_path / "ckpt")
    rank_dir = ckpt / "iter_0000002" / "mp_rank_00"
    (rank_dir / "checksums.txt").unlink()
    proc = pretrain(*MOCK, "--train-iters", "3", "--load", ckpt)
    assert proc.returncode == 0, proc.stderr[-3000:]  # intact: loads
    path = rank_dir / "model_optim_rng.pt"
    with zipfile.ZipFile(path) as z:
        record = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    name_len, extra_len = int.from_bytes(data[record.header_offset + 26:record.header_offset + 28], "little"), \
        int.from_bytes(data[record.header_offset + 28:record.header_offset + 30], "little")
    data[record.header_offset + 30 + name_len + extra_len + record.file_size // 2] ^= 0x40
    path.write_bytes(bytes(data))
    line = one_error(pretrain(*MOCK, "--train-iters", "3", "--load", ckpt), "pretrain_gpt", 1)
    record_name = record.filename.split("/", 1)[1]
    assert f"{path} is corrupt: record '{record_name}' has CRC-32" in line, line


def test_convert_checkpoint_validates_targets_and_keeps_the_source(tmp_path, checkpoint):
    ckpt = copy(checkpoint / "ckpt", tmp_path / "ckpt")
    before = sorted(os.listdir(ckpt))
    convert = [program("convert_checkpoint"), "--load", str(ckpt), "--save", str(ckpt)]
    line = one_error(run(convert + ["--target-tensor-parallel-size", "-2"]), "convert_checkpoint", 1)
    assert "--target-tensor-parallel-size must be >= 1 (got -2)" in line
    line = one_error(run(convert + ["--target-pipeline-model-parallel-size", "0"]), "convert_checkpoint", 1)
    assert "--target-pipeline-model-parallel-size must be >= 1 (got 0)" in line
    line = one_error(run(convert + ["--target-tensor-parallel-size", "2"]), "convert_checkpoint", 1)
    assert f"--save {ckpt} already holds checkpoints" in line and "--overwrite" in line
    assert sorted(os.listdir(ckpt)) == before
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    proc = run(convert + ["--target-tensor-parallel-size", "2", "--overwrite"])
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(ckpt / "iter_0000002")) == ["mp_rank_00", "mp_rank_01"]


def test_hugging_face_config_and_shapes_are_checked(tmp_path, checkpoint):
    hf = copy(checkpoint / "hf", tmp_path / "hf")
    config = json.loads((hf / "config.json").read_text())
    convert = [program("convert_checkpoint"), "--import-hf", str(hf), "--save", str(tmp_path / "out")]
    (hf / "config.json").write_text(json.dumps(dict(config, n_head=0)))
    line = one_error(run(convert), "convert_checkpoint", 1)
    assert f"{hf / 'config.json'}: \"n_head\" must be a positive integer (got 0)" in line
    (hf / "config.json").write_text(json.dumps(dict(config, n_head=3)))
    assert "hidden size 32 is not divisible by 3 attention heads" in one_error(run(convert), "convert_checkpoint", 1)
    (hf / "config.json").write_text(json.dumps(config))
    tensors = load_file(hf / "model.safetensors")
    tensors["transformer.h.1.mlp.c_fc.weight"] = torch.zeros(32, 100)
    save_file(tensors, hf / "model.safetensors", metadata={"format": "pt"})
    line = one_error(run(convert), "convert_checkpoint", 1)
    assert "transformer.h.1.mlp.c_fc.weight [32, 100] give decoder.layers.1.mlp.linear_fc1.weight of shape [100, 32]" \
        in line and "config.json implies [128, 32]" in line
    assert not (tmp_path / "out").exists()


def test_python_bindings_raise_instead_of_crashing():
    with pytest.raises((ValueError, RuntimeError), match="tensor-parallel size must be >= 1"):
        megatron_cpp.vocab_size_with_padding(10, 1, 0)
    with pytest.raises((ValueError, RuntimeError), match="num_chunks"):
        megatron_cpp.ColumnParallelLinear(8, 8, num_chunks=0)
    with pytest.raises((ValueError, RuntimeError), match="--split"):
        megatron_cpp.parse_and_normalize_split("-1,2,0")


@pytest.mark.parametrize("flag, values, ranks", [
    ("--seed", ("1234", "5"), "1234 on ranks 0, 2, 5 on rank 1"),
    ("--num-attention-heads", ("4", "2"), "4 on ranks 0, 2, 2 on rank 1"),
])
def test_ranks_launched_with_different_flags_stop_with_one_line(flag, values, ranks):
    """One rank of three launched with another setting (mpirun's per-rank command lines): every rank
    stops at start-up with exit 2 before any group is built, one line naming the flag and the ranks."""
    def command(value):
        return [program("pretrain_gpt"), *TINY, *MOCK, "--train-iters", "2", "--global-batch-size", "6", flag, value]
    proc = run(MPIRUN + ["-np", "1", *command(values[0]), ":", "-np", "1", *command(values[1]), ":",
                         "-np", "1", *command(values[0])], timeout=120)
    line = one_error(proc, "pretrain_gpt", 2)
    assert f"the ranks were launched with different settings: {flag} is {ranks}" in line, line
    assert sum(l.startswith("pretrain_gpt: error: ") for l in proc.stderr.splitlines()) == 1, proc.stderr[-2000:]
