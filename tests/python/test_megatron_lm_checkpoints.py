"""Checkpoints both ways with Megatron-LM's legacy format (--ckpt-format torch).

Without Megatron-LM: our checkpoint's args are an argparse.Namespace under Megatron-LM's names and
its rng_state has Python's and numpy's states as those libraries give them seeded the way
Megatron-LM seeds them (seed + 100 x pipeline rank); a checkpoint the test writes in Megatron-LM's
layout (args with torch dtypes, enums and 40-bit integers, numpy's state as an ndarray, Transformer
Engine's fused-norm names and _extra_state, an OrderedDict with _metadata, the consumed samples in
args only, Megatron-LM's optimizer state) resumes here with --no-load-optim and converts back to
the same weights, and a resume that needs its optimizer state is one error naming the way through.

With Megatron-LM's own code (a snapshot of its repository in MEGATRON_LM_DIR; skipped without),
at TP 1 and TP 2: its load_checkpoint loads ours strictly and its GPT model gives our logits, and
what its save_checkpoint writes resumes here and gives its logits."""
from __future__ import annotations

import argparse
import collections
import enum
import io
import os
import random
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from data_helpers import free_port
from test_checkpoint import CONVERT, DUMP, PRETRAIN, our_logits, run, tiny

MEGATRON_LM = os.environ.get("MEGATRON_LM_DIR", "")
DRIVER = str(Path(__file__).with_name("megatron_lm_driver.py"))
# The model of tiny() as our parity dump and Megatron-LM's flags name it.
DUMP_MODEL = dict(layers=4, hidden=32, heads=4, vocab=250, divisible_by=8, max_seq=16, seq=16, batch=2, norm="layernorm",
            mlp="gelu", bias=1, position="learned", tied=1)
MEGATRON_SHAPE = ["--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4"]
MEGATRON_FLAGS = ["--seq-length", "16", "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "8",
                  "--lr", "2e-3", "--vocab-size", "250", "--make-vocab-size-divisible-by", "8",
                  "--hidden-dropout", "0", "--attention-dropout", "0"]
NO_DROPOUT = ["--hidden-dropout", "0", "--attention-dropout", "0"]


def rank_file(ck: Path, iteration: int, rank_dir: str = "mp_rank_00") -> Path:
    return ck / f"iter_{iteration:07d}" / rank_dir / "model_optim_rng.pt"


def test_our_checkpoint_has_megatron_lm_args_and_rng_state(tmp_path):
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), "--pipeline-model-parallel-size", "2", "--seed", "77")],
        np=2)
    for stage in (0, 1):
        main = torch.load(rank_file(tmp_path / "ck", 2, f"mp_rank_00_{stage:03d}"), weights_only=True)
        args = main["args"]
        assert isinstance(args, argparse.Namespace)
        assert (args.num_layers, args.hidden_size, args.padded_vocab_size, args.consumed_train_samples) == (4, 32, 256, 16)
        assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size) == (1, 2)
        assert args.add_position_embedding and args.add_bias_linear and not args.use_rotary_position_embeddings
        assert args.ckpt_format == "torch" and args.transformer_impl == "local"
        rng = main["rng_state"][0]
        assert list(rng) == ["random_rng_state", "np_rng_state", "torch_rng_state", "rng_tracker_states"]
        random.seed(77 + 100 * stage)
        assert rng["random_rng_state"] == random.getstate()
        state = np.random.RandomState()
        state.set_state(rng["np_rng_state"])  # as Megatron-LM's np.random.set_state takes it
        seeded = np.random.RandomState(77 + 100 * stage).get_state()
        assert np.array_equal(state.get_state()[1], seeded[1]) and state.get_state()[2:] == seeded[2:]


@pytest.fixture
def megatron_modules(monkeypatch):
    """Stand-ins for the Megatron-LM classes its checkpoints pickle (only their names are read)."""
    names = ["megatron", "megatron.core", "megatron.core.transformer", "megatron.core.transformer.enums"]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    attn_backend = enum.Enum("AttnBackend", {"flash": 1, "fused": 2, "unfused": 3, "local": 4, "auto": 5})
    attn_backend.__module__ = names[-1]
    sys.modules[names[-1]].AttnBackend = attn_backend
    return attn_backend


# Transformer Engine's layers hold the norm before a linear layer inside it.
TE_NAMES = {"input_layernorm.weight": "self_attention.linear_qkv.layer_norm_weight",
            "input_layernorm.bias": "self_attention.linear_qkv.layer_norm_bias",
            "pre_mlp_layernorm.weight": "mlp.linear_fc1.layer_norm_weight",
            "pre_mlp_layernorm.bias": "mlp.linear_fc1.layer_norm_bias"}


def megatron_lm_layout(ours: dict, attn_backend) -> dict:
    """Our checkpoint as Megatron-LM (with Transformer Engine) writes one, from its save_checkpoint."""
    args = argparse.Namespace(**vars(ours["args"]))
    args.params_dtype = torch.float32
    args.attention_backend = attn_backend.auto
    args.num_query_groups = 1  # Megatron-LM's default without --group-query-attention
    args.vocab_file = None
    args.train_samples_for_a_long_run = 220_000_000_000
    model = collections.OrderedDict()
    for name, tensor in ours["model"].items():
        for local, fused in TE_NAMES.items():
            name = name.replace(local, fused)
        model[name] = tensor
        if name.endswith("linear_fc1.weight"):
            model[name.replace("weight", "_extra_state")] = io.BytesIO(b"fp8 metadata")
    model._metadata = collections.OrderedDict({"": {"version": 1}})
    tracker_states = ours["rng_state"][0]["rng_tracker_states"]
    return {"args": args, "checkpoint_version": 3.0, "iteration": 7, "model": model,
            "optimizer": {"optimizer": {"state": {0: {"exp_avg": torch.zeros(3), "step": 7}},
                                        "param_groups": [{"params": [0], "lr": 1e-3}]},
                          "fp32_from_fp16_params": []},
            "opt_param_scheduler": dict(max_lr=2e-3, min_lr=2e-4, lr_warmup_steps=8, lr_decay_steps=96,
                                        lr_decay_style="cosine", num_steps=56),
            "rng_state": [{"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state(),
                           "torch_rng_state": torch.get_rng_state(),
                           "cuda_rng_state": torch.tensor([1234, 0]).view(torch.uint8),
                           "rng_tracker_states": tracker_states}],
            "num_floating_point_operations_so_far": 1.5e22}


def test_a_megatron_lm_checkpoint_resumes_here(tmp_path, megatron_modules):
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), *NO_DROPOUT)])
    ours = torch.load(rank_file(tmp_path / "ck", 2), weights_only=True)
    theirs = megatron_lm_layout(ours, megatron_modules)
    theirs["args"].consumed_train_samples = 56
    mlm = tmp_path / "mlm"
    rank_file(mlm, 7).parent.mkdir(parents=True)
    torch.save(theirs, rank_file(mlm, 7))
    (mlm / "latest_checkpointed_iteration.txt").write_text("7")

    refused = run([PRETRAIN, *tiny(9, "--load", str(mlm), *NO_DROPOUT)], check=False)
    assert refused.returncode != 0
    assert "holds Megatron-LM's optimizer state" in refused.stderr and "--no-load-optim" in refused.stderr

    resumed = run([PRETRAIN, *tiny(9, "--load", str(mlm), "--no-load-optim", *NO_DROPOUT)])
    assert "successfully loaded checkpoint from " + str(mlm) + " [ iter_0000007 ] at iteration 7" in resumed.stdout
    assert "iteration        8/       9 | consumed samples:           64" in resumed.stdout

    # Through our reader and back to our layout: the same weights under our names.
    run([CONVERT, "--load", str(mlm), "--save", str(tmp_path / "back")])
    back = torch.load(rank_file(tmp_path / "back", 7), weights_only=True)
    assert back["model"].keys() == ours["model"].keys()
    for name, tensor in ours["model"].items():
        assert torch.equal(back["model"][name], tensor), name
    assert back["args"].consumed_train_samples == 56


megatron_lm = pytest.mark.skipif(not Path(MEGATRON_LM, "megatron", "training", "checkpointing.py").is_file(),
                                 reason="Megatron-LM's code is not here: set MEGATRON_LM_DIR to a checkout of "
                                        "github.com/NVIDIA/Megatron-LM")


def megatron_lm_driver(mode: str, ck: Path, ids: Path, out: Path, *flags: str, tp: int = 1, pp: int = 1) -> dict:
    port = str(free_port())
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(tp * pp), "--master-port", port]
    proc = subprocess.run([*launch, DRIVER, mode, str(ck), str(ids), str(out), "--", *MEGATRON_FLAGS, *flags,
                           "--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MEGATRON_LM_DIR": MEGATRON_LM, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return torch.load(out)


@megatron_lm
@pytest.mark.parametrize("tp", [1, 2])
def test_megatron_lm_loads_our_checkpoint_with_our_logits(tmp_path, tp):
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), "--tensor-model-parallel-size", str(tp), *NO_DROPOUT)],
        np=tp)
    # Our model at TP 1 from the same weights (resharded by convert_checkpoint).
    run([CONVERT, "--load", str(tmp_path / "ck"), "--save", str(tmp_path / "tp1"), "--target-tensor-parallel-size", "1"])
    state = torch.load(rank_file(tmp_path / "tp1", 2), weights_only=True)["model"]
    dump = our_logits(state, tmp_path, **DUMP_MODEL)
    torch.save(dump["input_ids"], tmp_path / "ids.pt")
    # Its loader checks the shape against its flags (check_checkpoint_args), or takes it from ours
    # (--use-checkpoint-args), and loads strictly;
    # the Adam moments and the CPU generators of a CPU run are not what it restores.
    for shape in (MEGATRON_SHAPE, ["--use-checkpoint-args"]):  # its load_args_from_checkpoint reads ours
        theirs = megatron_lm_driver("load", tmp_path / "ck", tmp_path / "ids.pt", tmp_path / "theirs.pt", *shape,
                                    "--train-iters", "4", "--no-load-optim", "--no-load-rng", tp=tp)
        assert theirs["iteration"] == 2 and theirs["consumed_train_samples"] == 16
        assert theirs["logits"].shape == dump["logits"].shape
        assert (theirs["logits"] - dump["logits"]).abs().max().item() <= 1e-5


@megatron_lm
@pytest.mark.parametrize("tp", [1, 2])
def test_a_checkpoint_megatron_lm_saves_resumes_here_with_its_logits(tmp_path, tp):
    # The parity dump's inputs (its weights here are its own).
    run([DUMP, "--out", str(tmp_path / "ids_dump.pt"),
         *[a for k, v in DUMP_MODEL.items() for a in ("--" + k.replace("_", "-"), str(v))]])
    ids = torch.load(tmp_path / "ids_dump.pt")["input_ids"]
    torch.save(ids, tmp_path / "ids.pt")
    theirs = megatron_lm_driver("save", tmp_path / "mlm", tmp_path / "ids.pt", tmp_path / "theirs.pt",
                                *MEGATRON_SHAPE, "--train-iters", "5", "--save-interval", "5", "--no-save-optim", tp=tp)
    resumed = run([PRETRAIN, *tiny(6, "--load", str(tmp_path / "mlm"), "--no-load-optim",
                                   "--tensor-model-parallel-size", str(tp), *NO_DROPOUT)], np=tp)
    assert "[ iter_0000005 ] at iteration 5" in resumed.stdout
    assert "iteration        6/       6 | consumed samples:           48" in resumed.stdout
    run([CONVERT, "--load", str(tmp_path / "mlm"), "--save", str(tmp_path / "back"), "--target-tensor-parallel-size", "1"])
    state = torch.load(rank_file(tmp_path / "back", 5), weights_only=True)["model"]
    dump = our_logits(state, tmp_path, **DUMP_MODEL)
    assert torch.equal(dump["input_ids"], ids)
    assert (theirs["logits"] - dump["logits"]).abs().max().item() <= 1e-5


@megatron_lm
def test_pipeline_stages_go_both_ways(tmp_path):
    """PP 2: Megatron-LM's stages load ours strictly, and its stages' weights are what ours read from
    its checkpoint, layer numbers and all (a stage's forward needs its schedule, so no logits)."""
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), "--pipeline-model-parallel-size", "2", *NO_DROPOUT)],
        np=2)
    torch.save(torch.zeros(2, 16, dtype=torch.long), tmp_path / "ids.pt")
    theirs = megatron_lm_driver("load", tmp_path / "ck", tmp_path / "ids.pt", tmp_path / "theirs.pt",
                                *MEGATRON_SHAPE, "--train-iters", "4", "--no-load-optim", "--no-load-rng", pp=2)
    assert theirs["iteration"] == 2 and theirs["consumed_train_samples"] == 16
    ours = {}
    for stage in (0, 1):
        ours.update({(stage, k): v for k, v in torch.load(rank_file(tmp_path / "ck", 2, f"mp_rank_00_{stage:03d}"),
                                                          weights_only=True)["model"].items()})
    for stage in (0, 1):
        for name, tensor in torch.load(tmp_path / f"theirs.pt.rank{stage}").items():
            assert torch.equal(tensor, ours[stage, name]), (stage, name)

    megatron_lm_driver("save", tmp_path / "mlm", tmp_path / "ids.pt", tmp_path / "saved.pt", *MEGATRON_SHAPE,
                       "--train-iters", "5", "--save-interval", "5", "--no-save-optim", pp=2)
    resumed = run([PRETRAIN, *tiny(6, "--load", str(tmp_path / "mlm"), "--no-load-optim",
                                   "--pipeline-model-parallel-size", "2", *NO_DROPOUT)], np=2)
    assert "[ iter_0000005 ] at iteration 5" in resumed.stdout
    run([CONVERT, "--load", str(tmp_path / "mlm"), "--save", str(tmp_path / "pp1"),
         "--target-pipeline-model-parallel-size", "1"])
    merged = torch.load(rank_file(tmp_path / "pp1", 5), weights_only=True)["model"]
    for stage in (0, 1):
        for name, tensor in torch.load(tmp_path / f"saved.pt.rank{stage}").items():
            if stage == 1 and name.startswith("decoder.layers."):  # its stage 1 numbers its layers from 0
                index, rest = name[len("decoder.layers."):].split(".", 1)
                name = f"decoder.layers.{int(index) + 2}.{rest}"
            if stage == 1 and name == "output_layer.weight":  # tied: the embedding, kept once
                name = "embedding.word_embeddings.weight"
            assert torch.equal(merged[name], tensor), (stage, name)
