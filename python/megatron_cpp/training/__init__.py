"""Megatron-LM's megatron.training over megatron_cpp: pretrain() in the forms scripts call it,
and the globals their callbacks read (get_args, get_tokenizer, get_timers, print_rank_0,
is_last_rank)."""
from .global_vars import get_args, get_timers, get_tokenizer  # noqa: F401
from .utils import is_last_rank, print_rank_0  # noqa: F401
from . import arguments, utils  # noqa: F401
from .training import pretrain  # noqa: F401
