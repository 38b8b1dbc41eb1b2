"""
megatron.core.tensor_parallel: broadcast_data, and the tensor-parallel layers and mappings
of megatron_cpp under the same module path.
"""
from __future__ import annotations
from megatron_cpp._C import copy_to_tensor_model_parallel_region
from megatron_cpp._C import gather_from_sequence_parallel_region
from megatron_cpp._C import gather_from_tensor_model_parallel_region
from megatron_cpp._C import model_parallel_manual_seed
from megatron_cpp._C import reduce_from_tensor_model_parallel_region
from megatron_cpp._C import reduce_scatter_to_sequence_parallel_region
from megatron_cpp._C import scatter_to_sequence_parallel_region
from megatron_cpp._C import scatter_to_tensor_model_parallel_region
from megatron_cpp._C import vocab_parallel_cross_entropy
from megatron_cpp._modules import ColumnParallelLinear
from megatron_cpp._modules import RowParallelLinear
from megatron_cpp._modules import VocabParallelEmbedding
from megatron_cpp.training import global_vars
import torch as torch
__all__: list[str] = ['ColumnParallelLinear', 'RowParallelLinear', 'VocabParallelEmbedding', 'broadcast_data', 'copy_to_tensor_model_parallel_region', 'gather_from_sequence_parallel_region', 'gather_from_tensor_model_parallel_region', 'global_vars', 'model_parallel_manual_seed', 'reduce_from_tensor_model_parallel_region', 'reduce_scatter_to_sequence_parallel_region', 'scatter_to_sequence_parallel_region', 'scatter_to_tensor_model_parallel_region', 'torch', 'vocab_parallel_cross_entropy']
def broadcast_data(keys, data, datatype):
    """
    {key: tensor} of TP rank 0's `data` on every rank of its tensor-parallel group (Megatron-LM's
        broadcast_data): the sizes first, then the values flattened into one tensor of `datatype`.
        Other ranks may pass data=None. Tensors come back on the CPU.
    """
_MAX_DIMS: int = 8
