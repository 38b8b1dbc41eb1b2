"""
megatron.core.datasets: the dataset builder, GPT dataset types and blend helpers of Megatron-LM
under the same module paths, over the library's datasets.
"""
from __future__ import annotations
from . import blended_megatron_dataset_builder
from . import gpt_dataset
from . import utils
__all__: list[str] = ['blended_megatron_dataset_builder', 'gpt_dataset', 'utils']
