"""
megatron.training.utils: helpers Megatron-LM's forward steps call.
"""
from __future__ import annotations
from megatron_cpp import _C
from megatron_cpp._C import get_ltor_masks_and_position_ids
from megatron_cpp.training import global_vars
import torch as torch
__all__: list[str] = ['average_losses_across_data_parallel_group', 'get_ltor_masks_and_position_ids', 'global_vars', 'is_last_rank', 'print_rank_0', 'torch']
def _world_rank():
    ...
def average_losses_across_data_parallel_group(losses):
    """
    The mean of each loss over the data-parallel group, as one tensor (Megatron-LM's).
    """
def is_last_rank():
    """
    Whether this process is the last rank of the world.
    """
def print_rank_0(message):
    """
    Prints on world rank 0 only.
    """
