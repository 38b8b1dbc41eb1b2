"""
megatron.core.enums.
"""
from __future__ import annotations
import enum as enum
import typing
__all__: list[str] = ['ModelType', 'enum']
class ModelType(enum.Enum):
    """
    What pretrain() builds: megatron_cpp trains decoder-only (GPT-style) models.
    """
    encoder_and_decoder: typing.ClassVar[ModelType]  # value = <ModelType.encoder_and_decoder: 2>
    encoder_or_decoder: typing.ClassVar[ModelType]  # value = <ModelType.encoder_or_decoder: 1>
