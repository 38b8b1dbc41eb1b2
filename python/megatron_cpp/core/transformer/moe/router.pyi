"""
megatron.core.transformer.moe.router.TopKRouter.
"""
from __future__ import annotations
from megatron_cpp._modules import TopKRouter
__all__: list[str] = ['TopKRouter']
