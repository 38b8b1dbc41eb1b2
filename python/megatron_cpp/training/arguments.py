"""Megatron-LM's megatron.training.arguments: the flags of a run, from the command line, with an
extra_args_provider's own flags and a script's args_defaults."""
import argparse
import os
import sys

from .. import _C
from . import global_vars


def _given(words, key):
    """Whether the command line sets `key` (either spelling, `--flag value` or `--flag=value`)."""
    spellings = {"--" + key.replace("_", "-"), "--" + key.replace("-", "_")}
    return any(w in spellings or w.split("=", 1)[0] in spellings for w in words if w.startswith("--"))


def _words(key, value):
    flag = "--" + key.replace("_", "-")
    if value is True:
        return [flag]
    if value is False or value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [flag] + [str(v) for v in value]
    return [flag, str(value)]


def parse_args(extra_args_provider=None, args_defaults=None, argv=None, world_size=None):
    """(Arguments, {extra flag: value}) from argv (default sys.argv[1:]); None for --help.

    extra_args_provider(parser) adds flags to an argparse parser (Megatron-LM's hook); those
    flags are taken out before the rest is parsed, and come back as the extra dict.
    args_defaults {name: value} fills the flags the command line does not give.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    extra = {}
    if extra_args_provider is not None:
        parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        parser = extra_args_provider(parser) or parser
        namespace, words = parser.parse_known_args(words)
        extra = vars(namespace)
    for key, value in (args_defaults or {}).items():
        if key in extra:
            if extra[key] is None:
                extra[key] = value
        elif not _given(words, key):
            words += _words(key, value)
    if world_size is None:
        world_size = _C.LauncherEnv.from_environment().world_size
    arguments = _C.parse_arguments(words, world_size=world_size, program=os.path.basename(sys.argv[0]) or "python")
    return None if arguments is None else (arguments, extra)


def core_transformer_config_from_args(args=None, config_class=None):
    """The TransformerConfig the run's flags describe, with this rank's TP group and RNG tracker
    (Megatron-LM's core_transformer_config_from_args). Called from model_builder, as there."""
    return _C.core_transformer_config_from_args(global_vars.get_context())
