"""What Megatron-LM's scripts read through megatron.training's globals (get_args, get_tokenizer,
get_timers), set by pretrain() for the length of one run."""
import time

from .. import _C


class Args:
    """get_args(): the run's Arguments, plus what Megatron-LM adds to its namespace
    (padded_vocab_size) and the flags of an extra_args_provider. Attributes set on it are kept
    here; the Arguments themselves are fixed once the run starts."""

    def __init__(self, arguments, extra=None):
        object.__setattr__(self, "_arguments", arguments)
        object.__setattr__(self, "_extra", dict(extra or {}))

    def __getattr__(self, name):
        extra = object.__getattribute__(self, "_extra")
        if name in extra:
            return extra[name]
        arguments = object.__getattribute__(self, "_arguments")
        if name == "padded_vocab_size":
            # On first use only: it needs the tokenizer, which a run on the library's callbacks
            # never builds in Python.
            extra[name] = _C.vocab_size_with_padding(get_tokenizer().vocab_size, arguments.make_vocab_size_divisible_by,
                                                     arguments.tensor_model_parallel_size,
                                                     arguments.pad_vocab_size_to)
            return extra[name]
        return getattr(arguments, name)

    def __setattr__(self, name, value):
        self._extra[name] = value

    @property
    def arguments(self):
        """The underlying megatron_cpp.Arguments."""
        return self._arguments

    def __repr__(self):
        return f"Args({self._arguments!r}, extra={self._extra!r})"


class Timer:
    """One named wall-clock timer (Megatron-LM's Timer: start, stop, elapsed)."""

    def __init__(self, name):
        self.name = name
        self._elapsed = 0.0
        self._started = None

    def start(self, barrier=False):
        if self._started is not None:
            raise RuntimeError(f"[timers] timer '{self.name}' has already been started")
        self._started = time.perf_counter()

    def stop(self, barrier=False):
        if self._started is None:
            raise RuntimeError(f"[timers] timer '{self.name}' is not started")
        self._elapsed += time.perf_counter() - self._started
        self._started = None

    def reset(self):
        self._elapsed = 0.0
        self._started = None

    def elapsed(self, reset=True, barrier=False):
        """Seconds accumulated (a running timer counts up to now), then reset by default."""
        running = self._started is not None
        if running:
            self.stop()
        value = self._elapsed
        if reset:
            self.reset()
        if running:
            self.start()
        return value


class Timers:
    """get_timers(): timers(name, log_level=None) is the timer of that name, made on first use."""

    def __init__(self):
        self._timers = {}

    def __call__(self, name, log_level=None):
        return self._timers.setdefault(name, Timer(name))


class _State:
    args = None          # Args
    tokenizer = None     # built from the flags on first use
    timers = None        # Timers
    parallel_state = None  # the run's ParallelState, from the first callback on
    device = None          # the run's torch.device (TrainingContext.device), likewise
    context = None       # the TrainingContext of the model_builder/dataset_builder call in progress


_state = _State()


def _require(value, what):
    if value is None:
        raise RuntimeError(f"[megatron_cpp.training] {what} is not set: call it inside pretrain() (from a callback)")
    return value


def get_args():
    """The arguments of the run in progress (Megatron-LM's get_args())."""
    return _require(_state.args, "get_args()")


def get_tokenizer():
    """The tokenizer the flags name, built once per run (Megatron-LM's get_tokenizer())."""
    if _state.tokenizer is None:
        _state.tokenizer = _C.build_tokenizer(get_args().arguments)
    return _state.tokenizer


def get_timers():
    """The run's named timers (Megatron-LM's get_timers())."""
    return _require(_state.timers, "get_timers()")


def get_parallel_state():
    """The ParallelState of the run in progress."""
    return _require(_state.parallel_state, "the parallel state")


def get_context():
    """The TrainingContext of the model_builder or dataset_builder call in progress."""
    return _require(_state.context, "the training context (only model_builder and dataset_builder have one)")


def _start(arguments, extra):
    _state.args = Args(arguments, extra)
    _state.tokenizer = None
    _state.timers = Timers()
    _state.parallel_state = None
    _state.device = None
    _state.context = None


def _end():
    _state.args = _state.tokenizer = _state.timers = _state.parallel_state = _state.device = _state.context = None
