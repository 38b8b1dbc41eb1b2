"""megatron.core.transformer: TransformerConfig and the moe subpackage under the same module path."""
from ..._C import TransformerConfig  # noqa: F401

from . import moe  # noqa: F401
