"""
megatron.core.transformer.moe: the mixture-of-experts layer and its router (docs/moe.md).
"""
from __future__ import annotations
from . import moe_layer
from . import router
from megatron_cpp._modules import MoELayer
from megatron_cpp._modules import TopKRouter
__all__: list[str] = ['MoELayer', 'TopKRouter', 'moe_layer', 'router']
