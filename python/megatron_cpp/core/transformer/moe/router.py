"""megatron.core.transformer.moe.router.TopKRouter."""
from ...._modules import TopKRouter  # noqa: F401
