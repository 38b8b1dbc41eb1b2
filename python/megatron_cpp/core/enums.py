"""megatron.core.enums."""
import enum


class ModelType(enum.Enum):
    """What pretrain() builds: megatron_cpp trains decoder-only (GPT-style) models."""

    encoder_or_decoder = 1
    encoder_and_decoder = 2
