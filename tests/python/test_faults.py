"""Faults during a run: a disk that fills during a save, rank folders mixed from two saves, a
second run pointed at the same save folder. Each ends with one clear line and loses nothing."""
import fcntl
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import time
import zipfile

import pytest

from data_helpers import free_port, MPIRUN, program, TINY as TINY_BASE

# One decay length for every run: resumes with another --train-iters keep the saved schedule.
TINY = TINY_BASE + ["--vocab-size", "256", "--lr-decay-iters", "8"]
MOCK = ["--mock-data"]


def pretrain(*flags, ranks=1, preexec_fn=None):
    words = [str(f) for f in flags]
    cmd = [program("pretrain_gpt"), *TINY, *(MOCK if "--data-path" not in words else []), *words]
    if ranks > 1:
        cmd = MPIRUN + ["-np", str(ranks)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, preexec_fn=preexec_fn)


def test_a_save_that_fills_the_disk_names_the_file_and_keeps_the_previous_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    proc = pretrain("--train-iters", "2", "--save", ckpt, "--save-interval", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    size = os.path.getsize(ckpt / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt")

    def small_disk():  # every file the run writes stops growing at half a checkpoint file
        # SIGXFSZ is left at its default (subprocess restores it): the program itself ignores it
        # and takes the EFBIG path.
        resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, size // 2))

    proc = pretrain("--train-iters", "4", "--load", ckpt, "--save", ckpt, "--save-interval", "2",
                    preexec_fn=small_disk)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [l for l in proc.stderr.splitlines() if l.startswith("pretrain_gpt: error: ")]
    assert len(lines) == 1 and "terminate" not in proc.stderr, proc.stderr[-3000:]
    assert f"writing {ckpt}/iter_0000004.tmp/mp_rank_00.tmp/model_optim_rng.pt failed after" in lines[0], lines[0]
    assert "File too large" in lines[0]
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert sorted(p.name for p in ckpt.iterdir() if p.name.startswith("iter_")) == ["iter_0000002"]
    proc = pretrain("--train-iters", "3", "--load", ckpt)  # the previous checkpoint loads
    assert proc.returncode == 0 and "at iteration 2" in proc.stdout + proc.stderr, proc.stderr[-3000:]


def test_an_async_save_that_fills_the_disk_is_reported_and_keeps_the_previous_checkpoint(tmp_path):
    """--async-save: the background write fails; the next check reports it (one line, exit 1)
    and the tracker still names the previous checkpoint. One rank: mpirun's own files would hit
    the file-size limit."""
    ckpt = tmp_path / "ckpt"
    flags = ["--save", ckpt, "--save-interval", "2", "--async-save"]
    proc = pretrain("--train-iters", "2", *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    size = os.path.getsize(ckpt / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt")

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, size // 2))

    proc = pretrain("--train-iters", "8", "--load", ckpt, *flags, preexec_fn=small_disk)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [l for l in proc.stderr.splitlines() if l.startswith("pretrain_gpt: error: ")]
    assert len(lines) == 1 and "terminate" not in proc.stderr, proc.stderr[-3000:]
    assert f"writing {ckpt}/iter_0000004.tmp/mp_rank_00.tmp/model_optim_rng.pt failed after" in lines[0], lines[0]
    # Reported at the check after the write failed: no iteration-4 save ever became current.
    assert "successfully saved checkpoint from iteration       4" not in proc.stdout
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert sorted(p.name for p in ckpt.iterdir() if p.name.startswith("iter_")) == ["iter_0000002"]


def test_rank_folders_from_two_saves_are_refused_naming_the_ranks(tmp_path):
    ckpt = tmp_path / "ckpt"
    flags = ["--tensor-model-parallel-size", "2", "--save", ckpt, "--save-interval", "2"]
    proc = pretrain("--train-iters", "4", *flags, ranks=2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shutil.rmtree(ckpt / "iter_0000002" / "mp_rank_01")
    shutil.copytree(ckpt / "iter_0000004" / "mp_rank_01", ckpt / "iter_0000002" / "mp_rank_01")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")
    proc = pretrain("--train-iters", "6", "--load", ckpt, "--tensor-model-parallel-size", "2", ranks=2)
    assert proc.returncode != 0
    assert ("the ranks disagree on where to resume: rank 0 read iteration 2, consumed samples 8 train / 0 valid, "
            "checkpoint version 3, rank 1 read iteration 4, consumed samples 16 train / 0 valid, checkpoint version 3"
            ) in proc.stderr, proc.stderr[-3000:]
    # One rank's file from another version of the format.
    (ckpt / "latest_checkpointed_iteration.txt").write_text("4")
    set_checkpoint_version(ckpt / "iter_0000004" / "mp_rank_01", 2.5)
    proc = pretrain("--train-iters", "6", "--load", ckpt, "--tensor-model-parallel-size", "2", ranks=2)
    assert proc.returncode != 0
    assert ("rank 0 read iteration 4, consumed samples 16 train / 0 valid, checkpoint version 3, rank 1 read "
            "iteration 4, consumed samples 16 train / 0 valid, checkpoint version 2.5") in proc.stderr, proc.stderr[-3000:]
    # Megatron-LM's versions before 2.0 ordered the fused QKV weight otherwise.
    set_checkpoint_version(ckpt / "iter_0000004" / "mp_rank_00", 1.0)
    set_checkpoint_version(ckpt / "iter_0000004" / "mp_rank_01", 1.0)
    proc = pretrain("--train-iters", "6", "--load", ckpt, "--tensor-model-parallel-size", "2", ranks=2)
    assert proc.returncode != 0
    assert "model_optim_rng.pt has checkpoint_version 1: its query/key/value weights are in the order" in proc.stderr


def set_checkpoint_version(rank_dir, version):
    """Rewrites checkpoint_version (BINUNICODE key, BINPUT, BINFLOAT) in data.pkl, with the zip's
    CRCs recomputed and checksums.txt dropped, as another writer would have left the file."""
    path = rank_dir / "model_optim_rng.pt"
    with zipfile.ZipFile(path) as archive:
        records = [(info.filename, archive.read(info)) for info in archive.infolist()]
    key = b"X" + struct.pack("<I", 18) + b"checkpoint_version"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in records:
            if name.endswith("/data.pkl"):
                at = data.index(b"G", data.index(key) + len(key))
                data = data[:at + 1] + struct.pack(">d", version) + data[at + 9:]
            archive.writestr(name, data)
    (rank_dir / "checksums.txt").unlink(missing_ok=True)


def test_a_second_run_saving_into_the_same_folder_is_refused(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    with open(ckpt / "save.lock", "w") as held:  # another run's lock, alive
        held.write("pid 4242 on trainer-7\n")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = pretrain("--train-iters", "2", "--save", ckpt, "--save-interval", "2")
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert (f"--save {ckpt} is in use by another run (pid 4242 on trainer-7, {ckpt}/save.lock)"
                in proc.stderr), proc.stderr[-3000:]
        assert not (ckpt / "latest_checkpointed_iteration.txt").exists()
    # The holder is gone: its lock file is stale and the next run takes it over.
    proc = pretrain("--train-iters", "2", "--save", ckpt, "--save-interval", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"


def test_checkpoint_paths_with_spaces_non_ascii_names_and_symlinks(tmp_path):
    ckpt = tmp_path / "run one" / "chéckpoints ü"
    proc = pretrain("--train-iters", "2", "--save", ckpt, "--save-interval", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    link = tmp_path / "latest-link"
    link.symlink_to(ckpt, target_is_directory=True)
    proc = pretrain("--train-iters", "3", "--load", link, "--save", link, "--save-interval", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "at iteration 2" in proc.stdout + proc.stderr
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "3"


def test_a_resume_on_other_data_is_refused_unless_overridden(tmp_path):
    from data_helpers import write_mmidx
    ckpt = tmp_path / "ckpt"
    data = ["--tokenizer-type", "NullTokenizer", "--split", "1,0,0", "--data-cache-path", tmp_path / "cache"]
    write_mmidx(str(tmp_path / "corpus"), [[[i % 200 + 1 for i in range(40)] + [0]] for _ in range(30)], "int32")
    flags = [*data, "--data-path", tmp_path / "corpus", "--save", ckpt, "--save-interval", "2"]
    proc = pretrain("--train-iters", "2", *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The corpus grows by a document: its sample order is another one.
    write_mmidx(str(tmp_path / "corpus"), [[[i % 200 + 1 for i in range(40)] + [0]] for _ in range(31)], "int32")
    proc = pretrain("--train-iters", "4", *flags, "--load", ckpt)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "was trained on corpus (" in proc.stderr and "; this run has corpus (" in proc.stderr, proc.stderr[-3000:]
    assert "--override-data-check" in proc.stderr
    proc = pretrain("--train-iters", "4", *flags, "--load", ckpt, "--override-data-check")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "4"


def torchrun_style_pair(tmp_path, timeout_seconds):
    """Two pretrain_gpt ranks started with torchrun's variables (Gloo), at TP 2 so that every
    step waits on the peer; returns them once the last rank has logged a step."""
    port, ranks = free_port(), []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS=str(timeout_seconds))
        cmd = [program("pretrain_gpt"), *TINY, *MOCK, "--train-iters", "100000", "--tensor-model-parallel-size", "2"]
        out = open(tmp_path / f"rank{rank}.out", "w+")
        ranks.append((subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True), out))
    for _ in range(600):
        if "iteration        2/" in (tmp_path / "rank1.out").read_text():
            return ranks
        time.sleep(0.1)
    raise AssertionError((tmp_path / "rank1.out").read_text()[-3000:])


@pytest.mark.parametrize("fault", ["dies", "stops"])
def test_a_peer_that_dies_or_stops_ends_its_peers_with_exit_3(tmp_path, fault):
    (rank0, out0), (rank1, _) = torchrun_style_pair(tmp_path, timeout_seconds=5)
    try:
        os.kill(rank1.pid, signal.SIGKILL if fault == "dies" else signal.SIGSTOP)
        assert rank0.wait(timeout=60) == 3
    finally:
        rank1.kill()
        rank1.wait()
    out0.seek(0)
    text = out0.read()
    out0.close()
    lines = [l for l in text.splitlines() if l.startswith("pretrain_gpt: error: ")]
    assert len(lines) == 1, lines
    why = "failed at group rank 0 (world rank 0)" if fault == "dies" else "timed out after 5 s at group rank 0"
    assert "[comm] " in lines[0] and why in lines[0], lines[0]


def rendezvous(ranks, world, port):
    """pretrain_gpt processes with torchrun's variables for `ranks` of a `world`-rank job at
    127.0.0.1:port (5 s distributed timeout); returns each one's exit code and output."""
    procs = []
    for rank in ranks:
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   MEGATRON_DISTRIBUTED_TIMEOUT_SECONDS="5")
        procs.append(subprocess.Popen([program("pretrain_gpt"), *TINY, *MOCK, "--train-iters", "2", "--global-batch-size", "12"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return [(p.wait(timeout=90), p.stdout.read()) for p in procs]


def rendezvous_error(code, out):
    """The one line a process that ended on a rendezvous fault printed (exit 3, no backtrace)."""
    lines = [l for l in out.splitlines() if l.startswith("pretrain_gpt: error: ")]
    assert code == 3 and len(lines) == 1, (code, out[-3000:])
    assert "frame #" not in out and "Exception raised from" not in out, out[-3000:]
    return lines[0]


def test_rendezvous_faults_end_each_rank_within_the_timeout_with_one_line_and_exit_3():
    # A rank that never comes: every rank that did names it.
    port = free_port()
    for code, out in rendezvous([0, 1], 3, port):
        line = rendezvous_error(code, out)
        assert f"s at 127.0.0.1:{port} (MASTER_ADDR:MASTER_PORT) for rank 2 of WORLD_SIZE=3, which never came" \
            in line, line
    # Two processes given RANK=1: the second to check in says so; the job of the other two runs.
    port = free_port()
    results = rendezvous([0, 1, 1], 2, port)
    assert sorted(code for code, _ in results) == [0, 0, 3], [(c, o[-1500:]) for c, o in results]
    line = rendezvous_error(*next(r for r in results if r[0] == 3))
    assert f"RANK=1 was given to two processes of the job at 127.0.0.1:{port}" in line, line
    # A foreign service on MASTER_PORT that accepts and never answers.
    with socket.socket() as foreign:
        foreign.bind(("127.0.0.1", 0))
        foreign.listen(8)
        port = foreign.getsockname()[1]
        start = time.monotonic()
        (client, client_out), (server, server_out) = rendezvous([1, 0], 2, port)
        assert time.monotonic() - start < 60
    assert "no rendezvous store answered on that port (a foreign service is listening there?)" in \
        rendezvous_error(client, client_out)
    line = rendezvous_error(server, server_out)
    assert f"rank 0 could not serve the rendezvous store at 127.0.0.1:{port}" in line and "EADDRINUSE" in line, line
