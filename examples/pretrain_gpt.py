"""Pretrain GPT: Megatron-LM's pretrain_gpt.py on the megatron_cpp bindings.

model_builder, dataset_builder, get_batch, loss_func and forward_step are written here in
Python, with the same steps as the library's C++ ones (megatron/training/gpt_callbacks.h, which
build/bin/pretrain_gpt uses), so both give the same losses for the same flags. pretrain() runs
the loop in C++ and calls them back.

    mpirun -np 2 python examples/pretrain_gpt.py --num-layers 2 --hidden-size 64 ... (see --help)
    RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 python examples/pretrain_gpt.py ...   (torchrun-style)
"""
import os
import sys

# MKL picks GEMM thread counts dynamically unless told not to before torch loads it; fixed ones
# keep float sums, and so resumed runs, bit-identical from run to run.
os.environ.setdefault("MKL_DYNAMIC", "FALSE")

try:
    import megatron_cpp
except ImportError:  # not pip-installed: the CMake build tree's copy
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
    import megatron_cpp

_tokenizer = None  # built once from the flags, as in Megatron-LM


def model_builder(ctx, pre_process=True, post_process=True):
    """Megatron's model_provider: the GPT model of this rank's pipeline stage (or model chunk)."""
    args = ctx.args
    config = megatron_cpp.core_transformer_config_from_args(ctx)
    return megatron_cpp.GPTModel(
        config,
        _tokenizer.vocab_size,
        args.max_position_embeddings,
        make_vocab_size_divisible_by=args.make_vocab_size_divisible_by,
        pre_process=pre_process,
        post_process=post_process,
        pipeline_model_parallel_rank=ctx.parallel_state.get_pipeline_model_parallel_rank(),
        virtual_pipeline_model_parallel_rank=ctx.virtual_pipeline_model_parallel_rank or 0,
        share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
        position_embedding_type=args.position_embedding_type,
        rotary_percent=args.rotary_percent,
        rotary_base=args.rotary_base,
        seed=args.seed,
    )


def dataset_builder(ctx, train_val_test_num_samples):
    """Megatron's train_valid_test_datasets_provider: GPT datasets, or mock data."""
    args = ctx.args
    config = megatron_cpp.GPTDatasetConfig(
        random_seed=args.seed,
        sequence_length=args.seq_length,
        split=args.split,
        path_to_cache=args.data_cache_path,
    )
    if args.mock_data:
        train, valid, test = megatron_cpp.build_mock_gpt_datasets(
            _tokenizer.vocab_size, _tokenizer.eod, train_val_test_num_samples, config)
    else:
        # Rank 0 builds the index caches, the others load them after it.
        train, valid, test = megatron_cpp.build_gpt_datasets_on_ranks(
            args.data_path, train_val_test_num_samples, config, ctx.parallel_state.get_world_group())
    return megatron_cpp.Datasets(train, valid, test, eod_token=_tokenizer.eod)


def get_batch(data_iterator, device):
    """The next micro-batch, on the model's device."""
    batch = next(data_iterator, None)
    if batch is None:
        raise RuntimeError("[pretrain_gpt] the data iterator ran out of samples")
    batch = {k: v.to(device, non_blocking=True) if v is not None else None for k, v in batch.items()}
    return batch["tokens"], batch["labels"], batch["loss_mask"], batch["attention_mask"], batch["position_ids"]


def loss_func(loss_mask, output_tensor):
    """Mean of the per-token losses where loss_mask is 1."""
    losses = output_tensor.float().reshape(-1)
    loss_mask = loss_mask.reshape(-1)
    loss = (losses * loss_mask).sum() / loss_mask.sum()
    return loss, {"lm loss": loss.detach()}


def forward_step(data_iterator, model):
    """One micro-batch through the model: (per-token loss, loss_func bound to its mask)."""
    device = next(model.parameters()).device
    tokens, labels, loss_mask, attention_mask, position_ids = get_batch(data_iterator, device)
    output_tensor = model(tokens, position_ids, attention_mask, labels=labels)
    return output_tensor, lambda output: loss_func(loss_mask, output)


def main(argv):
    global _tokenizer
    env = megatron_cpp.LauncherEnv.from_environment()
    megatron_cpp.init_logging(env.rank, env.world_size)
    try:
        args = megatron_cpp.parse_arguments(argv, world_size=env.world_size, program="pretrain_gpt.py")
        if args is None:  # --help
            return 0
        _tokenizer = megatron_cpp.build_tokenizer(args)
    except (RuntimeError, ValueError, TypeError) as e:
        if env.rank == 0:  # the same on every rank: say it once
            print(f"pretrain_gpt.py: {e}", file=sys.stderr)
        return 2
    try:
        megatron_cpp.pretrain(args, model_builder, dataset_builder, forward_step)
    except Exception as e:  # noqa: BLE001 - one line, then end every rank so none waits on this one
        print(f"pretrain_gpt.py: [rank {env.rank}] {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        megatron_cpp.abort_job(1)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
