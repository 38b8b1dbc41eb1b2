"""megatron.core.parallel_state: the process groups and ranks of the run in progress, as
module functions (Megatron-LM's names), answered by its ParallelState. Valid inside pretrain()
from the first model_builder or dataset_builder call on."""
from ..training import global_vars

# ParallelState methods taken over unchanged, by name.
_FORWARDED = [
    "get_world_group", "get_tensor_model_parallel_group", "get_pipeline_model_parallel_group", "get_data_parallel_group",
    "get_context_parallel_group", "get_model_parallel_group", "get_embedding_group", "get_position_embedding_group",
    "get_tensor_model_parallel_world_size", "get_tensor_model_parallel_rank",
    "get_pipeline_model_parallel_world_size", "get_pipeline_model_parallel_rank",
    "get_data_parallel_world_size", "get_data_parallel_rank", "get_context_parallel_world_size",
    "get_context_parallel_rank", "get_virtual_pipeline_model_parallel_world_size",
    "get_tensor_model_parallel_src_rank", "get_data_parallel_src_rank", "get_pipeline_model_parallel_first_rank",
    "get_pipeline_model_parallel_last_rank", "get_pipeline_model_parallel_next_rank",
    "get_pipeline_model_parallel_prev_rank", "is_rank_in_embedding_group", "is_rank_in_position_embedding_group",
]


def _forward(name):
    def call(*args, **kwargs):  # get_data_parallel_*(with_context_parallel=...) takes Megatron-LM's argument
        return getattr(global_vars.get_parallel_state(), name)(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"ParallelState.{name}() of the run in progress."
    return call


for _name in _FORWARDED:
    globals()[_name] = _forward(_name)


def model_parallel_is_initialized():
    """Whether a run's parallel state is set (inside pretrain(), after its first callback)."""
    return global_vars._state.parallel_state is not None


def is_pipeline_first_stage(ignore_virtual=False, vp_stage=None):
    """Whether this rank (model chunk vp_stage, unless ignore_virtual) is the first stage."""
    return global_vars.get_parallel_state().is_pipeline_first_stage(None if ignore_virtual else vp_stage)


def is_pipeline_last_stage(ignore_virtual=False, vp_stage=None):
    """Whether this rank (model chunk vp_stage, unless ignore_virtual) is the last stage."""
    return global_vars.get_parallel_state().is_pipeline_last_stage(None if ignore_virtual else vp_stage)
