"""
megatron.core.transformer.moe.moe_layer.MoELayer.
"""
from __future__ import annotations
from megatron_cpp._modules import MoELayer
__all__: list[str] = ['MoELayer']
