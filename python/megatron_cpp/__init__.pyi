"""
megatron-cpp from Python: Megatron-style GPT pretraining on LibTorch.

Megatron-LM's pieces under their Megatron names: launcher and parallel state
(init_distributed, ParallelState), TransformerConfig, GPTModel and the tensor-parallel layers
(torch.nn.Modules over C++ modules), datasets (IndexedDataset and its builder, GPTDataset,
samplers), tokenizers, parse_arguments, checkpoint files, and pretrain() with model_builder, dataset_builder and
forward_step written in Python or taken from the library. torch tensors cross into C++ and back
without copies; the library's errors arrive as Python exceptions with its one-line message.

`pip install .` installs it; a CMake build (MEGATRON_WITH_PYTHON) puts it in build/python.
It uses the LibTorch of the torch it was built against: import torch first (done here).
"""
from __future__ import annotations
from . import _C
from . import _modules
from . import _training
from . import core
from . import training
from megatron_cpp._C import Activation
from megatron_cpp._C import Arguments
from megatron_cpp._C import BatchIterator
from megatron_cpp._C import BatchOptions
from megatron_cpp._C import BatchSampler
from megatron_cpp._C import BlendedDataset
from megatron_cpp._C import BpeTrainer
from megatron_cpp._C import DType
from megatron_cpp._C import DataIterator
from megatron_cpp._C import Datasets
from megatron_cpp._C import EvaluationRecord
from megatron_cpp._C import GPT2BPETokenizer
from megatron_cpp._C import GPTDataset
from megatron_cpp._C import GPTDatasetConfig
from megatron_cpp._C import HuggingFaceTokenizer
from megatron_cpp._C import IndexedDataset
from megatron_cpp._C import IndexedDatasetBuilder
from megatron_cpp._C import IterationRecord
from megatron_cpp._C import Launcher
from megatron_cpp._C import LauncherEnv
from megatron_cpp._C import MegatronDataset
from megatron_cpp._C import MegatronPretrainingRandomSampler
from megatron_cpp._C import MegatronPretrainingSampler
from megatron_cpp._C import Normalization
from megatron_cpp._C import NullTokenizer
from megatron_cpp._C import ParallelState
from megatron_cpp._C import ParamInit
from megatron_cpp._C import ProcessGroup
from megatron_cpp._C import RecomputeGranularity
from megatron_cpp._C import RecomputeMethod
from megatron_cpp._C import ReduceOp
from megatron_cpp._C import RngTracker
from megatron_cpp._C import SentencePieceTokenizer
from megatron_cpp._C import ShardLayout
from megatron_cpp._C import ShardedParameter
from megatron_cpp._C import Split
from megatron_cpp._C import TikTokenizer
from megatron_cpp._C import Tokenizer
from megatron_cpp._C import TrainingContext
from megatron_cpp._C import TrainingResult
from megatron_cpp._C import TransformerConfig
from megatron_cpp._C import abort_job
from megatron_cpp._C import arguments_help
from megatron_cpp._C import build_batch
from megatron_cpp._C import build_gpt_datasets
from megatron_cpp._C import build_gpt_datasets_on_ranks
from megatron_cpp._C import build_mock_gpt_datasets
from megatron_cpp._C import build_tokenizer
from megatron_cpp._C import check_args
from megatron_cpp._C import checkpoint_arguments
from megatron_cpp._C import convert_checkpoint
from megatron_cpp._C import copy_to_tensor_model_parallel_region
from megatron_cpp._C import core_transformer_config_from_args
from megatron_cpp._C import cpu_allocator_cache_stats
from megatron_cpp._C import empty_cpu_allocator_cache
from megatron_cpp._C import enable_cpu_allocator_cache
from megatron_cpp._C import gather_from_sequence_parallel_region
from megatron_cpp._C import gather_from_tensor_model_parallel_region
from megatron_cpp._C import gpt_loss_func
from megatron_cpp._C import host_readback_count
from megatron_cpp._C import indexed_dataset_exists
from megatron_cpp._C import init_distributed
from megatron_cpp._C import init_logging
from megatron_cpp._C import iteration_dir_name
from megatron_cpp._C import list_iterations
from megatron_cpp._C import model_parallel_manual_seed
from megatron_cpp._C import num_floating_point_operations
from megatron_cpp._C import optimal_dtype
from megatron_cpp._C import parse_and_normalize_split
from megatron_cpp._C import parse_arguments
from megatron_cpp._C import parse_data_path
from megatron_cpp._C import rank_dir_name
from megatron_cpp._C import rank_layout
from megatron_cpp._C import read_checkpoint_file
from megatron_cpp._C import read_tracker
from megatron_cpp._C import reduce_from_tensor_model_parallel_region
from megatron_cpp._C import reduce_scatter_to_sequence_parallel_region
from megatron_cpp._C import scatter_to_sequence_parallel_region
from megatron_cpp._C import scatter_to_tensor_model_parallel_region
from megatron_cpp._C import train_valid_test_num_samples
from megatron_cpp._C import vocab_parallel_cross_entropy
from megatron_cpp._C import vocab_size_with_padding
from megatron_cpp._C import warm_up_cpu_math
from megatron_cpp._modules import ColumnParallelLinear
from megatron_cpp._modules import CppModule
from megatron_cpp._modules import GPTModel
from megatron_cpp._modules import RowParallelLinear
from megatron_cpp._modules import VocabParallelEmbedding
from megatron_cpp.training.training import pretrain
import torch as torch
__all__: list[str] = ['Activation', 'Arguments', 'BatchIterator', 'BatchOptions', 'BatchSampler', 'BlendedDataset', 'BpeTrainer', 'ColumnParallelLinear', 'CppModule', 'DType', 'DataIterator', 'Datasets', 'EvaluationRecord', 'GPT2BPETokenizer', 'GPTDataset', 'GPTDatasetConfig', 'GPTModel', 'HuggingFaceTokenizer', 'IndexedDataset', 'IndexedDatasetBuilder', 'IterationRecord', 'Launcher', 'LauncherEnv', 'MegatronDataset', 'MegatronPretrainingRandomSampler', 'MegatronPretrainingSampler', 'Normalization', 'NullTokenizer', 'ParallelState', 'ParamInit', 'ProcessGroup', 'RecomputeGranularity', 'RecomputeMethod', 'ReduceOp', 'RngTracker', 'RowParallelLinear', 'SentencePieceTokenizer', 'ShardLayout', 'ShardedParameter', 'Split', 'TikTokenizer', 'Tokenizer', 'TrainingContext', 'TrainingResult', 'TransformerConfig', 'VocabParallelEmbedding', 'abort_job', 'arguments_help', 'build_batch', 'build_gpt_datasets', 'build_gpt_datasets_on_ranks', 'build_mock_gpt_datasets', 'build_tokenizer', 'check_args', 'checkpoint_arguments', 'convert_checkpoint', 'copy_to_tensor_model_parallel_region', 'core', 'core_transformer_config_from_args', 'cpu_allocator_cache_stats', 'empty_cpu_allocator_cache', 'enable_cpu_allocator_cache', 'gather_from_sequence_parallel_region', 'gather_from_tensor_model_parallel_region', 'gpt_loss_func', 'host_readback_count', 'indexed_dataset_exists', 'init_distributed', 'init_logging', 'iteration_dir_name', 'list_iterations', 'model_parallel_manual_seed', 'num_floating_point_operations', 'optimal_dtype', 'parse_and_normalize_split', 'parse_arguments', 'parse_data_path', 'pretrain', 'rank_dir_name', 'rank_layout', 'read_checkpoint_file', 'read_tracker', 'reduce_from_tensor_model_parallel_region', 'reduce_scatter_to_sequence_parallel_region', 'scatter_to_sequence_parallel_region', 'scatter_to_tensor_model_parallel_region', 'torch', 'torch_version', 'train_valid_test_num_samples', 'training', 'vocab_parallel_cross_entropy', 'vocab_size_with_padding', 'warm_up_cpu_math']
__version__: str = '0.1.0'
torch_version: str = '2.11.0+cu130'
