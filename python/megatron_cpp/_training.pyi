"""
pretrain() from Python: callbacks written in Python or the library's GPT ones.
"""
from __future__ import annotations
from megatron_cpp import _C
from megatron_cpp._modules import CppModule
import torch as torch
__all__: list[str] = ['CppModule', 'parse', 'pretrain', 'torch']
def parse(args, world):
    """
    args as Arguments (validated for the world's size); None for --help.
    """
def pretrain(args, model_builder = None, dataset_builder = None, forward_step = None, *, world = None):
    """
    Megatron-LM's pretrain(): builds the model, optimizer and datasets, trains, evaluates.
    
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
