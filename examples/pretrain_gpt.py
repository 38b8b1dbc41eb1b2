"""Pretrain GPT, in the shape of the DeepSpeed-Domino and Megatron-LM pretrain_gpt.py: the same
four functions with the same signatures (model_builder, dataset_builder, forward_step, loss_func)
reading get_args() and get_tokenizer(), and pretrain(model_builder, dataset_builder,
forward_step) taking the flags from the command line. Only the imports name megatron_cpp.

It does what the library's C++ callbacks do (megatron/training/gpt_callbacks.h, which
build/bin/pretrain_gpt uses), so both give the same losses for the same flags; pretrain() runs
the loop in C++ and calls these back.

    python examples/pretrain_gpt.py --num-layers 2 --hidden-size 64 ... (see --help)
    mpirun -np 2 python examples/pretrain_gpt.py ...
    RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 python examples/pretrain_gpt.py ...   (torchrun-style)
"""
import os
import sys
from functools import partial

# MKL picks GEMM thread counts dynamically unless told not to before torch loads it; fixed ones
# keep float sums, and so resumed runs, bit-identical from run to run.
os.environ.setdefault("MKL_DYNAMIC", "FALSE")

try:
    import megatron_cpp
except ImportError:  # not pip-installed: the CMake build tree's copy
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
    import megatron_cpp

from megatron_cpp.core import parallel_state
from megatron_cpp.core.models.gpt import GPTModel
from megatron_cpp.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron_cpp.training import get_args, get_tokenizer, pretrain, print_rank_0
from megatron_cpp.training.arguments import core_transformer_config_from_args
from megatron_cpp.training.utils import average_losses_across_data_parallel_group


def model_builder(pre_process=True, post_process=True, vp_stage=None):
    """Build the model: this rank's pipeline stage (model chunk vp_stage with virtual stages)."""
    args = get_args()
    print_rank_0("building GPT model ...")
    config = core_transformer_config_from_args(args)
    return GPTModel(
        config,
        get_gpt_layer_local_spec(),
        args.padded_vocab_size,
        args.max_position_embeddings,
        pre_process=pre_process,
        post_process=post_process,
        share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
        position_embedding_type=args.position_embedding_type,
        rotary_percent=args.rotary_percent,
        rotary_base=args.rotary_base,
        vp_stage=vp_stage,
    )


def dataset_builder(train_val_test_num_samples):
    """Build the datasets: GPT datasets from --data-path, or mock data."""
    args = get_args()
    tokenizer = get_tokenizer()
    print_rank_0("building GPT datasets ...")
    config = megatron_cpp.GPTDatasetConfig(
        random_seed=args.seed,
        sequence_length=args.seq_length,
        split=args.split,
        path_to_cache=args.data_cache_path,
    )
    if args.mock_data:
        return megatron_cpp.build_mock_gpt_datasets(tokenizer.vocab_size, tokenizer.eod, train_val_test_num_samples,
                                                    config)
    # Rank 0 builds the index caches, the others load them after it.
    return megatron_cpp.build_gpt_datasets_on_ranks(args.data_path, train_val_test_num_samples, config,
                                                    parallel_state.get_world_group())


def get_batch(data_iterator, device):
    """The next micro-batch, on the model's device."""
    batch = next(data_iterator, None)
    if batch is None:
        raise RuntimeError("[pretrain_gpt] the data iterator ran out of samples")
    batch = {k: v.to(device, non_blocking=True) if v is not None else None for k, v in batch.items()}
    return batch["tokens"], batch["labels"], batch["loss_mask"], batch["attention_mask"], batch["position_ids"]


def loss_func(loss_mask, output_tensor):
    """Mean of the per-token losses where loss_mask is 1; reported averaged over data parallelism."""
    losses = output_tensor.float().reshape(-1)
    loss_mask = loss_mask.reshape(-1).float()
    loss = (losses * loss_mask).sum() / loss_mask.sum()
    averaged_loss = average_losses_across_data_parallel_group([loss])
    return loss, {"lm loss": averaged_loss[0]}


def forward_step(data_iterator, model):
    """Forward step: (per-token loss, loss_func bound to this micro-batch's mask)."""
    device = next(model.parameters()).device
    tokens, labels, loss_mask, attention_mask, position_ids = get_batch(data_iterator, device)
    output_tensor = model(tokens, position_ids, attention_mask, labels=labels)
    return output_tensor, partial(loss_func, loss_mask)


def main():
    """pretrain() on the command line's flags; a failure is one line naming the rank, then every
    rank of the job ends (abort_job), so that none waits on this one."""
    env = megatron_cpp.LauncherEnv.from_environment()
    megatron_cpp.init_logging(env.rank, env.world_size)
    try:
        pretrain(model_builder, dataset_builder, forward_step)
    except Exception as e:  # noqa: BLE001
        print(f"pretrain_gpt.py: [rank {env.rank}] {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        megatron_cpp.abort_job(1)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
