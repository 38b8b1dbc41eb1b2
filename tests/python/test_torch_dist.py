"""--ckpt-format torch_dist: megatron-core's sharded checkpoint over PyTorch Distributed Checkpoint.

A checkpoint saved at TP 2 x PP 2 x DP 2 resumes at other layouts (TP 1, TP 4, PP 4, DP 4, with and
without the distributed optimizer), and an MoE one saved at EP 2 at EP 1 and EP 4, with the
uninterrupted run's losses, bit-identical at the same layout. --async-save writes the plain save's files byte for byte, and a SIGKILL during its
background write leaves the previous checkpoint current. convert_checkpoint moves a checkpoint
between the two formats. torch.distributed.checkpoint (the format's reference reader) reads our files, and every
tensor it gives equals the legacy format's of the same run at TP 1 under megatron-core's key (layers
stacked on a leading axis, the norms under Transformer Engine's names). Hostile folders (a missing
or truncated .distcp, a .metadata that disagrees with the files or the model, a pickle that would
run code, a metadata.json of another version, a tensor no parameter reads) stop the load with one
line naming the file and key."""
from __future__ import annotations

import hashlib
import io
import json
import pickle
import subprocess
from pathlib import Path

import pytest
import torch
from test_checkpoint import CONVERT, PRETRAIN, losses, run, tiny
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import MetadataIndex

NO_DROPOUT = ["--hidden-dropout", "0", "--attention-dropout", "0"]
LLAMA = ["--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
         "--untie-embeddings-and-output-weights", "--ffn-hidden-size", "48"]
SAVED = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"]  # x DP 2 on 8 ranks


def layout(tp: int = 1, pp: int = 1) -> list[str]:
    return ["--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp)]


MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "40", "--swiglu", "--disable-bias-linear",
       "--moe-layer-freq", "[1,0,1,1]"]


def ep(size: int) -> list[str]:
    return ["--expert-model-parallel-size", str(size)]


@pytest.mark.parametrize("shape, saved, distopt, resumes", [
    (LLAMA, (SAVED, 8), True, [(layout(), 1), (layout(pp=4), 4), (layout(), 4), (SAVED, 8)]),
    ([], (SAVED, 8), False, [(layout(tp=4), 4), (layout(tp=2), 2)]),
    (MOE, (ep(2), 4), True, [([], 1), (ep(4), 4), (layout(tp=2) + ["--sequence-parallel"] + ep(2), 4),
                             (layout(tp=2) + ["--sequence-parallel", "--expert-tensor-parallel-size", "1"] + ep(4), 4),
                             (ep(2), 4)]),
], ids=["llama_distributed_optimizer", "gpt2", "moe_expert_parallel"])
def test_a_torch_dist_checkpoint_resumes_at_any_layout(tmp_path, shape, saved, distopt, resumes):
    opt = ["--use-distributed-optimizer"] if distopt else []
    ck = tmp_path / "ck"
    run([PRETRAIN, *tiny(6, *shape, *opt, *saved[0], *NO_DROPOUT, "--save", str(ck), "--save-interval", "3",
                      "--ckpt-format", "torch_dist", "--metrics-file", str(tmp_path / "full.jsonl"))], np=saved[1])
    full = losses(tmp_path / "full.jsonl")
    assert sorted(full) == [1, 2, 3, 4, 5, 6]
    assert (ck / "iter_0000003" / "metadata.json").is_file() and not list((ck / "iter_0000003").glob("mp_rank_*"))
    for i, (flags, np_) in enumerate(resumes):
        metrics = tmp_path / f"resumed{i}.jsonl"
        out = run([PRETRAIN, *tiny(6, *shape, *opt, *flags, *NO_DROPOUT, "--load", str(ck), "--ckpt-step", "3",
                                   "--metrics-file", str(metrics))], np=np_).stdout
        assert "[ iter_0000003 ] at iteration 3" in out
        resumed = losses(metrics)
        assert sorted(resumed) == [4, 5, 6], flags
        if (flags, np_) == saved:  # the same layout: bit-identical
            assert resumed == {k: v for k, v in full.items() if k > 3}
        for it, loss in resumed.items():
            assert loss == pytest.approx(full[it], rel=1e-5), (flags, np_, it)


def test_async_save_writes_what_a_plain_save_writes_and_a_kill_keeps_the_previous(tmp_path):
    """--async-save with torch_dist at TP 2 x DP 2 (distributed optimizer): every file byte-identical
    to the plain save's, losses unchanged; a SIGKILL while the background thread writes leaves the
    previous checkpoint current, and the resume repeats the killed run's losses."""
    flags = [*layout(tp=2), "--use-distributed-optimizer", *NO_DROPOUT, "--ckpt-format", "torch_dist",
             "--save-interval", "2"]
    plain, background = tmp_path / "plain", tmp_path / "ck"
    run([PRETRAIN, *tiny(4, *flags, "--save", str(background), "--metrics-file", str(tmp_path / "plain.jsonl"))], np=4)
    background.rename(plain)
    run([PRETRAIN, *tiny(4, *flags, "--save", str(background), "--async-save",
                         "--metrics-file", str(tmp_path / "async.jsonl"))], np=4)
    assert losses(tmp_path / "async.jsonl") == losses(tmp_path / "plain.jsonl")
    files = sorted(p.relative_to(plain) for p in plain.rglob("*") if p.is_file() and p.name != "save.lock")
    assert len([f for f in files if f.suffix == ".distcp"]) == 2 * 4  # 2 saves x 4 ranks
    for f in files:
        assert (background / f).read_bytes() == (plain / f).read_bytes(), f

    killed = run([PRETRAIN, *tiny(6, *flags, "--load", str(background), "--save", str(background), "--async-save",
                                  "--metrics-file", str(tmp_path / "killed.jsonl"))],
                 np=4, check=False, env={"MEGATRON_FAULT_INJECTION": "save:mid_file@1"})
    assert killed.returncode != 0 and "[fault injection]" in killed.stderr, killed.stderr[-2000:]
    assert (background / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    run([PRETRAIN, *tiny(6, *flags, "--load", str(background), "--save", str(background),
                         "--metrics-file", str(tmp_path / "resumed.jsonl"))], np=4)
    assert sorted(losses(tmp_path / "killed.jsonl")) == [5, 6]
    assert losses(tmp_path / "resumed.jsonl") == losses(tmp_path / "killed.jsonl")
    assert not [p.name for p in background.iterdir() if p.name.endswith(".tmp")]


def test_verify_integrity_keeps_every_files_sha256_and_refuses_a_changed_one(tmp_path):
    """--verify-integrity (megatron-core's integrity.json): each file of the iteration folder with
    its SHA-256 as hashlib computes it; a resume checks them and goes on, one flipped byte in a
    .distcp file stops the next with one line naming that file, and a checkpoint saved without it
    is named as such. Other formats are refused at start-up."""
    ck = tmp_path / "ck"
    flags = [*layout(tp=2), *NO_DROPOUT, "--ckpt-format", "torch_dist", "--verify-integrity"]
    run([PRETRAIN, *tiny(2, *flags, "--save", str(ck), "--save-interval", "2")], np=2)
    it = ck / "iter_0000002"
    manifest = json.loads((it / "integrity.json").read_text())
    files = sorted(p.name for p in it.iterdir() if p.is_file() and p.name != "integrity.json")
    assert manifest["algorithm"] == "sha256" and sorted(manifest["files"]) == files and "__1_0.distcp" in files
    assert manifest["files"] == {name: hashlib.sha256((it / name).read_bytes()).hexdigest() for name in files}
    out = run([PRETRAIN, *tiny(3, *flags, "--load", str(ck))], np=2).stdout
    assert "[ iter_0000002 ] at iteration 2" in out
    shard = it / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    bad = run([PRETRAIN, *tiny(3, *flags, "--load", str(ck))], np=2, check=False)
    assert bad.returncode != 0 and "1 file(s) of" in bad.stderr and "__1_0.distcp: hash mismatch" in bad.stderr, \
        bad.stderr[-2000:]
    (it / "integrity.json").unlink()
    bad = run([PRETRAIN, *tiny(3, *flags, "--load", str(ck))], np=2, check=False)
    assert bad.returncode != 0 and "saved without --verify-integrity" in bad.stderr, bad.stderr[-2000:]
    refused = run([PRETRAIN, *tiny(1, "--verify-integrity")], check=False)
    assert refused.returncode == 2 and "--verify-integrity needs --ckpt-format torch_dist" in refused.stderr


def test_convert_checkpoint_moves_between_the_formats(tmp_path):
    """torch_dist (TP 2 x PP 2) -> torch at TP 1 -> torch_dist again: each resumes with the same
    losses, bit for bit (the same layout and state each time)."""
    flags = [*LLAMA, *NO_DROPOUT]
    run([PRETRAIN, *tiny(2, *flags, *layout(tp=2, pp=2), "--save", str(tmp_path / "dist"), "--ckpt-format",
                         "torch_dist")], np=4)
    out = run([CONVERT, "--load", str(tmp_path / "dist"), "--save", str(tmp_path / "torch")]).stdout
    assert "(torch, TP 1, PP 1, EP 1)" in out
    out = run([CONVERT, "--load", str(tmp_path / "torch"), "--save", str(tmp_path / "back"), "--ckpt-format",
               "torch_dist"]).stdout
    assert "(torch_dist, " in out and (tmp_path / "back" / "iter_0000002" / "metadata.json").is_file()
    resumed = {}
    for name in ("dist", "torch", "back"):
        run([PRETRAIN, *tiny(4, *flags, "--load", str(tmp_path / name), "--metrics-file", str(tmp_path / f"{name}.jsonl"))])
        resumed[name] = losses(tmp_path / f"{name}.jsonl")
    assert sorted(resumed["dist"]) == [3, 4]
    assert resumed["dist"] == resumed["torch"] == resumed["back"]


def test_use_checkpoint_args_takes_the_shape_but_not_the_layout(tmp_path):
    """--use-checkpoint-args with a torch_dist --load: the model's shape from it, the layout this
    run's (any loads it); the losses continue."""
    run([PRETRAIN, *tiny(4, *LLAMA, *layout(tp=2), *NO_DROPOUT, "--save", str(tmp_path / "ck"), "--save-interval", "2",
                         "--ckpt-format", "torch_dist", "--metrics-file", str(tmp_path / "full.jsonl"))], np=2)
    run([PRETRAIN, *tiny(4, *NO_DROPOUT, "--load", str(tmp_path / "ck"), "--ckpt-step", "2", "--use-checkpoint-args",
                         "--metrics-file", str(tmp_path / "resumed.jsonl"))])
    full, resumed = losses(tmp_path / "full.jsonl"), losses(tmp_path / "resumed.jsonl")
    assert sorted(resumed) == [3, 4]
    for it, loss in resumed.items():
        assert loss == pytest.approx(full[it], rel=1e-5), it


# Our local layers' norm names as megatron-core's torch_dist keys give them (Transformer Engine's).
FUSED = {"input_layernorm.weight": "self_attention.linear_qkv.layer_norm_weight",
         "input_layernorm.bias": "self_attention.linear_qkv.layer_norm_bias",
         "pre_mlp_layernorm.weight": "mlp.linear_fc1.layer_norm_weight",
         "pre_mlp_layernorm.bias": "mlp.linear_fc1.layer_norm_bias"}


def torch_dist_key(name: str) -> tuple[str, int | None]:
    """decoder.layers.3.input_layernorm.weight -> (decoder.layers.self_attention.linear_qkv.layer_norm_weight, 3)"""
    parts = name.split(".")
    if parts[:2] != ["decoder", "layers"]:
        return name, None
    rest = ".".join(parts[3:])
    return "decoder.layers." + FUSED.get(rest, rest), int(parts[2])


def test_torch_distributed_checkpoint_reads_what_the_legacy_format_holds(tmp_path):
    flags = [*LLAMA, *layout(tp=2), *NO_DROPOUT, "--train-iters", "2"]
    run([PRETRAIN, *tiny(2, *flags, "--save", str(tmp_path / "dist"), "--ckpt-format", "torch_dist")], np=2)
    run([PRETRAIN, *tiny(2, *flags, "--save", str(tmp_path / "legacy"))], np=2)
    run([CONVERT, "--load", str(tmp_path / "legacy"), "--save", str(tmp_path / "tp1")])
    legacy = torch.load(tmp_path / "tp1" / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt", weights_only=True)

    folder = tmp_path / "dist" / "iter_0000002"
    assert json.loads((folder / "metadata.json").read_text()) == {
        "sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch",
        "common_backend_version": 1}
    metadata = FileSystemReader(str(folder)).read_metadata()
    tensors = {k: torch.zeros(v.size, dtype=v.properties.dtype) for k, v in metadata.state_dict_metadata.items()
               if hasattr(v, "size")}
    torch.distributed.checkpoint.load(tensors, checkpoint_id=str(folder), no_dist=True)

    def check(ours: dict, prefix: str):
        seen = set()
        for name, tensor in ours.items():
            key, layer = torch_dist_key(name)
            stored = tensors[prefix + key]
            assert torch.equal(stored if layer is None else stored[layer], tensor), name
            seen.add(prefix + key)
        return seen

    seen = check(legacy["model"], "")
    state = legacy["optimizer"]["param_state"]
    for kind in ("exp_avg", "exp_avg_sq"):
        seen |= check({name: s[kind] for name, s in state.items()}, f"optimizer.state.{kind}.")
    assert set(tensors) == seen

    common = torch.load(folder / "common.pt", weights_only=False)
    # megatron-core's FP32Optimizer without its tensors: the step all parameters share, torch's
    # groups without their parameter indices (the loading run's own).
    assert set(common["optimizer"]) == {"state", "param_groups"}
    assert common["optimizer"]["state"] == {"common_step": torch.tensor(2.0)}
    assert all("params" not in g and g["step"] == 2 for g in common["optimizer"]["param_groups"])
    assert common["iteration"] == 2 and common["checkpoint_version"] == 3.0
    assert common["args"].tensor_model_parallel_size == 2 and common["args"].ckpt_format == "torch_dist"
    assert common["opt_param_scheduler"] == legacy["opt_param_scheduler"]
    # Each (PP, TP) rank's RNG state is one of Megatron-LM's ShardedObjects, a torch.save'd list.
    info = {i.fqn: s for i, s in metadata.storage_data.items()}["rng_state/shard_0.1_1.2"]
    raw = (folder / info.relative_path).read_bytes()[info.offset:info.offset + info.length]
    # megatron-core's ShardedObject: the list of this rank's shards of it, one.
    assert set(torch.load(io.BytesIO(raw), weights_only=True)[0][0]) >= {"torch_rng_state", "rng_tracker_states"}


# --- hostile folders ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    ck = tmp_path_factory.mktemp("hostile") / "ck"
    run([PRETRAIN, *tiny(2, *NO_DROPOUT, "--save", str(ck), "--ckpt-format", "torch_dist")])
    return ck


def damaged(saved: Path, tmp_path: Path) -> tuple[Path, Path]:
    ck = tmp_path / "ck"
    subprocess.run(["cp", "-r", str(saved), str(ck)], check=True)
    return ck, ck / "iter_0000002"


def edit_metadata(folder: Path, edit) -> None:
    metadata = pickle.loads((folder / ".metadata").read_bytes())
    edit(metadata)
    (folder / ".metadata").write_bytes(pickle.dumps(metadata))


def refused(ck: Path, *wanted: str) -> str:
    proc = run([PRETRAIN, *tiny(3, *NO_DROPOUT, "--load", str(ck))], check=False)
    assert proc.returncode != 0
    line = [x for x in proc.stderr.splitlines() if "error" in x]
    assert len(line) == 1, proc.stderr[-3000:]
    for w in wanted:
        assert w in line[0], line[0]
    assert "successfully loaded" not in proc.stdout
    return line[0]


def test_a_missing_or_truncated_distcp_is_named(tmp_path, saved):
    ck, folder = damaged(saved, tmp_path)
    data = folder / "__0_0.distcp"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    refused(ck, "__0_0.distcp", "truncated")
    data.unlink()
    refused(ck, "__0_0.distcp")


def test_a_metadata_that_disagrees_is_named(tmp_path, saved):
    ck, folder = damaged(saved, tmp_path)
    key = "decoder.layers.self_attention.linear_proj.weight"
    original = (folder / ".metadata").read_bytes()

    def wider(m):
        m.state_dict_metadata[key].size = torch.Size([4, 32, 33])
    edit_metadata(folder, wider)
    refused(ck, key, "[4, 32, 33]")

    (folder / ".metadata").write_bytes(original)

    def outside(m):
        m.state_dict_metadata[key].chunks[3].offsets = torch.Size([4, 0, 0])
    edit_metadata(folder, outside)
    refused(ck, ".metadata", key, "outside its global shape")

    (folder / ".metadata").write_bytes(original)

    def missing(m):
        del m.state_dict_metadata[key]
        m.storage_data = {i: s for i, s in m.storage_data.items() if i.fqn != key}
    edit_metadata(folder, missing)
    refused(ck, key, "linear_proj.weight")

    (folder / ".metadata").write_bytes(original)

    def extra(m):  # a tensor of another model (an MoE router) that no parameter here reads
        m.state_dict_metadata["decoder.layers.mlp.router.weight"] = m.state_dict_metadata[key]
        m.storage_data.update({MetadataIndex("decoder.layers.mlp.router.weight", i.offset): s
                               for i, s in m.storage_data.items() if i.fqn == key})
    edit_metadata(folder, extra)
    refused(ck, "decoder.layers.mlp.router.weight", "no parameter for")


class RunsCode:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os
        return os.system, (f"touch {self.marker}",)


def test_a_hostile_metadata_pickle_runs_nothing(tmp_path, saved):
    ck, folder = damaged(saved, tmp_path)
    marker = tmp_path / "ran"
    (folder / ".metadata").write_bytes(pickle.dumps(RunsCode(marker)))
    refused(ck, ".metadata", "posix.system is not one a checkpoint holds")  # os.system pickles as posix.system
    assert not marker.exists()


def test_an_unknown_metadata_json_is_named(tmp_path, saved):
    ck, folder = damaged(saved, tmp_path)
    (folder / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist", "sharded_backend_version": 2,
                                                      "common_backend": "torch", "common_backend_version": 1}))
    refused(ck, "metadata.json", "sharded_backend_version 2")
