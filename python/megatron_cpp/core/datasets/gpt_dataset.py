"""megatron.core.datasets.gpt_dataset: GPTDatasetConfig with megatron-core's keywords, and the
dataset types BlendedMegatronDatasetBuilder builds (GPTDataset is the library's own class)."""
from ... import _C
from ..._C import GPTDataset  # noqa: F401

# megatron-core's keywords that the library's GPTDatasetConfig holds under the same names.
_LIBRARY_FIELDS = ("random_seed", "sequence_length", "split", "path_to_cache", "add_extra_token_to_sequence",
                   "drop_last_partial_validation_sequence", "mmap_bin_files")
# Keywords the library's batches take from the flags instead: given, they must agree with them.
_FROM_FLAGS = ("reset_position_ids", "reset_attention_mask", "eod_mask_loss")
# Keywords that change nothing here (builder threads, the tokenizer, which the builder takes from
# the flags like everything else).
_NO_EFFECT = ("tokenizer", "num_dataset_builder_threads", "create_attention_mask",
              "object_storage_cache_path", "fast_cache_load", "s3_cache_path", "multiple_validation_sets",
              "full_validation", "context_parallel_size", "sequence_parallel_size", "hybrid_context_parallel",
              "mid_level_dataset_surplus", "allow_ambiguous_pad_tokens", "goldfish_loss", "goldfish_k",
              "goldfish_h")


class GPTDatasetConfig:
    """megatron-core's GPTDatasetConfig(random_seed, sequence_length, blend=None, blend_per_split=None,
    split=None, path_to_cache=None, tokenizer=None, reset_position_ids=..., ...): what
    BlendedMegatronDatasetBuilder needs to build the library's GPT datasets."""

    def __init__(self, random_seed, sequence_length, blend=None, blend_per_split=None, split=None,
                 path_to_cache=None, **kwargs):
        unknown = sorted(set(kwargs) - set(_LIBRARY_FIELDS) - set(_FROM_FLAGS) - set(_NO_EFFECT))
        if unknown:
            raise TypeError(f"GPTDatasetConfig: unknown keyword(s) {', '.join(unknown)}")
        if blend_per_split is not None and all(b is None for b in blend_per_split):
            blend_per_split = None  # megatron-core's [None, None, None]: no per-split data
        if blend_per_split is not None and blend is not None:
            raise ValueError("GPTDatasetConfig: give blend (with a split) or blend_per_split, not both")
        if blend_per_split is not None:
            split = None  # each split is its blend's whole documents (Megatron-LM's args leave --split unset)
        if blend is not None and split is None:
            raise ValueError("GPTDatasetConfig: a blend needs a split (e.g. '969,30,1')")
        self.blend = blend
        self.blend_per_split = blend_per_split
        self.tokenizer = kwargs.get("tokenizer")
        self.mid_level_dataset_surplus = kwargs.get("mid_level_dataset_surplus", 0.005)
        self.flag_settings = {k: kwargs[k] for k in _FROM_FLAGS if k in kwargs}
        fields = dict(random_seed=random_seed, sequence_length=sequence_length,
                      path_to_cache=path_to_cache or "", **{k: kwargs[k] for k in _LIBRARY_FIELDS if k in kwargs})
        if split is not None:
            fields["split"] = split
        self.library_config = _C.GPTDatasetConfig(**fields)

    @property
    def mock(self):
        """No blend: the builder makes mock datasets (as megatron-core's config.mock)."""
        return self.blend is None and self.blend_per_split is None

    def __getattr__(self, name):  # random_seed, sequence_length, split, path_to_cache, ...
        return getattr(self.__dict__["library_config"], name)


class MockGPTDataset(GPTDataset):
    """megatron-core's MockGPTDataset as the dataset type of BlendedMegatronDatasetBuilder: GPT
    samples over synthetic documents (what --mock-data trains on). The builder makes them."""
