"""torch.nn.Module faces of the library's C++ modules (GPTModel, the tensor-parallel layers).

A CppModule's parameters, buffers and submodules are the C++ module's own tensors and modules,
not copies: parameters(), named_parameters(), state_dict(), load_state_dict(), to(), train(),
zero_grad() and torch.optim behave as for any torch module, and what C++ code such as pretrain()
does to the tensors is what Python sees. forward() runs in C++, so hooks registered on
submodules do not fire (hooks on the module called do).
"""
from itertools import chain

import torch

from . import _C


class CppModule(torch.nn.Module):
    """A torch.nn.Module over a C++ module of the library, kept as ``cpp_module``."""

    _cpp_class = None  # the pybind class a subclass constructs

    def __init__(self, *args, **kwargs):
        if self._cpp_class is None:
            raise TypeError("CppModule wraps an existing C++ module: use CppModule.from_cpp(module)")
        self._attach(self._cpp_class(*args, **kwargs))

    @classmethod
    def from_cpp(cls, cpp_module):
        """Wraps an existing C++ module (no copy), as its own wrapper class when there is one."""
        if not isinstance(cpp_module, torch._C.cpp.nn.Module):
            raise TypeError(f"expected a C++ module of megatron_cpp, found {type(cpp_module).__qualname__}")
        wrapper = cls
        if cls is CppModule:
            wrapper = _WRAPPERS.get(type(cpp_module), _CppModuleList if _is_module_list(cpp_module) else CppModule)
        module = wrapper.__new__(wrapper)
        module._attach(cpp_module)
        return module

    def _attach(self, cpp_module):
        # Set before Module.__init__, which assigns `training` (a property over the C++ flag).
        object.__setattr__(self, "cpp_module", cpp_module)
        torch.nn.Module.__init__(self)
        for name, tensor in cpp_module._parameters.items():
            self._parameters[name] = tensor
        for name, tensor in cpp_module._buffers.items():
            self._buffers[name] = tensor
        for name, child in cpp_module._modules.items():
            self._modules[name] = CppModule.from_cpp(child)

    @property
    def training(self):
        return self.cpp_module.training

    @training.setter
    def training(self, mode):
        self.cpp_module.train(bool(mode))

    def _apply(self, fn, recurse=True):
        # In place on the C++ tensors, as torch::nn::Module::to does, so C++ and Python keep
        # sharing the same tensor objects.
        for tensor in chain(self.parameters(), self.buffers()):
            tensor.data = fn(tensor.data)
            if tensor._grad is not None:
                tensor._grad.data = fn(tensor._grad.data)
        return self

    def _get_name(self):
        if type(self) is not CppModule:
            return type(self).__name__
        name = repr(self.cpp_module).split("::")[-1]  # torch binds repr() to the C++ type name
        return name[:-4] if name.endswith("Impl") else name

    def __getattr__(self, name):
        # What the torch side does not know (config, sharded_parameters(), ...) comes from C++.
        try:
            return super().__getattr__(name)
        except AttributeError:
            cpp_module = self.__dict__.get("cpp_module")
            if cpp_module is None or name.startswith("_") or not hasattr(cpp_module, name):
                raise
            return getattr(cpp_module, name)


def _is_module_list(cpp_module):
    return repr(cpp_module) in ("torch::nn::ModuleList", "torch::nn::ModuleListImpl")


class _CppModuleList(CppModule):
    """A torch::nn::ModuleList, indexable and iterable like torch.nn.ModuleList."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        return list(self._modules.values())[idx]

    def _get_name(self):
        return "ModuleList"


class GPTModel(CppModule):
    """Megatron's GPTModel: GPTModel(config, vocab_size, max_sequence_length, *, pre_process=True,
    post_process=True, ...). Embedding on the first stage, transformer block, final norm and
    output layer on the last; parameters named as megatron/core's state dict and initialised
    from `seed` whatever the TP/PP layout.
    """

    _cpp_class = _C.GPTModel

    def forward(self, input_ids, position_ids=None, attention_mask=None, labels=None):
        """input_ids, position_ids, labels [b, s] int64; attention_mask None (causal) or bool
        [b or 1, 1, s, s], True = masked out. Returns the per-token loss [b, s] (fp32) when
        labels are given on the last stage, else logits [b, s, V] there, else the hidden states
        [s, b, h] for the next stage."""
        return self.cpp_module.forward(input_ids, position_ids, attention_mask, labels)


class ColumnParallelLinear(CppModule):
    """Y = XA + b with A split by columns over the TP group (Megatron's ColumnParallelLinear)."""

    _cpp_class = _C.ColumnParallelLinear

    def forward(self, input, weight=None):
        return self.cpp_module.forward(input, weight)


class RowParallelLinear(CppModule):
    """Y = XA + b with A split by rows over the TP group (Megatron's RowParallelLinear)."""

    _cpp_class = _C.RowParallelLinear

    def forward(self, input):
        return self.cpp_module.forward(input)


class VocabParallelEmbedding(CppModule):
    """Embedding table split along the vocabulary over the TP group."""

    _cpp_class = _C.VocabParallelEmbedding

    def forward(self, input):
        return self.cpp_module.forward(input)


class TopKRouter(CppModule):
    """Megatron-Core's TopKRouter(config): forward(hidden [s, b, h]) -> (probs, routing_map)."""

    _cpp_class = _C.TopKRouter

    def forward(self, hidden):
        return self.cpp_module.forward(hidden)


class MoELayer(CppModule):
    """Megatron-Core's MoELayer(config): forward(hidden [s, b, h]) -> [s, b, h] (docs/moe.md)."""

    _cpp_class = _C.MoELayer

    def forward(self, hidden):
        return self.cpp_module.forward(hidden)


_WRAPPERS = {
    _C.GPTModel: GPTModel,
    _C.TopKRouter: TopKRouter,
    _C.MoELayer: MoELayer,
    _C.ColumnParallelLinear: ColumnParallelLinear,
    _C.RowParallelLinear: RowParallelLinear,
    _C.VocabParallelEmbedding: VocabParallelEmbedding,
}
