"""
torch.nn.Module faces of the library's C++ modules (GPTModel, the tensor-parallel layers).

A CppModule's parameters, buffers and submodules are the C++ module's own tensors and modules,
not copies: parameters(), named_parameters(), state_dict(), load_state_dict(), to(), train(),
zero_grad() and torch.optim behave as for any torch module, and what C++ code such as pretrain()
does to the tensors is what Python sees. forward() runs in C++, so hooks registered on
submodules do not fire (hooks on the module called do).
"""
from __future__ import annotations
from itertools import chain
from megatron_cpp import _C
import megatron_cpp._C
import torch as torch
__all__: list[str] = ['ColumnParallelLinear', 'CppModule', 'GPTModel', 'MoELayer', 'RowParallelLinear', 'TopKRouter', 'VocabParallelEmbedding', 'chain', 'torch']
class ColumnParallelLinear(CppModule):
    """
    Y = XA + b with A split by columns over the TP group (Megatron's ColumnParallelLinear).
    """
    _cpp_class = megatron_cpp._C.ColumnParallelLinear
    def forward(self, input, weight = None):
        ...
class CppModule(torch.nn.modules.module.Module):
    """
    A torch.nn.Module over a C++ module of the library, kept as ``cpp_module``.
    """
    _cpp_class = None
    training = ...
    @classmethod
    def from_cpp(cls, cpp_module):
        """
        Wraps an existing C++ module (no copy), as its own wrapper class when there is one.
        """
    def __getattr__(self, name):
        ...
    def __init__(self, *args, **kwargs):
        ...
    def _apply(self, fn, recurse = True):
        ...
    def _attach(self, cpp_module):
        ...
    def _get_name(self):
        ...
class GPTModel(CppModule):
    """
    Megatron's GPTModel: GPTModel(config, vocab_size, max_sequence_length, *, pre_process=True,
        post_process=True, ...). Embedding on the first stage, transformer block, final norm and
        output layer on the last; parameters named as megatron/core's state dict and initialised
        from `seed` whatever the TP/PP layout.
        
    """
    _cpp_class = megatron_cpp._C.GPTModel
    def forward(self, input_ids, position_ids = None, attention_mask = None, labels = None):
        """
        input_ids, position_ids, labels [b, s] int64; attention_mask None (causal) or bool
                [b or 1, 1, s, s], True = masked out. Returns the per-token loss [b, s] (fp32) when
                labels are given on the last stage, else logits [b, s, V] there, else the hidden states
                [s, b, h] for the next stage.
        """
class MoELayer(CppModule):
    """
    Megatron-Core's MoELayer(config): forward(hidden [s, b, h]) -> [s, b, h] (docs/moe.md).
    """
    _cpp_class = megatron_cpp._C.MoELayer
    def forward(self, hidden):
        ...
class RowParallelLinear(CppModule):
    """
    Y = XA + b with A split by rows over the TP group (Megatron's RowParallelLinear).
    """
    _cpp_class = megatron_cpp._C.RowParallelLinear
    def forward(self, input):
        ...
class TopKRouter(CppModule):
    """
    Megatron-Core's TopKRouter(config): forward(hidden [s, b, h]) -> (probs, routing_map).
    """
    _cpp_class = megatron_cpp._C.TopKRouter
    def forward(self, hidden):
        ...
class VocabParallelEmbedding(CppModule):
    """
    Embedding table split along the vocabulary over the TP group.
    """
    _cpp_class = megatron_cpp._C.VocabParallelEmbedding
    def forward(self, input):
        ...
class _CppModuleList(CppModule):
    """
    A torch::nn::ModuleList, indexable and iterable like torch.nn.ModuleList.
    """
    def __getitem__(self, idx):
        ...
    def __iter__(self):
        ...
    def __len__(self):
        ...
    def _get_name(self):
        ...
def _is_module_list(cpp_module):
    ...
_WRAPPERS: dict = {megatron_cpp._C.GPTModel: GPTModel, megatron_cpp._C.TopKRouter: TopKRouter, megatron_cpp._C.MoELayer: MoELayer, megatron_cpp._C.ColumnParallelLinear: ColumnParallelLinear, megatron_cpp._C.RowParallelLinear: RowParallelLinear, megatron_cpp._C.VocabParallelEmbedding: VocabParallelEmbedding}
