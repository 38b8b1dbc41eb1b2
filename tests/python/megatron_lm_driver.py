"""Megatron-LM's own code (a snapshot of its repository, MEGATRON_LM_DIR) on CPU, as a subprocess of
test_megatron_lm_checkpoints.py: it parses the flags, builds its GPT model with the local layer spec
and loads or saves a --ckpt-format torch checkpoint with megatron.training.checkpointing.

    [torchrun --nproc-per-node TP x PP] megatron_lm_driver.py load CKPT_DIR IDS OUT -- FLAGS...
                                                               load, then its logits of IDS into OUT
                                                               (with PP > 1 each rank's weights into OUT.rankR)
    megatron_lm_driver.py save CKPT_DIR IDS OUT -- FLAGS...   save at --train-iters with 8 samples
                                                               per iteration consumed, logits into OUT
"""
from __future__ import annotations

import contextlib
import os
import sys
import typing

if not hasattr(typing, "override"):  # Python < 3.12; Megatron-LM's hybrid model imports it
    typing.override = lambda f: f
sys.path.insert(0, os.environ["MEGATRON_LM_DIR"])
for name, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
    os.environ.setdefault(name, value)

import torch  # noqa: E402
from megatron.core import parallel_state as mpu  # noqa: E402
from megatron.core import tensor_parallel  # noqa: E402
from megatron.core.models.gpt import GPTModel  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402
from megatron.training import arguments, checkpointing  # noqa: E402


def one_rank_read_metadata(read):
    """Megatron-LM all-reduces the tracker's iteration in a CUDA tensor; this CPU job is one rank."""
    def wrapped(path):
        initialized = torch.distributed.is_initialized
        torch.distributed.is_initialized = lambda: False
        try:
            return read(path)
        finally:
            torch.distributed.is_initialized = initialized
    return wrapped


def main() -> None:
    mode, ckpt, ids, out = sys.argv[1:5]
    flags = sys.argv[sys.argv.index("--") + 1:]
    sys.argv = [sys.argv[0], *flags, "--transformer-impl", "local", "--ckpt-format", "torch",
                "--use-cpu-initialization", "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion",
                "--no-bias-gelu-fusion", "--no-bias-dropout-fusion", "--no-persist-layer-norm",
                "--distributed-backend", "gloo", "--tokenizer-type", "NullTokenizer", "--mock-data",
                *(["--load", ckpt] if mode == "load" else ["--save", ckpt])]
    checkpointing.read_metadata = one_rank_read_metadata(checkpointing.read_metadata)
    arguments.get_device_arch_version = lambda: 10  # asks the GPU, before its TP advice on CUDA connections
    args = arguments.parse_and_validate_args()  # with --use-checkpoint-args, load_args_from_checkpoint
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    torch.distributed.init_process_group("gloo")
    mpu.initialize_model_parallel(args.tensor_model_parallel_size, args.pipeline_model_parallel_size)
    torch.manual_seed(args.seed)
    config = arguments.core_transformer_config_from_args(args)
    # With pipeline stages its tied embedding is all-reduced between them through .cuda().
    torch.Tensor.cuda = lambda self, *a, **k: self
    # As Megatron-LM's gpt_builder builds it with --transformer-impl local.
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(normalization=args.normalization),
                     vocab_size=args.padded_vocab_size, max_sequence_length=args.max_position_embeddings,
                     pre_process=mpu.is_pipeline_first_stage(), post_process=mpu.is_pipeline_last_stage(),
                     share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
                     position_embedding_type=args.position_embedding_type)
    result = {}
    if mode == "load":
        result["iteration"], _ = checkpointing.load_checkpoint([model], None, None, strict=True)
        result["consumed_train_samples"] = args.consumed_train_samples
    else:
        # Megatron-LM saves the CUDA generator's state, Philox's seed and offset, which a CPU job has
        # not: the state a GPU job would have after seeding.
        seed_and_offset = torch.tensor([args.seed, 0], dtype=torch.int64).view(torch.uint8)
        torch.cuda.get_rng_state = lambda device="cuda": seed_and_offset.clone()
        args.consumed_train_samples = 8 * args.train_iters
        checkpointing.save_checkpoint(args.train_iters, [model], None, None, 0)
    if args.pipeline_model_parallel_size > 1:
        # A stage's forward needs the pipeline schedule: each rank writes its weights instead.
        torch.save({k: v for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)},
                   f"{out}.rank{torch.distributed.get_rank()}")
        if torch.distributed.get_rank() == 0:
            torch.save(result, out)
        return
    model.eval()
    # Megatron-LM's local attention takes its scratch buffer on the current CUDA device, and forks
    # the CUDA generator for its dropout (off here).
    torch.cuda.current_device = lambda: "cpu"
    tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    ids = torch.load(ids)
    positions = torch.arange(ids.shape[1]).unsqueeze(0).expand_as(ids)
    mask = torch.ones(1, 1, ids.shape[1], ids.shape[1], dtype=torch.bool).triu(1)
    with torch.no_grad():
        logits = model(ids, positions, mask)  # this TP rank's vocabulary shard
        shards = [torch.empty_like(logits) for _ in range(mpu.get_tensor_model_parallel_world_size())]
        torch.distributed.all_gather(shards, logits, group=mpu.get_tensor_model_parallel_group())
    result["logits"] = torch.cat(shards, dim=-1)
    result["input_ids"] = ids
    if torch.distributed.get_rank() == 0:
        torch.save(result, out)


if __name__ == "__main__":
    main()
