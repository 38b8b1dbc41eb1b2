"""
megatron.training.training.pretrain in the three forms scripts call it, over one run of
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
from __future__ import annotations
from megatron_cpp import _C
from megatron_cpp import _training
from megatron_cpp.core.enums import ModelType
from megatron_cpp.training import global_vars
from megatron_cpp.training.arguments import parse_args
import inspect as inspect
__all__: list[str] = ['ModelType', 'global_vars', 'inspect', 'parse_args', 'pretrain']
def _accepts(fn, name):
    ...
def _bind(form, args, kwargs):
    ...
def _dataset_builder(fn):
    ...
def _entered(ctx):
    """
    Records the run's parallel state and device and the callback's context; returns the last one.
    """
def _explicit(args, model_builder = None, dataset_builder = None, forward_step = None, world = None):
    ...
def _explicit_form(args, model_builder = None, dataset_builder = None, forward_step = None, *, world = None):
    ...
def _megatron(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func, process_non_loss_data_func = None, extra_args_provider = None, args_defaults = None, **unused):
    ...
def _megatron_form(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func, process_non_loss_data_func = None, extra_args_provider = None, args_defaults = None, get_embedding_ranks = None, get_position_embedding_ranks = None, non_loss_data_func = None):
    ...
def _model_builder(fn):
    ...
def _positional(fn):
    """
    (names of fn's positional parameters, how many of them have no default).
    """
def _run(arguments, extra, model_builder, dataset_builder, forward_step, world):
    ...
def _seed(model_builder, dataset_builder, forward_step_func):
    ...
def _seed_form(model_builder, dataset_builder, forward_step_func):
    ...
def _takes_context(fn, context_arity):
    ...
def pretrain(*args, **kwargs):
    """
    Megatron-LM's pretrain(): builds the model, optimizer and datasets, trains, evaluates.
        Returns a TrainingResult (None for --help). See the module's docstring for the three forms.
    """
_FORMS: str = 'pretrain(args, model_builder=None, dataset_builder=None, forward_step=None, *, world=None); pretrain(model_builder, dataset_builder, forward_step_func); pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func, process_non_loss_data_func=None, extra_args_provider=None, args_defaults={})'
