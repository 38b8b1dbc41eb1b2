"""
Megatron-LM's megatron.training over megatron_cpp: pretrain() in the forms scripts call it,
and the globals their callbacks read (get_args, get_tokenizer, get_timers, print_rank_0,
is_last_rank).
"""
from __future__ import annotations
from . import arguments
from . import global_vars
from . import training
from . import utils
from megatron_cpp.training.global_vars import get_args
from megatron_cpp.training.global_vars import get_timers
from megatron_cpp.training.global_vars import get_tokenizer
from megatron_cpp.training.training import pretrain
from megatron_cpp.training.utils import is_last_rank
from megatron_cpp.training.utils import print_rank_0
__all__: list[str] = ['arguments', 'get_args', 'get_timers', 'get_tokenizer', 'global_vars', 'is_last_rank', 'pretrain', 'print_rank_0', 'training', 'utils']
