"""Megatron-LM's megatron.core names over the megatron_cpp bindings (parallel_state, enums,
models.gpt, datasets, transformer.moe, utils), so that a script moves by changing its imports."""
from . import datasets, enums, models, parallel_state, tensor_parallel, transformer, utils  # noqa: F401
