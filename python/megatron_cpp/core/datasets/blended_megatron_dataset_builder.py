"""megatron.core.datasets.blended_megatron_dataset_builder: BlendedMegatronDatasetBuilder."""
from ... import _C
from ...training import global_vars
from .gpt_dataset import GPTDataset, MockGPTDataset


def _data_path(blend):
    """A (prefixes, weights) blend as --data-path's words."""
    prefixes, weights = blend
    return list(prefixes) if weights is None else [str(x) for pair in zip(weights, prefixes) for x in pair]


class BlendedMegatronDatasetBuilder:
    """BlendedMegatronDatasetBuilder(cls, sizes, is_built_on_rank, config).build() -> (train, valid,
    test), as megatron-core's: GPTDataset over config.blend (weighted blends included) or
    config.blend_per_split, or MockGPTDataset. Every rank builds its datasets (the library's loop draws batches on every rank;
    group rank 0 writes the index caches first), so is_built_on_rank is not consulted."""

    def __init__(self, cls, sizes, is_built_on_rank, config):
        if not (isinstance(cls, type) and issubclass(cls, GPTDataset)):
            raise NotImplementedError(f"BlendedMegatronDatasetBuilder: dataset type {cls!r} is not implemented; "
                                      "GPTDataset and MockGPTDataset are")
        self.cls, self.sizes, self.is_built_on_rank, self.config = cls, list(sizes), is_built_on_rank, config

    def build(self):
        config = self.config
        self._check_flag_settings()
        if issubclass(self.cls, MockGPTDataset) or config.mock:
            tokenizer = config.tokenizer or global_vars.get_tokenizer()
            return _C.build_mock_gpt_datasets(tokenizer.vocab_size, tokenizer.eod, self.sizes, config.library_config)
        state = global_vars._state.parallel_state
        if config.blend is None:  # a blend per split
            paths = [None if b is None else _data_path(b) for b in config.blend_per_split]
            return _C.build_gpt_datasets_per_split_on_ranks(paths, self.sizes, config.library_config,
                                                            None if state is None else state.get_world_group(),
                                                            config.mid_level_dataset_surplus)
        data_path = _data_path(config.blend)
        if state is None:
            return _C.build_gpt_datasets(data_path, self.sizes, config.library_config, config.mid_level_dataset_surplus)
        return _C.build_gpt_datasets_on_ranks(data_path, self.sizes, config.library_config, state.get_world_group(),
                                              config.mid_level_dataset_surplus)

    def _check_flag_settings(self):
        # The loop builds batches with the run's flags: a config that says otherwise would be ignored.
        args = global_vars._state.args
        for key, value in self.config.flag_settings.items():
            if args is not None and bool(getattr(args, key)) != bool(value):
                raise ValueError(f"GPTDatasetConfig: {key}={value} but the run's --{key.replace('_', '-')} is "
                                 f"{getattr(args, key)}; batches follow the flags")
