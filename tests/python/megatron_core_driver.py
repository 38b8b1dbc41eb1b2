"""megatron-core's GPT model (the package pinned from PyPI, local layers, CPU, gloo) given one of our
checkpoints, as a subprocess of test_megatron_core.py: each tensor-parallel rank loads its
mp_rank_XX file (or, from a torch_dist folder, its shards through megatron.core's
dist_checkpointing) strictly into megatron.core's GPTModel and the logits of IDS, gathered over TP,
go to OUT.

    torchrun --nproc-per-node TP megatron_core_driver.py ITER_DIR IDS OUT MODEL_JSON [save]

With `save`, the model keeps its own initial weights, which it saves into ITER_DIR as Megatron-LM's
save_checkpoint does with --ckpt-format torch_dist (dist_checkpointing, its args under its names),
and its logits of IDS go to OUT.

MODEL_JSON: {"config": TransformerConfig fields (activation_func by name), "model": GPTModel
arguments}. Layers come from get_gpt_decoder_block_spec without Transformer Engine, as
Megatron-LM's --transformer-impl local builds them (MoE layers where moe_layer_freq says).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")  # Apex and Transformer Engine are absent: megatron-core says so
from megatron.core import dist_checkpointing  # noqa: E402
from megatron.core import parallel_state as mpu  # noqa: E402
from megatron.core.models.gpt import GPTModel  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec  # noqa: E402
from megatron.core.transformer import TransformerConfig  # noqa: E402
from megatron.core.transformer.moe import moe_utils  # noqa: E402
from megatron_forward import gathered_logits  # noqa: E402

# 0.16.1's router names te_general_gemm whether or not Transformer Engine imported (a NameError
# without it); None is its own test for "absent", which takes torch.mm.
if not hasattr(moe_utils, "te_general_gemm"):
    moe_utils.te_general_gemm = None

ACTIVATIONS = {"gelu": F.gelu, "silu": F.silu, "openai_gelu": lambda x: F.gelu(x, approximate="tanh")}


def megatron_lm_args(spec: dict, tp: int, iteration: int) -> argparse.Namespace:
    """The args Megatron-LM's save_checkpoint keeps in common.pt, under its argparse names."""
    config, model = spec["config"], spec["model"]
    return argparse.Namespace(
        num_layers=config["num_layers"], hidden_size=config["hidden_size"],
        num_attention_heads=config["num_attention_heads"],
        ffn_hidden_size=config.get("ffn_hidden_size", 4 * config["hidden_size"]),
        group_query_attention="num_query_groups" in config,
        num_query_groups=config.get("num_query_groups", config["num_attention_heads"]),
        normalization=config["normalization"], swiglu=config.get("gated_linear_unit", False),
        add_bias_linear=config["add_bias_linear"], position_embedding_type=model["position_embedding_type"],
        rotary_base=model.get("rotary_base", 10000),
        untie_embeddings_and_output_weights=not model["share_embeddings_and_output_weights"],
        max_position_embeddings=model["max_sequence_length"], seq_length=model["max_sequence_length"],
        vocab_size=250, padded_vocab_size=model["vocab_size"], make_vocab_size_divisible_by=8,
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=1, micro_batch_size=2, global_batch_size=8,
        consumed_train_samples=8 * iteration, consumed_valid_samples=0, ckpt_format="torch_dist")


def save(model: GPTModel, spec: dict, iter_dir: str) -> None:
    """Megatron-LM's torch_dist layout as its save_checkpoint writes it, through dist_checkpointing."""
    torch.cuda.synchronize = lambda *a, **k: None  # its writer's calls on a CPU run
    torch.cuda.current_device = lambda: "cpu"
    ckpt = os.path.dirname(iter_dir)
    iteration = int(os.path.basename(iter_dir)[len("iter_"):])
    os.makedirs(iter_dir, exist_ok=True)
    state = {"args": megatron_lm_args(spec, torch.distributed.get_world_size(), iteration), "checkpoint_version": 3.0,
             "iteration": iteration, "model": model.sharded_state_dict()}
    dist_checkpointing.save(state, iter_dir)
    if torch.distributed.get_rank() == 0:
        with open(os.path.join(ckpt, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(iteration))


def build_model(spec: dict, **config_fields) -> GPTModel:
    """gloo over torchrun's ranks, all of them tensor-parallel, and MODEL_JSON's GPTModel."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    torch.distributed.init_process_group("gloo")
    tp = torch.distributed.get_world_size()
    mpu.initialize_model_parallel(tensor_model_parallel_size=tp)
    fields = dict(spec["config"])
    fields["activation_func"] = ACTIVATIONS[fields.pop("activation", "gelu")]
    config = TransformerConfig(**fields, **config_fields, tensor_model_parallel_size=tp, use_cpu_initialization=True,
                               hidden_dropout=0.0, attention_dropout=0.0, bias_activation_fusion=False,
                               masked_softmax_fusion=False, persist_layer_norm=False, bias_dropout_fusion=False,
                               gradient_accumulation_fusion=False, apply_rope_fusion=False,
                               moe_token_dispatcher_type="allgather")
    layers = get_gpt_decoder_block_spec(config, use_transformer_engine=False, normalization=config.normalization)
    return GPTModel(config=config, transformer_layer_spec=layers, **spec["model"])


def main() -> None:
    iter_dir, ids_path, out, model_json = sys.argv[1:5]
    saving = sys.argv[5:] == ["save"]
    spec = json.loads(open(model_json).read())
    model = build_model(spec)
    rank = mpu.get_tensor_model_parallel_rank()
    if saving:  # its own initial weights, the replicated ones rank 0's (as training keeps them)
        for param in model.parameters():
            if not getattr(param, "tensor_model_parallel", False):
                torch.distributed.broadcast(param.data, src=0)
        save(model, spec, iter_dir)
        logits = gathered_logits(model, torch.load(ids_path))
        if torch.distributed.get_rank() == 0:
            torch.save({"logits": logits}, out)
        return
    if os.path.exists(os.path.join(iter_dir, "metadata.json")):  # torch_dist, as its load_checkpoint loads it
        state = {"model": dist_checkpointing.load({"model": model.sharded_state_dict()}, iter_dir)["model"]}
    else:
        state = torch.load(os.path.join(iter_dir, f"mp_rank_{rank:02d}", "model_optim_rng.pt"), weights_only=True)
    model.load_state_dict(state["model"], strict=True)  # as its load_checkpoint loads the legacy format
    logits = gathered_logits(model, torch.load(ids_path))
    if torch.distributed.get_rank() == 0:
        torch.save({"logits": logits}, out)


if __name__ == "__main__":
    main()
    # Every rank done before gloo's threads go: without it a rank at times aborts as it exits.
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
