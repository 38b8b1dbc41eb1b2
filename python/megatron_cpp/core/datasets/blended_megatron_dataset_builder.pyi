"""
megatron.core.datasets.blended_megatron_dataset_builder: BlendedMegatronDatasetBuilder.
"""
from __future__ import annotations
from megatron_cpp import _C
from megatron_cpp._C import GPTDataset
from megatron_cpp.core.datasets.gpt_dataset import MockGPTDataset
from megatron_cpp.training import global_vars
__all__: list[str] = ['BlendedMegatronDatasetBuilder', 'GPTDataset', 'MockGPTDataset', 'global_vars']
class BlendedMegatronDatasetBuilder:
    """
    BlendedMegatronDatasetBuilder(cls, sizes, is_built_on_rank, config).build() -> (train, valid,
        test), as megatron-core's: GPTDataset over config.blend (weighted blends included) or
        config.blend_per_split, or MockGPTDataset. Every rank builds its datasets (the library's loop draws batches on every rank;
        group rank 0 writes the index caches first), so is_built_on_rank is not consulted.
    """
    def __init__(self, cls, sizes, is_built_on_rank, config):
        ...
    def _check_flag_settings(self):
        ...
    def build(self):
        ...
def _data_path(blend):
    """
    A (prefixes, weights) blend as --data-path's words.
    """
