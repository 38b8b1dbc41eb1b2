"""
megatron.core.utils: what Megatron-LM's forward steps import from it, the same functions as
megatron_cpp.training.utils's.
"""
from __future__ import annotations
from megatron_cpp.training.utils import get_batch_on_this_cp_rank
__all__: list[str] = ['get_batch_on_this_cp_rank']
