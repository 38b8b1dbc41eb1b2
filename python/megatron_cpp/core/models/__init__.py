"""megatron.core.models."""
from . import gpt  # noqa: F401
