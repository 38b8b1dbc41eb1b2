"""What both Megatron drivers (megatron_lm_driver.py, megatron_core_driver.py) do to run
megatron-core's GPT model on CPU: the logits of a batch of ids, gathered over tensor parallelism.
megatron is imported here, after the caller has put the one it tests on sys.path."""
import contextlib

import torch


def gathered_logits(model, ids: torch.Tensor) -> torch.Tensor:
    from megatron.core import parallel_state as mpu
    from megatron.core import tensor_parallel
    model.eval()
    # Its local attention takes its scratch buffer on the current CUDA device (its router moves
    # its weight there), and forks the CUDA generator for its dropout (off here).
    torch.cuda.current_device = lambda: "cpu"
    tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    positions = torch.arange(ids.shape[1]).unsqueeze(0).expand_as(ids)
    mask = torch.ones(1, 1, ids.shape[1], ids.shape[1], dtype=torch.bool).triu(1)
    with torch.no_grad():
        logits = model(ids, positions, mask)  # this TP rank's vocabulary shard
        shards = [torch.empty_like(logits) for _ in range(mpu.get_tensor_model_parallel_world_size())]
        torch.distributed.all_gather(shards, logits, group=mpu.get_tensor_model_parallel_group())
    return torch.cat(shards, dim=-1)
