"""megatron.core.transformer.moe: the mixture-of-experts layer and its router (docs/moe.md)."""
from .moe_layer import MoELayer  # noqa: F401
from .router import TopKRouter  # noqa: F401
