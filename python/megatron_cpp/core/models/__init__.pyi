"""
megatron.core.models.
"""
from __future__ import annotations
from . import gpt
__all__: list[str] = ['gpt']
