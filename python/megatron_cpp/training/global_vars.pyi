"""
What Megatron-LM's scripts read through megatron.training's globals (get_args, get_tokenizer,
get_timers), set by pretrain() for the length of one run.
"""
from __future__ import annotations
from megatron_cpp import _C
import time as time
__all__: list[str] = ['Args', 'Timer', 'Timers', 'get_args', 'get_context', 'get_parallel_state', 'get_timers', 'get_tokenizer', 'time']
class Args:
    """
    get_args(): the run's Arguments, plus what Megatron-LM adds to its namespace
        (padded_vocab_size) and the flags of an extra_args_provider. Attributes set on it are kept
        here; the Arguments themselves are fixed once the run starts.
    """
    def __getattr__(self, name):
        ...
    def __init__(self, arguments, extra = None):
        ...
    def __repr__(self):
        ...
    def __setattr__(self, name, value):
        ...
    @property
    def arguments(self):
        """
        The underlying megatron_cpp.Arguments.
        """
class Timer:
    """
    One named wall-clock timer (Megatron-LM's Timer: start, stop, elapsed).
    """
    def __init__(self, name):
        ...
    def elapsed(self, reset = True, barrier = False):
        """
        Seconds accumulated (a running timer counts up to now), then reset by default.
        """
    def reset(self):
        ...
    def start(self, barrier = False):
        ...
    def stop(self, barrier = False):
        ...
class Timers:
    """
    get_timers(): timers(name, log_level=None) is the timer of that name, made on first use.
    """
    def __call__(self, name, log_level = None):
        ...
    def __init__(self):
        ...
class _State:
    args = None
    context = None
    device = None
    parallel_state = None
    timers = None
    tokenizer = None
def _end():
    ...
def _require(value, what):
    ...
def _start(arguments, extra):
    ...
def get_args():
    """
    The arguments of the run in progress (Megatron-LM's get_args()).
    """
def get_context():
    """
    The TrainingContext of the model_builder or dataset_builder call in progress.
    """
def get_parallel_state():
    """
    The ParallelState of the run in progress.
    """
def get_timers():
    """
    The run's named timers (Megatron-LM's get_timers()).
    """
def get_tokenizer():
    """
    The tokenizer the flags name, built once per run (Megatron-LM's get_tokenizer()).
    """
_state: _State  # value = <megatron_cpp.training.global_vars._State object>
