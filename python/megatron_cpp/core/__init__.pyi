"""
Megatron-LM's megatron.core names over the megatron_cpp bindings (parallel_state, enums,
models.gpt, datasets, transformer.moe, utils), so that a script moves by changing its imports.
"""
from __future__ import annotations
from . import datasets
from . import enums
from . import models
from . import parallel_state
from . import tensor_parallel
from . import transformer
from . import utils
__all__: list[str] = ['datasets', 'enums', 'models', 'parallel_state', 'tensor_parallel', 'transformer', 'utils']
