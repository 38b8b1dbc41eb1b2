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
