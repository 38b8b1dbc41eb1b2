"""megatron.core.transformer.moe.moe_layer.MoELayer."""
from ...._modules import MoELayer  # noqa: F401
