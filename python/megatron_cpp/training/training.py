"""megatron.training.training.pretrain in the three forms scripts call it, over one run of
megatron_cpp's pretrain(). Which form a call uses is told by its arguments:

  pretrain(args, model_builder=None, dataset_builder=None, forward_step=None, *, world=None)
      megatron_cpp's own: args an Arguments, a list of command-line words or a dict of flags;
      callbacks take a TrainingContext first (None: the library's GPT one).
  pretrain(model_builder, dataset_builder, forward_step_func)
      the DeepSpeed-Domino seed's: flags from sys.argv.
  pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
           process_non_loss_data_func=None, extra_args_provider=None, args_defaults={})
      Megatron-LM's: flags from sys.argv, an extra_args_provider's own flags and args_defaults.

Callbacks may take no context, as Megatron-LM's do: model_builder(pre_process, post_process
[, vp_stage]), dataset_builder(train_val_test_num_samples), with get_args(), get_tokenizer() and
megatron_cpp.core.parallel_state answering inside them.
"""
import inspect

from .. import _C, _training
from ..core.enums import ModelType
from . import global_vars
from .arguments import parse_args

_FORMS = ("pretrain(args, model_builder=None, dataset_builder=None, forward_step=None, *, world=None); "
          "pretrain(model_builder, dataset_builder, forward_step_func); "
          "pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func, "
          "process_non_loss_data_func=None, extra_args_provider=None, args_defaults={})")


def _explicit_form(args, model_builder=None, dataset_builder=None, forward_step=None, *, world=None):
    pass


def _seed_form(model_builder, dataset_builder, forward_step_func):
    pass


def _megatron_form(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
                   process_non_loss_data_func=None, extra_args_provider=None, args_defaults=None,
                   get_embedding_ranks=None, get_position_embedding_ranks=None, non_loss_data_func=None):
    pass


def _bind(form, args, kwargs):
    try:
        return inspect.signature(form).bind(*args, **kwargs).arguments
    except TypeError:
        return None


def pretrain(*args, **kwargs):
    """Megatron-LM's pretrain(): builds the model, optimizer and datasets, trains, evaluates.
    Returns a TrainingResult (None for --help). See the module's docstring for the three forms."""
    if "args" in kwargs or (args and isinstance(args[0], (_C.Arguments, list, tuple, dict))):
        bound = _bind(_explicit_form, args, kwargs)
        if bound is not None:
            return _explicit(**bound)
    bound = _bind(_megatron_form, args, kwargs)
    if bound is not None and isinstance(bound["model_type"], ModelType):
        return _megatron(**bound)
    bound = _bind(_seed_form, args, kwargs)
    if bound is not None and all(callable(v) for v in bound.values()):
        return _seed(**bound)
    raise TypeError(f"[pretrain] the call fits none of the forms pretrain takes: {_FORMS}")


def _explicit(args, model_builder=None, dataset_builder=None, forward_step=None, world=None):
    arguments = _training.parse(args, world)
    if arguments is None:  # --help was printed
        return None
    return _run(arguments, {}, model_builder, dataset_builder, forward_step, world)


def _seed(model_builder, dataset_builder, forward_step_func):
    parsed = parse_args()
    if parsed is None:
        return None
    return _run(*parsed, model_builder, dataset_builder, forward_step_func, None)


def _megatron(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
              process_non_loss_data_func=None, extra_args_provider=None, args_defaults=None, **unused):
    if model_type != ModelType.encoder_or_decoder:
        raise ValueError(f"[pretrain] megatron_cpp trains decoder-only models: model_type {model_type} is not "
                         "implemented")
    for name, value in [("process_non_loss_data_func", process_non_loss_data_func), *unused.items()]:
        if value is not None:
            raise NotImplementedError(f"[pretrain] {name} is not implemented")
    parsed = parse_args(extra_args_provider, args_defaults)
    if parsed is None:
        return None
    return _run(*parsed, model_provider, train_valid_test_dataset_provider, forward_step_func, None)


def _run(arguments, extra, model_builder, dataset_builder, forward_step, world):
    global_vars._start(arguments, extra)
    try:
        return _training.pretrain(arguments, _model_builder(model_builder), _dataset_builder(dataset_builder),
                                  forward_step, world=world)
    finally:
        global_vars._end()


def _positional(fn):
    """(names of fn's positional parameters, how many of them have no default)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a callable without a signature: take it as context-first
        return ["ctx"], 1
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [p.name for p in positional], sum(p.default is p.empty for p in positional)


def _accepts(fn, name):
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _takes_context(fn, context_arity):
    names, required = _positional(fn)
    return bool(names) and (names[0] in ("ctx", "context") or required == context_arity)


def _entered(ctx):
    """Records the run's parallel state and device and the callback's context; returns the last one."""
    state = global_vars._state
    if state.parallel_state is None:
        state.parallel_state, state.device = ctx.parallel_state, ctx.device
    previous, state.context = state.context, ctx
    return previous


def _model_builder(fn):
    if fn is None:
        return None
    with_context = _takes_context(fn, 3)
    with_vp_stage = _accepts(fn, "vp_stage")

    def builder(ctx, pre_process, post_process):
        previous = _entered(ctx)
        try:
            if with_context:
                return fn(ctx, pre_process, post_process)
            if with_vp_stage:
                return fn(pre_process, post_process, vp_stage=ctx.virtual_pipeline_model_parallel_rank)
            return fn(pre_process, post_process)
        finally:
            global_vars._state.context = previous
    return builder


def _dataset_builder(fn):
    if fn is None:
        return None
    with_context = _takes_context(fn, 2)

    def builder(ctx, num_samples):
        previous = _entered(ctx)
        try:
            datasets = fn(ctx, num_samples) if with_context else fn(list(num_samples))
        finally:
            global_vars._state.context = previous
        # Megatron-LM's providers return (train, valid, test); the EOD id is the tokenizer's.
        if not with_context and isinstance(datasets, (tuple, list)) and len(datasets) == 3:
            datasets = (*datasets, global_vars.get_tokenizer().eod)
        return datasets
    return builder
