"""
megatron.core.transformer: TransformerConfig and the moe subpackage under the same module path.
"""
from __future__ import annotations
from . import moe
from megatron_cpp._C import TransformerConfig
__all__: list[str] = ['TransformerConfig', 'moe']
