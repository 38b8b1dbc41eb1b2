"""Checkpoints both ways with Megatron-LM's legacy format (--ckpt-format torch).

Without Megatron-LM: our checkpoint's args are an argparse.Namespace under Megatron-LM's names and
its rng_state has Python's and numpy's states as those libraries give them seeded the way
Megatron-LM seeds them (seed + 100 x pipeline rank); a checkpoint the test writes in Megatron-LM's
layout (args with torch dtypes, enums and 40-bit integers, numpy's state as an ndarray, Transformer
Engine's fused-norm names and _extra_state, an OrderedDict with _metadata, the consumed samples in
args only, Megatron-LM's optimizer state in torch's, FusedAdam's and the bf16 optimizer's layouts)
resumes here with its Adam moments on the parameters they belong to (or without, --no-load-optim)
and converts back to the same weights and moments; its distributed optimizer's state is one error
naming the way through. Our own optimizer state is also in Megatron-LM's layout, which torch's
AdamW over its parameter groups loads, each parameter's state at its index.

With Megatron-LM's own code (a snapshot of its repository in MEGATRON_LM_DIR; skipped without),
at TP 1 and TP 2: its load_checkpoint loads ours strictly and its GPT model gives our logits, and
what its save_checkpoint writes resumes here and gives its logits; its optimizer state (its own
parameter groups under torch's AdamW) resumes here, each parameter's moments where they belong, and
ours resumes there through its FP32Optimizer; its tools/checkpoint/convert.py reads ours, and what
its saver writes resumes here. The same both ways with --ckpt-format torch_dist (the model and RNG;
its optimizer state under its own torch_dist keys is not read yet)."""
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
CONVERT_DRIVER = str(Path(__file__).with_name("megatron_lm_convert.py"))
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


# Megatron-LM's GPTModel registers its parameters in this order (Transformer Engine's layers); its
# state_dict() and named_parameters() both follow it.
MCORE_LAYER_ORDER = ["self_attention.linear_proj.weight", "self_attention.linear_proj.bias",
                     "self_attention.linear_qkv.layer_norm_weight", "self_attention.linear_qkv.layer_norm_bias",
                     "self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias",
                     "mlp.linear_fc1.layer_norm_weight", "mlp.linear_fc1.layer_norm_bias", "mlp.linear_fc1.weight",
                     "mlp.linear_fc1.bias", "mlp.linear_fc2.weight", "mlp.linear_fc2.bias"]


def mcore_position(name: str) -> tuple:
    if name.startswith("embedding."):
        return 0, 0, ["embedding.word_embeddings.weight", "embedding.position_embeddings.weight"].index(name)
    if name.startswith("decoder.layers."):
        index, rest = name[len("decoder.layers."):].split(".", 1)
        return 1, int(index), MCORE_LAYER_ORDER.index(rest)
    if name.startswith("decoder.final_layernorm."):
        return 2, 0, ["weight", "bias"].index(name.rsplit(".", 1)[1])
    return 3, 0, 0  # output_layer.weight


def megatron_adam_state(model: dict, fused: bool = False) -> tuple[dict, dict]:
    """Megatron-LM's optimizer.state_dict() (non-distributed, fp32 parameters) for this model
    dict: torch's layout over its two standard groups, weight decay then none (biases and 1-D
    parameters), each in named_parameters() order. torch's AdamW keeps a step per parameter;
    Transformer Engine's and apex's FusedAdam (fused) one per group. Also the state by our names."""
    names = [n for n in model if not n.endswith("_extra_state")]
    no_decay = [n for n in names if n.endswith(".bias") or model[n].dim() == 1]
    generator = torch.Generator().manual_seed(5)
    state, groups, by_name = {}, [], {}
    for members, wd_mult in (([n for n in names if n not in no_decay], 1.0), (no_decay, 0.0)):
        indices = []
        for n in members:
            s = {"exp_avg": torch.randn(model[n].shape, generator=generator),
                 "exp_avg_sq": torch.rand(model[n].shape, generator=generator)}
            if not fused:
                s = {"step": torch.tensor(7.0), **s}
            indices.append(len(state))
            state[len(state)] = s
            ours = n
            for plain, fused_name in TE_NAMES.items():
                ours = ours.replace(fused_name, plain)
            by_name[ours] = s
        group = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01 * wd_mult,
                 "is_expert_parallel": False, "default_config": True, "wd_mult": wd_mult, "lr_mult": 1.0,
                 "is_decoupled_lr": False, "max_lr": 2e-3, "min_lr": 2e-4}
        groups.append({**group, **({"step": 7} if fused else {}), "params": indices})
    torch_state = {"state": state, "param_groups": groups}
    if model[names[0]].dtype == torch.float32:
        return torch_state, by_name
    # Float16OptimizerWithFloat16Params: torch's state of the fp32 master copies, which it keeps
    # beside it group by group.
    masters = []
    for group in groups:
        masters.append([])
        for index in group["params"]:
            name = next(n for n, s in by_name.items() if s is state[index])
            by_name[name]["main_param"] = torch.randn(state[index]["exp_avg"].shape, generator=generator)
            masters[-1].append(by_name[name]["main_param"])
    return {"optimizer": torch_state, "fp32_from_fp16_params": masters}, by_name


def megatron_lm_layout(ours: dict, attn_backend, fused_adam: bool = False) -> tuple[dict, dict]:
    """Our checkpoint as Megatron-LM (with Transformer Engine) writes one, from its save_checkpoint,
    and its optimizer state by our names."""
    args = argparse.Namespace(**vars(ours["args"]))
    args.params_dtype = torch.float32
    args.attention_backend = attn_backend.auto
    args.num_query_groups = 1  # Megatron-LM's default without --group-query-attention
    args.vocab_file = None
    args.train_samples_for_a_long_run = 220_000_000_000
    renamed = {}
    for name, tensor in ours["model"].items():
        for local, fused in TE_NAMES.items():
            name = name.replace(local, fused)
        renamed[name] = tensor
    model = collections.OrderedDict()
    for name in sorted(renamed, key=mcore_position):
        model[name] = renamed[name]
        if name.endswith("linear_fc1.weight"):
            model[name.replace("weight", "_extra_state")] = io.BytesIO(b"fp8 metadata")
    model._metadata = collections.OrderedDict({"": {"version": 1}})
    optimizer, by_name = megatron_adam_state(model, fused_adam)
    tracker_states = ours["rng_state"][0]["rng_tracker_states"]
    return {"args": args, "checkpoint_version": 3.0, "iteration": 7, "model": model, "optimizer": optimizer,
            "opt_param_scheduler": dict(max_lr=2e-3, min_lr=2e-4, lr_warmup_steps=8.0, lr_decay_steps=96,
                                        lr_decay_style="cosine", num_steps=56, start_wd=0.01, end_wd=0.01,
                                        wd_incr_style="constant", wd_incr_steps=96),
            "rng_state": [{"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state(),
                           "torch_rng_state": torch.get_rng_state(),
                           "cuda_rng_state": torch.tensor([1234, 0]).view(torch.uint8),
                           "rng_tracker_states": tracker_states}],
            "num_floating_point_operations_so_far": 1.5e22}, by_name


def write_megatron_lm(ck: Path, state: dict, iteration: int = 7) -> None:
    rank_file(ck, iteration).parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, rank_file(ck, iteration))
    (ck / "latest_checkpointed_iteration.txt").write_text(str(iteration))


def assert_moments_carried(ck: Path, expected: dict, iteration: int, step: int) -> None:
    """Our checkpoint's optimizer state (param_state by name) holds the expected moments and step."""
    saved = torch.load(rank_file(ck, iteration), weights_only=True)["optimizer"]["param_state"]
    assert saved.keys() == expected.keys()
    for name, s in expected.items():
        assert float(saved[name]["step"]) == step, name
        for key in ("exp_avg", "exp_avg_sq", "main_param"):
            if key in s:
                assert torch.equal(saved[name][key].reshape(s[key].shape), s[key]), (name, key)


def test_a_megatron_lm_checkpoint_resumes_here(tmp_path, megatron_modules):
    """Its Adam moments (torch's AdamW layout, and FusedAdam's; bf16 with its fp32 master copies)
    map onto our parameters by its group order and named_parameters() order; its distributed
    optimizer's is one error naming the way through."""
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), *NO_DROPOUT)])
    ours = torch.load(rank_file(tmp_path / "ck", 2), weights_only=True)
    theirs, moments = megatron_lm_layout(ours, megatron_modules)
    theirs["args"].consumed_train_samples = 56
    mlm = tmp_path / "mlm"
    write_megatron_lm(mlm, theirs)

    resumed = run([PRETRAIN, *tiny(9, "--load", str(mlm), *NO_DROPOUT)])
    assert "successfully loaded checkpoint from " + str(mlm) + " [ iter_0000007 ] at iteration 7" in resumed.stdout
    assert "iteration        8/       9 | consumed samples:           64" in resumed.stdout
    assert "iteration        8/       9 | consumed samples:           64" in run(
        [PRETRAIN, *tiny(9, "--load", str(mlm), "--no-load-optim", *NO_DROPOUT)]).stdout

    # Through our reader and back to our layout: the same weights under our names, and its moments.
    run([CONVERT, "--load", str(mlm), "--save", str(tmp_path / "back")])
    back = torch.load(rank_file(tmp_path / "back", 7), weights_only=True)
    assert back["model"].keys() == ours["model"].keys()
    for name, tensor in ours["model"].items():
        assert torch.equal(back["model"][name], tensor), name
    assert back["args"].consumed_train_samples == 56
    assert_moments_carried(tmp_path / "back", moments, 7, 7)

    fused, moments = megatron_lm_layout(ours, megatron_modules, fused_adam=True)
    write_megatron_lm(tmp_path / "fused", fused)
    run([CONVERT, "--load", str(tmp_path / "fused"), "--save", str(tmp_path / "fused_back")])
    assert_moments_carried(tmp_path / "fused_back", moments, 7, 7)

    # bf16: the fp32 master copies come from fp32_from_fp16_params.
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "bf16"), "--bf16", *NO_DROPOUT)])
    half, moments = megatron_lm_layout(torch.load(rank_file(tmp_path / "bf16", 2), weights_only=True),
                                       megatron_modules)
    assert all("main_param" in s for s in moments.values())
    write_megatron_lm(tmp_path / "mlm_bf16", half)
    run([PRETRAIN, *tiny(8, "--load", str(tmp_path / "mlm_bf16"), "--bf16", *NO_DROPOUT)])
    run([CONVERT, "--load", str(tmp_path / "mlm_bf16"), "--save", str(tmp_path / "bf16_back")])
    assert_moments_carried(tmp_path / "bf16_back", moments, 7, 7)

    # Megatron-LM's distributed optimizer keeps only the groups here, the state in distrib_optim.pt
    # beside it: refused, with the way through, while that file is missing.
    theirs["optimizer"] = {"optimizer": {"param_groups": [{k: v for k, v in g.items() if k != "params"}
                                                          for g in theirs["optimizer"]["param_groups"]]}}
    write_megatron_lm(tmp_path / "distopt", theirs)
    refused = run([PRETRAIN, *tiny(9, "--load", str(tmp_path / "distopt"), *NO_DROPOUT)], check=False)
    assert refused.returncode != 0 and "Megatron-LM's distributed optimizer" in refused.stderr
    assert "distrib_optim.pt" in refused.stderr and "--no-load-optim" in refused.stderr
    converted = run([CONVERT, "--load", str(tmp_path / "distopt"), "--save", str(tmp_path / "distopt_back")])
    assert "no optimizer state" in converted.stdout and "distributed optimizer" in converted.stdout


def distrib_optim_offsets(model: dict, bucket_size: int | None) -> tuple[dict, int]:
    """Where Megatron-LM's distrib_optim.pt keeps each parameter of a one-chunk model dict: its
    buffer holds them in reverse order, each starting on a multiple of 64 elements of its bucket, a
    bucket closing once it holds bucket_size elements; the padding after a bucket is not saved."""
    offsets, saved, local, end, open_ = {}, 0, 0, 0, False
    for name in reversed([n for n in model if not n.endswith("_extra_state")]):
        local = -(-local // 64) * 64
        offsets[name] = saved + local
        end, open_ = local + model[name].numel(), True
        if bucket_size is not None and end >= bucket_size:
            saved, local, open_ = saved + end, 0, False
        else:
            local = end
    return offsets, saved + (end if open_ else 0)


@pytest.mark.parametrize("bf16", [False, True])
def test_a_megatron_lm_distributed_optimizer_checkpoint_resumes_here(tmp_path, megatron_modules, bf16):
    """Its distributed optimizer's state (distrib_optim.pt: flat fp32 tensors per gradient buffer in
    its bucket layout, here buckets of --ddp-bucket-size 100, some ending off a multiple of 64
    elements, where the padding after them is cut) resumes here, each
    parameter's moments, step and (bf16) fp32 main copy on the parameter of the same name."""
    precision = ["--bf16"] if bf16 else []
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), *precision, *NO_DROPOUT)])
    theirs, by_name = megatron_lm_layout(torch.load(rank_file(tmp_path / "ck", 2), weights_only=True),
                                         megatron_modules)
    theirs["args"].consumed_train_samples = 56
    theirs["args"].overlap_grad_reduce, theirs["args"].ddp_bucket_size = True, 100
    groups = theirs["optimizer"]["optimizer"]["param_groups"] if bf16 else theirs["optimizer"]["param_groups"]
    theirs["optimizer"] = {"optimizer": {"param_groups": [{**{k: v for k, v in g.items() if k != "params"},
                                                           "step": 7.0} for g in groups]}}
    offsets, numel = distrib_optim_offsets(theirs["model"], 100)
    assert numel != distrib_optim_offsets(theirs["model"], 2000)[1]  # the refused layout below
    generator = torch.Generator().manual_seed(9)
    flat = {"param": torch.randn(numel, generator=generator) * 0.02, "exp_avg": torch.randn(numel, generator=generator),
            "exp_avg_sq": torch.rand(numel, generator=generator)}
    for name, offset in offsets.items():
        ours = name
        for plain, fused in TE_NAMES.items():
            ours = ours.replace(fused, plain)
        size = theirs["model"][name].numel()
        expected = {key: flat[key][offset:offset + size].view(theirs["model"][name].shape)
                    for key in ("exp_avg", "exp_avg_sq")}
        if bf16:
            expected["main_param"] = flat["param"][offset:offset + size].view(theirs["model"][name].shape)
        by_name[ours] = expected
    dtypes = (torch.bfloat16, torch.float32) if bf16 else (torch.float32, torch.float32)
    write_megatron_lm(tmp_path / "mlm", theirs)
    torch.save({"buckets_coalesced": True, 0: {dtypes: {**flat, "numel_unpadded": numel}}},
               rank_file(tmp_path / "mlm", 7).with_name("distrib_optim.pt"))

    resumed = run([PRETRAIN, *tiny(9, "--load", str(tmp_path / "mlm"), *precision, *NO_DROPOUT)])
    assert "[ iter_0000007 ] at iteration 7" in resumed.stdout
    run([CONVERT, "--load", str(tmp_path / "mlm"), "--save", str(tmp_path / "back")])
    assert_moments_carried(tmp_path / "back", by_name, 7, 7)

    # A bucket size other than the one it was written with lays the parameters out elsewhere.
    theirs["args"].ddp_bucket_size = 2000
    write_megatron_lm(tmp_path / "mlm", theirs)
    refused = run([PRETRAIN, *tiny(9, "--load", str(tmp_path / "mlm"), *precision, *NO_DROPOUT)], check=False)
    assert refused.returncode != 0 and "distrib_optim.pt: buffer 0 holds" in refused.stderr


# The same with our local layers, whose norms are modules of their own ahead of the attention and MLP.
LOCAL_LAYER_ORDER = ["input_layernorm.weight", "input_layernorm.bias", "self_attention.linear_proj.weight",
                     "self_attention.linear_proj.bias", "self_attention.linear_qkv.weight",
                     "self_attention.linear_qkv.bias", "pre_mlp_layernorm.weight", "pre_mlp_layernorm.bias",
                     "mlp.linear_fc1.weight", "mlp.linear_fc1.bias", "mlp.linear_fc2.weight", "mlp.linear_fc2.bias"]


def local_position(name: str) -> tuple:
    if name.startswith("decoder.layers."):
        index, rest = name[len("decoder.layers."):].split(".", 1)
        return 1, int(index), LOCAL_LAYER_ORDER.index(rest)
    return mcore_position(name)


def megatron_groups(model: dict, decoupled: bool) -> list[list[str]]:
    """Megatron-LM's standard parameter groups of a model dict, each in its order: weight decay;
    with --decoupled-lr the word embedding and output layer; no weight decay (biases, 1-D)."""
    names = sorted(model, key=local_position)
    no_decay = [n for n in names if n.endswith(".bias") or model[n].dim() == 1]
    embedding_or_output = [n for n in names if decoupled and n in ("embedding.word_embeddings.weight",
                                                                   "output_layer.weight")]
    decay = [n for n in names if n not in no_decay and n not in embedding_or_output]
    return [decay, *([embedding_or_output] if decoupled else []), no_decay]


def assert_megatron_lm_layout(main: dict, decoupled: bool = False) -> list[torch.nn.Parameter]:
    """The optimizer entry holds Megatron-LM's layout beside ours: torch's AdamW, built over its
    groups, loads it and finds each parameter's moments, step and (16-bit) master copy under the
    index of that parameter, the same tensors as our state by name; then it steps."""
    opt = main["optimizer"]
    ours = opt["param_state"]
    half = next(iter(main["model"].values())).dtype != torch.float32
    torch_state = opt["optimizer"] if half else opt
    groups = megatron_groups(main["model"], decoupled)
    params = [[torch.nn.Parameter(main["model"][n].float().clone()) for n in g] for g in groups]
    adam = torch.optim.AdamW([{"params": p} for p in params])
    adam.load_state_dict(torch_state)
    for names, group, saved in zip(groups, params, torch_state["param_groups"]):
        assert saved["wd_mult"] == (0.0 if names and names[0] in groups[-1] else 1.0)
        for name, p in zip(names, group):
            state = adam.state[p]
            assert float(state["step"]) == float(ours[name]["step"]), name
            for key in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(state[key], ours[name][key]), (name, key)
    if half:
        for names, masters in zip(groups, opt["fp32_from_fp16_params"]):
            assert len(masters) == len(names)
            for name, master in zip(names, masters):
                assert master.untyped_storage().data_ptr() == ours[name]["main_param"].untyped_storage().data_ptr()
                assert torch.equal(master, ours[name]["main_param"]), name
    for p in (p for g in params for p in g):
        p.grad = torch.ones_like(p)
    adam.step()
    return [p for g in params for p in g]


def test_our_optimizer_state_is_also_in_megatron_lm_layout(tmp_path):
    """Beside our state by name, the optimizer entry is what Megatron-LM's non-distributed
    optimizers save (torch's state_dict() over its groups, nested with the fp32 master copies
    for bf16/fp16), the model dict in its registration order, the moments stored once."""
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "pp"), "--pipeline-model-parallel-size", "2",
                         "--decoupled-lr", "1e-3", *NO_DROPOUT)], np=2)
    for stage in (0, 1):
        main = torch.load(rank_file(tmp_path / "pp", 2, f"mp_rank_00_{stage:03d}"), weights_only=True)
        assert list(main["model"]) == sorted(main["model"], key=local_position)
        assert_megatron_lm_layout(main, decoupled=True)
        decoupled = main["optimizer"]["param_groups"][1]
        assert (decoupled["max_lr"], decoupled["default_config"]) == (1e-3, False)
        assert main["optimizer"]["param_groups"][0]["max_lr"] == 2e-3
        assert [len(g["params"]) for g in main["optimizer"]["param_groups"]] == \
            [len(g) for g in megatron_groups(main["model"], True)]
        assert all(s["exp_avg"].untyped_storage().data_ptr() ==
                   main["optimizer"]["param_state"][n]["exp_avg"].untyped_storage().data_ptr()
                   for n, s in zip(sum(megatron_groups(main["model"], True), []),
                                   main["optimizer"]["state"].values()))

    # The distributed optimizer's state stays in its distrib_optim.pt; convert_checkpoint gathers it
    # into the plain layout, Megatron-LM's included.
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "dist"), "--use-distributed-optimizer", *NO_DROPOUT)], np=2)
    assert set(torch.load(rank_file(tmp_path / "dist", 2), weights_only=True)["optimizer"]) == {"distributed"}
    run([CONVERT, "--load", str(tmp_path / "dist"), "--save", str(tmp_path / "plain")])
    assert_megatron_lm_layout(torch.load(rank_file(tmp_path / "plain", 2), weights_only=True))

    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "bf16"), "--bf16", *NO_DROPOUT)])
    main = torch.load(rank_file(tmp_path / "bf16", 2), weights_only=True)
    assert set(main["optimizer"]) == {"distributed", "param_state", "optimizer", "fp32_from_fp16_params"}
    assert_megatron_lm_layout(main)

    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "fp16"), "--fp16", *NO_DROPOUT)])
    main = torch.load(rank_file(tmp_path / "fp16", 2), weights_only=True)
    scaler = main["optimizer"]["grad_scaler"]  # as its DynamicGradScaler.state_dict() gives it
    assert scaler["scale"].shape == (1,) and scaler["scale"].dtype == torch.float32
    assert isinstance(scaler["growth_tracker"], int) and isinstance(scaler["hysteresis_tracker"], int)
    assert_megatron_lm_layout(main)
    # Our own reader takes the scale back from it: the resumed iteration 3 moves it as the
    # uninterrupted run does (both overflow and halve it).
    def third_scale(*flags: str) -> str:
        out = run([PRETRAIN, *tiny(3, "--fp16", *flags, *NO_DROPOUT)]).stdout
        return next(line for line in out.splitlines() if "iteration        3/" in line).split("loss scale:")[1].split("|")[0]
    assert third_scale("--load", str(tmp_path / "fp16")) == third_scale()


megatron_lm = pytest.mark.skipif(not Path(MEGATRON_LM, "megatron", "training", "checkpointing.py").is_file(),
                                 reason="Megatron-LM's code is not here: set MEGATRON_LM_DIR to a checkout of "
                                        "github.com/NVIDIA/Megatron-LM")


def megatron_lm_driver(mode: str, ck: Path, ids: Path, out: Path, *flags: str, tp: int = 1, pp: int = 1,
                       dp: int = 1) -> dict:
    port = str(free_port())
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(tp * pp * dp), "--master-port",
              port]
    proc = subprocess.run([*launch, DRIVER, mode, str(ck), str(ids), str(out), "--", *MEGATRON_FLAGS, *flags,
                           "--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MEGATRON_LM_DIR": MEGATRON_LM, "OMP_NUM_THREADS": "1",
                               "TMPDIR": str(out.parent)})  # torchrun's folders go with the test's
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
@pytest.mark.parametrize("tp", [1, 2])
def test_megatron_lm_loads_our_torch_dist_checkpoint_with_our_logits(tmp_path, tp):
    """Its load_checkpoint of --ckpt-format torch_dist (strict), from our torch_dist save of a run
    whose twin saved the legacy format: our logits."""
    for name, fmt in (("dist", "torch_dist"), ("ck", "torch")):
        run([PRETRAIN, *tiny(2, "--save", str(tmp_path / name), "--ckpt-format", fmt, "--tensor-model-parallel-size",
                             str(tp), *NO_DROPOUT)], np=tp)
    run([CONVERT, "--load", str(tmp_path / "ck"), "--save", str(tmp_path / "tp1"), "--target-tensor-parallel-size", "1"])
    dump = our_logits(torch.load(rank_file(tmp_path / "tp1", 2), weights_only=True)["model"], tmp_path, **DUMP_MODEL)
    torch.save(dump["input_ids"], tmp_path / "ids.pt")
    theirs = megatron_lm_driver("load", tmp_path / "dist", tmp_path / "ids.pt", tmp_path / "theirs.pt", *MEGATRON_SHAPE,
                                "--train-iters", "4", "--no-load-optim", "--no-load-rng", "--ckpt-format", "torch_dist",
                                tp=tp)
    assert theirs["iteration"] == 2 and theirs["consumed_train_samples"] == 16
    assert (theirs["logits"] - dump["logits"]).abs().max().item() <= 1e-5


@megatron_lm
@pytest.mark.parametrize("tp", [1, 2])
def test_a_torch_dist_checkpoint_megatron_lm_saves_resumes_here_with_its_logits(tmp_path, tp):
    """What its save_checkpoint writes with --ckpt-format torch_dist (its common state among the
    sharded objects, no common.pt): resumes here, RNG included at its TP size, and gives its logits."""
    run([DUMP, "--out", str(tmp_path / "ids_dump.pt"),
         *[a for k, v in DUMP_MODEL.items() for a in ("--" + k.replace("_", "-"), str(v))]])
    ids = torch.load(tmp_path / "ids_dump.pt")["input_ids"]
    torch.save(ids, tmp_path / "ids.pt")
    theirs = megatron_lm_driver("save", tmp_path / "mlm", tmp_path / "ids.pt", tmp_path / "theirs.pt",
                                *MEGATRON_SHAPE, "--train-iters", "5", "--save-interval", "5", "--no-save-optim",
                                "--ckpt-format", "torch_dist", tp=tp)
    resumed = run([PRETRAIN, *tiny(6, "--load", str(tmp_path / "mlm"), "--no-load-optim",
                                   "--tensor-model-parallel-size", str(tp), *NO_DROPOUT)], np=tp)
    assert "[ iter_0000005 ] at iteration 5" in resumed.stdout and "has no RNG state" not in resumed.stdout
    assert "iteration        6/       6 | consumed samples:           48" in resumed.stdout
    run([CONVERT, "--load", str(tmp_path / "mlm"), "--save", str(tmp_path / "back")])
    dump = our_logits(torch.load(rank_file(tmp_path / "back", 5), weights_only=True)["model"], tmp_path, **DUMP_MODEL)
    assert torch.equal(dump["input_ids"], ids)
    assert (theirs["logits"] - dump["logits"]).abs().max().item() <= 1e-5


@megatron_lm
@pytest.mark.parametrize("fmt", ["torch", "torch_dist"])
def test_megatron_lm_optimizer_state_resumes_here(tmp_path, fmt):
    """Its optimizer state, from its own parameter groups under torch's AdamW after two steps,
    resumes here and carries each parameter's moments to the parameter of the same name."""
    torch.save(torch.zeros(2, 16, dtype=torch.long), tmp_path / "ids.pt")
    theirs = megatron_lm_driver("save-optim", tmp_path / "mlm", tmp_path / "ids.pt", tmp_path / "theirs.pt",
                                *MEGATRON_SHAPE, "--train-iters", "5", "--save-interval", "5", "--min-lr", "2e-4",
                                "--ckpt-format", fmt)
    # Its driver's schedule is not this run's: kept as this run's, as Megatron-LM would need too.
    resumed = run([PRETRAIN, *tiny(6, "--load", str(tmp_path / "mlm"), "--override-opt_param-scheduler", *NO_DROPOUT)])
    assert "[ iter_0000005 ] at iteration 5" in resumed.stdout
    run([CONVERT, "--load", str(tmp_path / "mlm"), "--save", str(tmp_path / "back")])
    assert_moments_carried(tmp_path / "back", theirs["optimizer_state"], 5, 2)


# Its torch_dist layouts of the distributed optimizer: the model-space one (its gather over gloo on
# a CPU run); its default bucket layout is refused below.
TORCH_DIST_FULLY_RESHARDABLE = ["--ckpt-format", "torch_dist", "--dist-ckpt-optim-fully-reshardable",
                                "--distrib-optim-fully-reshardable-mem-efficient"]


@megatron_lm
@pytest.mark.parametrize("bf16, fmt", [(False, "torch"), (True, "torch"), (False, "torch_dist"), (True, "torch_dist")])
def test_megatron_lm_distributed_optimizer_state_resumes_here(tmp_path, bf16, fmt):
    """Its distributed optimizer (its own DDP buffers and DistributedOptimizer at DP 2, buckets of
    --ddp-bucket-size 100, two AdamW steps) saves distrib_optim.pt, or torch_dist's model-space
    layout; ours resumes it, and every parameter's moments, step and (bf16) fp32 main copy arrive
    under its name as its optimizer held them."""
    torch.save(torch.zeros(2, 16, dtype=torch.long), tmp_path / "ids.pt")
    precision = ["--bf16"] if bf16 else []
    layout = TORCH_DIST_FULLY_RESHARDABLE if fmt == "torch_dist" else []
    theirs = megatron_lm_driver("save-distopt", tmp_path / "mlm", tmp_path / "ids.pt", tmp_path / "theirs.pt",
                                *MEGATRON_SHAPE, "--train-iters", "5", "--save-interval", "5", "--min-lr", "2e-4",
                                "--overlap-grad-reduce", "--ddp-bucket-size", "100", *precision, *layout, dp=2)
    resumed = run([PRETRAIN, *tiny(6, "--load", str(tmp_path / "mlm"), "--override-opt_param-scheduler", *precision,
                              *NO_DROPOUT)])
    assert "[ iter_0000005 ] at iteration 5" in resumed.stdout
    run([CONVERT, "--load", str(tmp_path / "mlm"), "--save", str(tmp_path / "back")])
    expected = {name: {"step": s["step"], "exp_avg": s["exp_avg"], "exp_avg_sq": s["exp_avg_sq"],
                       **({"main_param": s["param"]} if bf16 else {})}
                for name, s in theirs["optimizer_state"].items()}
    assert_moments_carried(tmp_path / "back", expected, 5, 2)


@megatron_lm
@pytest.mark.parametrize("bf16", [False, True])
def test_megatron_lm_distributed_optimizer_bucket_layout_resumes_as_its_model_space_one(tmp_path, bf16):
    """Its distributed optimizer's default torch_dist layout (dp_reshardable: its buckets' flat
    state) and its model-space one, saved from the same steps, resume here to the same losses; at
    another TP size the bucket layout is one error naming the way through."""
    torch.save(torch.zeros(2, 16, dtype=torch.long), tmp_path / "ids.pt")
    precision = ["--bf16"] if bf16 else []
    out = {}
    for name, layout in (("buckets", ["--ckpt-format", "torch_dist"]), ("model_space", TORCH_DIST_FULLY_RESHARDABLE)):
        megatron_lm_driver("save-distopt", tmp_path / name, tmp_path / "ids.pt", tmp_path / "theirs.pt",
                           *MEGATRON_SHAPE, "--train-iters", "5", "--save-interval", "5", "--min-lr", "2e-4",
                           "--overlap-grad-reduce", "--ddp-bucket-size", "100", *precision, *layout, dp=2)
        out[name] = run([PRETRAIN, *tiny(7, "--load", str(tmp_path / name), "--override-opt_param-scheduler",
                                         *precision, *NO_DROPOUT)]).stdout
    assert "[ iter_0000005 ] at iteration 5" in out["buckets"]
    assert [lm_loss(out["buckets"], i) for i in (6, 7)] == [lm_loss(out["model_space"], i) for i in (6, 7)]
    refused = run([PRETRAIN, *tiny(7, "--load", str(tmp_path / "buckets"), "--tensor-model-parallel-size", "2",
                                   *precision, *NO_DROPOUT)], np=2, check=False)
    assert refused.returncode != 0 and "'dp_reshardable' layout, saved at TP 1" in refused.stderr


@megatron_lm
@pytest.mark.parametrize("fmt", ["torch", "torch_dist"])
def test_megatron_lm_resumes_our_optimizer_state(tmp_path, fmt):
    """Its load_checkpoint, with its FP32Optimizer over its own groups under torch's AdamW and no
    --no-load-optim, takes our optimizer state: each parameter's moments and step by name, its
    groups matched by their keys (--decoupled-lr's too), the schedule where ours left it."""
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), "--decoupled-lr", "1e-3", *NO_DROPOUT)])
    ours = torch.load(rank_file(tmp_path / "ck", 2), weights_only=True)["optimizer"]
    if fmt == "torch_dist":  # the same run's twin, in that format
        run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "dist"), "--decoupled-lr", "1e-3", "--ckpt-format",
                             "torch_dist", *NO_DROPOUT)])
    torch.save(torch.zeros(2, 16, dtype=torch.long), tmp_path / "ids.pt")
    theirs = megatron_lm_driver("load-optim", tmp_path / ("dist" if fmt == "torch_dist" else "ck"),
                                tmp_path / "ids.pt", tmp_path / "theirs.pt",
                                *MEGATRON_SHAPE, "--train-iters", "4", "--min-lr", "2e-4", "--decoupled-lr", "1e-3",
                                "--no-load-rng", "--ckpt-format", fmt)
    assert theirs["iteration"] == 2 and theirs["scheduler_steps"] == 16
    assert theirs["optimizer_state"].keys() == ours["param_state"].keys()
    for name, state in theirs["optimizer_state"].items():
        assert float(state["step"]) == float(ours["param_state"][name]["step"]) == 2.0, name
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(state[key], ours["param_state"][name][key]), (name, key)
    # Its scheduler, from our settings at our position, gives each group the rate ours used last.
    assert theirs["lrs"] == pytest.approx([g["lr"] for g in ours["param_groups"]], rel=1e-12)


def lm_loss(stdout: str, iteration: int) -> str:
    line = next(l for l in stdout.splitlines() if f"iteration {iteration:8d}/" in l)
    return line.split("lm loss:")[1].split("|")[0].strip()


@megatron_lm
@pytest.mark.parametrize("tp, target", [(1, 2), (2, 1)])
def test_megatron_lm_convert_reads_ours_and_what_it_saves_resumes_here(tmp_path, tp, target):
    """Its tools/checkpoint/convert.py (core loader and saver, local layers) reads our checkpoint
    and reshards it; what its saver writes resumes here with our weights (it carries no optimizer
    state) and trains on to the loss our own checkpoint gives."""
    run([PRETRAIN, *tiny(2, "--save", str(tmp_path / "ck"), "--tensor-model-parallel-size", str(tp), *NO_DROPOUT)],
        np=tp)
    proc = subprocess.run([sys.executable, CONVERT_DRIVER, "--model-type", "GPT", "--loader", "core", "--saver", "core",
                           "--loader-transformer-impl", "local", "--saver-transformer-impl", "local",
                           "--load-dir", str(tmp_path / "ck"), "--save-dir", str(tmp_path / "theirs"),
                           "--target-tensor-parallel-size", str(target)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MEGATRON_LM_DIR": MEGATRON_LM, "OMP_NUM_THREADS": "1",
                               "TMPDIR": str(tmp_path)})  # torchrun's folders go with the test's
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    flags = ["--no-load-optim", "--tensor-model-parallel-size", str(target), *NO_DROPOUT]
    theirs = run([PRETRAIN, *tiny(3, "--load", str(tmp_path / "theirs"), *flags)], np=target).stdout
    assert "at iteration 2" in theirs
    # Ours resharded here to the same layout: the same next loss, and the same weights at TP 1.
    for name in ("ck", "theirs"):
        for size in {1, target}:
            run([CONVERT, "--load", str(tmp_path / name), "--save", str(tmp_path / f"{name}_tp{size}"),
                 "--target-tensor-parallel-size", str(size)])
    ours = run([PRETRAIN, *tiny(3, "--load", str(tmp_path / f"ck_tp{target}"), *flags)], np=target).stdout
    assert lm_loss(theirs, 3) == lm_loss(ours, 3)
    want = torch.load(rank_file(tmp_path / "ck_tp1", 2), weights_only=True)["model"]
    got = torch.load(rank_file(tmp_path / "theirs_tp1", 2), weights_only=True)["model"]
    assert got.keys() == want.keys()
    for name, tensor in want.items():
        assert torch.equal(got[name], tensor), name


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
