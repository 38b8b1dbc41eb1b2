"""pretrain() from Python: callbacks written in Python or the library's GPT ones."""
import torch

from . import _C
from ._modules import CppModule


def parse(args, world):
    """args as Arguments (validated for the world's size); None for --help."""
    if isinstance(args, _C.Arguments):
        return args
    return _C.parse_arguments(args, world_size=None if world is None else world.size())


def pretrain(args, model_builder=None, dataset_builder=None, forward_step=None, *, world=None):
    """Megatron-LM's pretrain(): builds the model, optimizer and datasets, trains, evaluates.

    args: Arguments, a list of command-line words or a dict of flags (see parse_arguments).
    Callbacks (each may be None for the library's GPT one, as examples/pretrain_gpt.cpp uses):
      model_builder(ctx, pre_process, post_process) -> a megatron_cpp module (GPTModel)
      dataset_builder(ctx, [train, valid, test sample counts]) -> Datasets or (train, valid, test)
      forward_step(data_iterator, model) -> (output_tensor, loss_func), with
      loss_func(output_tensor) -> (loss, {metric name: tensor}), the loss being the mean over
      this micro-batch's tokens.
    ctx is a TrainingContext; forward_step gets the very module model_builder returned.
    world: a ProcessGroup (default: init_distributed from the launcher's environment).

    Runs with the GIL released; Python callbacks take it back. An exception raised in a callback
    ends the run and propagates unchanged. Returns a TrainingResult (None for --help).
    """
    args = parse(args, world)
    if args is None:  # --help was printed
        return None
    modules = {}  # id(C++ module) -> the torch.nn.Module forward_step receives

    cpp_model_builder = None
    if model_builder is not None:
        def cpp_model_builder(ctx, pre_process, post_process):
            model = model_builder(ctx, pre_process, post_process)
            cpp = model.cpp_module if isinstance(model, CppModule) else model
            if not isinstance(cpp, torch._C.cpp.nn.Module):
                raise TypeError("[pretrain] model_builder must return a megatron_cpp module (e.g. megatron_cpp.GPTModel), "
                                f"found {type(model).__qualname__}")
            modules[id(cpp)] = model if isinstance(model, CppModule) else CppModule.from_cpp(cpp)
            return cpp

    cpp_dataset_builder = None
    if dataset_builder is not None:
        def cpp_dataset_builder(ctx, num_samples):
            datasets = dataset_builder(ctx, num_samples)
            if isinstance(datasets, (tuple, list)):
                if len(datasets) not in (3, 4):
                    raise TypeError("[pretrain] dataset_builder must return Datasets or (train, valid, test[, eod_token]), "
                                    f"found a sequence of {len(datasets)}")
                datasets = _C.Datasets(*datasets)
            if not isinstance(datasets, _C.Datasets):
                raise TypeError("[pretrain] dataset_builder must return megatron_cpp.Datasets or (train, valid, test[, "
                                f"eod_token]), found {type(datasets).__qualname__}")
            return datasets

    cpp_forward_step = None
    if forward_step is not None:
        def cpp_forward_step(data_iterator, cpp_model):
            model = modules.get(id(cpp_model))
            if model is None:
                model = modules[id(cpp_model)] = CppModule.from_cpp(cpp_model)
            return forward_step(data_iterator, model)

    return _C._pretrain(args, cpp_model_builder, cpp_dataset_builder, cpp_forward_step, world)
