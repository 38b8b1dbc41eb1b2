"""megatron.core.utils: what Megatron-LM's forward steps import from it, the same functions as
megatron_cpp.training.utils's."""
from ..training.utils import get_batch_on_this_cp_rank  # noqa: F401
