"""megatron.training.utils: helpers Megatron-LM's forward steps call."""
import torch

from .. import _C
from .._C import get_ltor_masks_and_position_ids  # noqa: F401  (built by the library's batch code)
from . import global_vars


def average_losses_across_data_parallel_group(losses):
    """The mean of each loss over the data-parallel group, as one tensor (Megatron-LM's)."""
    averaged = torch.cat([loss.clone().detach().float().view(1) for loss in losses])
    ps = global_vars.get_parallel_state()
    ps.get_data_parallel_group().all_reduce(averaged, _C.ReduceOp.SUM)
    return averaged / ps.get_data_parallel_world_size()


def get_batch_on_this_cp_rank(batch):
    """Megatron-LM's: each tensor of the batch (a dict; None values pass through) cut along the
    sequence to this context-parallel rank's two of 2 x CP chunks, r and 2 x CP - 1 - r (the
    attention mask along its query rows). At CP 1 the batch as it is."""
    ps = global_vars.get_parallel_state()
    cp = ps.get_context_parallel_world_size()
    if cp == 1:
        return batch
    cut = _C.get_batch_on_this_cp_rank({k: v for k, v in batch.items() if v is not None}, cp,
                                       ps.get_context_parallel_rank())
    return {k: cut.get(k) for k in batch}


def get_blend_and_blend_per_split(args):
    """(blend, blend_per_split) of the flags, as Megatron-LM's: the --data-path (or --data-args-path)
    blend, or one per split from --train/valid/test-data-path (or --per-split-data-args-path)."""
    import json
    from ..core.datasets.utils import get_blend_from_list
    if args.data_args_path:
        with open(args.data_args_path) as f:
            return get_blend_from_list(f.read().split()), None
    if args.data_path:
        return get_blend_from_list(args.data_path), None
    if args.per_split_data_args_path:
        with open(args.per_split_data_args_path) as f:
            per_split = json.load(f)
        lists = [per_split[k].split() if isinstance(per_split[k], str) else per_split[k]
                 for k in ("train", "valid", "test")]
    else:
        lists = [args.train_data_path, args.valid_data_path, args.test_data_path]
    if not any(lists):
        return None, None
    return None, [get_blend_from_list(words) if words else None for words in lists]


def get_batch_on_this_tp_rank(data_iterator):
    """Megatron-LM's get_batch_on_this_tp_rank: TP rank 0's next micro-batch (tokens, labels,
    loss_mask, attention_mask, position_ids) on every rank of its tensor-parallel group, on the
    run's device. With pipeline parallelism the first stage gets no labels or loss_mask, the last
    no tokens or position_ids, and the stages between get attention_mask only. Every rank with an
    iterator draws from it, so that all iterators stay in step; TP rank 0's batch is the one used."""
    from ..core.tensor_parallel import broadcast_data
    ps = global_vars.get_parallel_state()
    first = ps.get_tensor_model_parallel_rank() == 0
    data = next(data_iterator) if data_iterator is not None else None
    if first and data is None:
        raise RuntimeError("[get_batch_on_this_tp_rank] tensor-parallel rank 0 needs a data iterator")
    has_mask = torch.zeros(1, dtype=torch.int64)
    if first:
        has_mask[0] = int(data.get("attention_mask") is not None)
    ps.get_tensor_model_parallel_group().broadcast(has_mask, 0)
    batch = dict(broadcast_data(["tokens", "labels", "position_ids"], data if first else None, torch.int64))
    batch.update(broadcast_data(["loss_mask"], data if first else None, torch.float32))
    batch["attention_mask"] = (broadcast_data(["attention_mask"], data if first else None, torch.bool)["attention_mask"]
                               if has_mask.item() else None)
    if ps.get_pipeline_model_parallel_world_size() > 1:
        if not ps.is_pipeline_first_stage():
            batch["tokens"] = batch["position_ids"] = None
        if not ps.is_pipeline_last_stage():
            batch["labels"] = batch["loss_mask"] = None
    device = global_vars._require(global_vars._state.device, "the run's device")
    return {k: v.to(device) if v is not None else None for k, v in batch.items()}


def print_rank_0(message):
    """Prints on world rank 0 only."""
    if _world_rank() == 0:
        print(message, flush=True)


def is_last_rank():
    """Whether this process is the last rank of the world."""
    env = _C.LauncherEnv.from_environment()
    return env.rank == env.world_size - 1


def _world_rank():
    ps = global_vars._state.parallel_state
    return ps.get_rank() if ps is not None else _C.LauncherEnv.from_environment().rank
