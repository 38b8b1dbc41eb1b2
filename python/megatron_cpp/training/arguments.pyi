"""
Megatron-LM's megatron.training.arguments: the flags of a run, from the command line, with an
extra_args_provider's own flags and a script's args_defaults.
"""
from __future__ import annotations
from megatron_cpp import _C
from megatron_cpp.training import global_vars
import argparse as argparse
import os as os
import sys as sys
__all__: list[str] = ['argparse', 'core_transformer_config_from_args', 'global_vars', 'os', 'parse_args', 'sys']
def _given(words, key):
    """
    Whether the command line sets `key` (either spelling, `--flag value` or `--flag=value`).
    """
def _words(key, value):
    ...
def core_transformer_config_from_args(args = None, config_class = None):
    """
    The TransformerConfig the run's flags describe, with this rank's TP group and RNG tracker
        (Megatron-LM's core_transformer_config_from_args). Called from model_builder, as there.
    """
def parse_args(extra_args_provider = None, args_defaults = None, argv = None, world_size = None):
    """
    (Arguments, {extra flag: value}) from argv (default sys.argv[1:]); None for --help.
    
        extra_args_provider(parser) adds flags to an argparse parser (Megatron-LM's hook); those
        flags are taken out before the rest is parsed, and come back as the extra dict.
        args_defaults {name: value} fills the flags the command line does not give.
        
    """
