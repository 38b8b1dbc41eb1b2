"""
megatron.training.utils: helpers Megatron-LM's forward steps call.
"""
from __future__ import annotations
from megatron_cpp import _C
from megatron_cpp._C import get_ltor_masks_and_position_ids
from megatron_cpp.training import global_vars
import torch as torch
__all__: list[str] = ['average_losses_across_data_parallel_group', 'get_batch_on_this_cp_rank', 'get_batch_on_this_tp_rank', 'get_blend_and_blend_per_split', 'get_ltor_masks_and_position_ids', 'global_vars', 'is_last_rank', 'print_rank_0', 'torch']
def _world_rank():
    ...
def average_losses_across_data_parallel_group(losses):
    """
    The mean of each loss over the data-parallel group, as one tensor (Megatron-LM's).
    """
def get_batch_on_this_cp_rank(batch):
    """
    Megatron-LM's: each tensor of the batch (a dict; None values pass through) cut along the
        sequence to this context-parallel rank's two of 2 x CP chunks, r and 2 x CP - 1 - r (the
        attention mask along its query rows). At CP 1 the batch as it is.
    """
def get_batch_on_this_tp_rank(data_iterator):
    """
    Megatron-LM's get_batch_on_this_tp_rank: TP rank 0's next micro-batch (tokens, labels,
        loss_mask, attention_mask, position_ids) on every rank of its tensor-parallel group, on the
        run's device. With pipeline parallelism the first stage gets no labels or loss_mask, the last
        no tokens or position_ids, and the stages between get attention_mask only. Every rank with an
        iterator draws from it, so that all iterators stay in step; TP rank 0's batch is the one used.
    """
def get_blend_and_blend_per_split(args):
    """
    (blend, blend_per_split) of the flags, as Megatron-LM's: the --data-path (or --data-args-path)
        blend, or one per split from --train/valid/test-data-path (or --per-split-data-args-path).
    """
def is_last_rank():
    """
    Whether this process is the last rank of the world.
    """
def print_rank_0(message):
    """
    Prints on world rank 0 only.
    """
