"""megatron.core.tensor_parallel: broadcast_data, and the tensor-parallel layers and mappings
of megatron_cpp under the same module path."""
import torch

from ..._C import (  # noqa: F401
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    model_parallel_manual_seed,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
    vocab_parallel_cross_entropy,
)
from ..._modules import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding  # noqa: F401
from ...training import global_vars

_MAX_DIMS = 8  # sizes travel as one fixed-length int64 row per key


def broadcast_data(keys, data, datatype):
    """{key: tensor} of TP rank 0's `data` on every rank of its tensor-parallel group (Megatron-LM's
    broadcast_data): the sizes first, then the values flattened into one tensor of `datatype`.
    Other ranks may pass data=None. Tensors come back on the CPU."""
    ps = global_vars.get_parallel_state()
    group = ps.get_tensor_model_parallel_group()
    src = group.rank() == 0
    sizes = torch.zeros(len(keys), _MAX_DIMS + 1, dtype=torch.int64)
    if src:
        for i, key in enumerate(keys):
            tensor = data[key]
            if tensor.dtype != datatype:
                raise TypeError(f"[broadcast_data] '{key}' has dtype {tensor.dtype}, expected {datatype}")
            if tensor.dim() > _MAX_DIMS:
                raise ValueError(f"[broadcast_data] '{key}' has {tensor.dim()} dimensions, at most {_MAX_DIMS}")
            sizes[i, 0] = tensor.dim()
            sizes[i, 1:tensor.dim() + 1] = torch.tensor(tensor.shape, dtype=torch.int64)
    group.broadcast(sizes, 0)
    shapes = [tuple(sizes[i, 1:int(sizes[i, 0]) + 1].tolist()) for i in range(len(keys))]
    total = sum(int(torch.Size(shape).numel()) for shape in shapes)
    if src:
        flat = torch.cat([data[key].detach().cpu().contiguous().view(-1) for key in keys]) if keys else \
            torch.empty(0, dtype=datatype)
    else:
        flat = torch.empty(total, dtype=datatype)
    group.broadcast(flat, 0)
    out, offset = {}, 0
    for key, shape in zip(keys, shapes):
        numel = int(torch.Size(shape).numel())
        out[key] = flat.narrow(0, offset, numel).view(shape)
        offset += numel
    return out

