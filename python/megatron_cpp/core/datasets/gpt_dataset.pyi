"""
megatron.core.datasets.gpt_dataset: GPTDatasetConfig with megatron-core's keywords, and the
dataset types BlendedMegatronDatasetBuilder builds (GPTDataset is the library's own class).
"""
from __future__ import annotations
from megatron_cpp import _C
from megatron_cpp._C import GPTDataset
import megatron_cpp._C
__all__: list[str] = ['GPTDataset', 'GPTDatasetConfig', 'MockGPTDataset']
class GPTDatasetConfig:
    """
    megatron-core's GPTDatasetConfig(random_seed, sequence_length, blend=None, blend_per_split=None,
        split=None, path_to_cache=None, tokenizer=None, reset_position_ids=..., ...): what
        BlendedMegatronDatasetBuilder needs to build the library's GPT datasets.
    """
    def __getattr__(self, name):
        ...
    def __init__(self, random_seed, sequence_length, blend = None, blend_per_split = None, split = None, path_to_cache = None, **kwargs):
        ...
    @property
    def mock(self):
        """
        No blend: the builder makes mock datasets (as megatron-core's config.mock).
        """
class MockGPTDataset(megatron_cpp._C.GPTDataset):
    """
    megatron-core's MockGPTDataset as the dataset type of BlendedMegatronDatasetBuilder: GPT
        samples over synthetic documents (what --mock-data trains on). The builder makes them.
    """
_FROM_FLAGS: tuple = ('reset_position_ids', 'reset_attention_mask', 'eod_mask_loss')
_LIBRARY_FIELDS: tuple = ('random_seed', 'sequence_length', 'split', 'path_to_cache', 'add_extra_token_to_sequence', 'drop_last_partial_validation_sequence', 'mmap_bin_files')
_NO_EFFECT: tuple = ('tokenizer', 'num_dataset_builder_threads', 'create_attention_mask', 'object_storage_cache_path', 'fast_cache_load', 's3_cache_path', 'multiple_validation_sets', 'full_validation', 'context_parallel_size', 'sequence_parallel_size', 'hybrid_context_parallel', 'mid_level_dataset_surplus', 'allow_ambiguous_pad_tokens', 'goldfish_loss', 'goldfish_k', 'goldfish_h')
