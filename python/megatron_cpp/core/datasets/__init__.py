"""megatron.core.datasets: the dataset builder, GPT dataset types and blend helpers of Megatron-LM
under the same module paths, over the library's datasets."""
from . import blended_megatron_dataset_builder, gpt_dataset, utils  # noqa: F401
