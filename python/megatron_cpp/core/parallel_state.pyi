"""
megatron.core.parallel_state: the process groups and ranks of the run in progress, as
module functions (Megatron-LM's names), answered by its ParallelState. Valid inside pretrain()
from the first model_builder or dataset_builder call on.
"""
from __future__ import annotations
from megatron_cpp.training import global_vars
__all__: list[str] = ['get_context_parallel_group', 'get_context_parallel_rank', 'get_context_parallel_world_size', 'get_data_parallel_group', 'get_data_parallel_rank', 'get_data_parallel_src_rank', 'get_data_parallel_world_size', 'get_embedding_group', 'get_model_parallel_group', 'get_pipeline_model_parallel_first_rank', 'get_pipeline_model_parallel_group', 'get_pipeline_model_parallel_last_rank', 'get_pipeline_model_parallel_next_rank', 'get_pipeline_model_parallel_prev_rank', 'get_pipeline_model_parallel_rank', 'get_pipeline_model_parallel_world_size', 'get_position_embedding_group', 'get_tensor_model_parallel_group', 'get_tensor_model_parallel_rank', 'get_tensor_model_parallel_src_rank', 'get_tensor_model_parallel_world_size', 'get_virtual_pipeline_model_parallel_world_size', 'get_world_group', 'global_vars', 'is_pipeline_first_stage', 'is_pipeline_last_stage', 'is_rank_in_embedding_group', 'is_rank_in_position_embedding_group', 'model_parallel_is_initialized']
def _forward(name):
    ...
def get_context_parallel_group(*args, **kwargs):
    """
    ParallelState.get_context_parallel_group() of the run in progress.
    """
def get_context_parallel_rank(*args, **kwargs):
    """
    ParallelState.get_context_parallel_rank() of the run in progress.
    """
def get_context_parallel_world_size(*args, **kwargs):
    """
    ParallelState.get_context_parallel_world_size() of the run in progress.
    """
def get_data_parallel_group(*args, **kwargs):
    """
    ParallelState.get_data_parallel_group() of the run in progress.
    """
def get_data_parallel_rank(*args, **kwargs):
    """
    ParallelState.get_data_parallel_rank() of the run in progress.
    """
def get_data_parallel_src_rank(*args, **kwargs):
    """
    ParallelState.get_data_parallel_src_rank() of the run in progress.
    """
def get_data_parallel_world_size(*args, **kwargs):
    """
    ParallelState.get_data_parallel_world_size() of the run in progress.
    """
def get_embedding_group(*args, **kwargs):
    """
    ParallelState.get_embedding_group() of the run in progress.
    """
def get_model_parallel_group(*args, **kwargs):
    """
    ParallelState.get_model_parallel_group() of the run in progress.
    """
def get_pipeline_model_parallel_first_rank(*args, **kwargs):
    """
    ParallelState.get_pipeline_model_parallel_first_rank() of the run in progress.
    """
def get_pipeline_model_parallel_group(*args, **kwargs):
    """
    ParallelState.get_pipeline_model_parallel_group() of the run in progress.
    """
def get_pipeline_model_parallel_last_rank(*args, **kwargs):
    """
    ParallelState.get_pipeline_model_parallel_last_rank() of the run in progress.
    """
def get_pipeline_model_parallel_next_rank(*args, **kwargs):
    """
    ParallelState.get_pipeline_model_parallel_next_rank() of the run in progress.
    """
def get_pipeline_model_parallel_prev_rank(*args, **kwargs):
    """
    ParallelState.get_pipeline_model_parallel_prev_rank() of the run in progress.
    """
def get_pipeline_model_parallel_rank(*args, **kwargs):
    """
    ParallelState.get_pipeline_model_parallel_rank() of the run in progress.
    """
def get_pipeline_model_parallel_world_size(*args, **kwargs):
    """
    ParallelState.get_pipeline_model_parallel_world_size() of the run in progress.
    """
def get_position_embedding_group(*args, **kwargs):
    """
    ParallelState.get_position_embedding_group() of the run in progress.
    """
def get_tensor_model_parallel_group(*args, **kwargs):
    """
    ParallelState.get_tensor_model_parallel_group() of the run in progress.
    """
def get_tensor_model_parallel_rank(*args, **kwargs):
    """
    ParallelState.get_tensor_model_parallel_rank() of the run in progress.
    """
def get_tensor_model_parallel_src_rank(*args, **kwargs):
    """
    ParallelState.get_tensor_model_parallel_src_rank() of the run in progress.
    """
def get_tensor_model_parallel_world_size(*args, **kwargs):
    """
    ParallelState.get_tensor_model_parallel_world_size() of the run in progress.
    """
def get_virtual_pipeline_model_parallel_world_size(*args, **kwargs):
    """
    ParallelState.get_virtual_pipeline_model_parallel_world_size() of the run in progress.
    """
def get_world_group(*args, **kwargs):
    """
    ParallelState.get_world_group() of the run in progress.
    """
def is_pipeline_first_stage(ignore_virtual = False, vp_stage = None):
    """
    Whether this rank (model chunk vp_stage, unless ignore_virtual) is the first stage.
    """
def is_pipeline_last_stage(ignore_virtual = False, vp_stage = None):
    """
    Whether this rank (model chunk vp_stage, unless ignore_virtual) is the last stage.
    """
def is_rank_in_embedding_group(*args, **kwargs):
    """
    ParallelState.is_rank_in_embedding_group() of the run in progress.
    """
def is_rank_in_position_embedding_group(*args, **kwargs):
    """
    ParallelState.is_rank_in_position_embedding_group() of the run in progress.
    """
def model_parallel_is_initialized():
    """
    Whether a run's parallel state is set (inside pretrain(), after its first callback).
    """
_FORWARDED: list = ['get_world_group', 'get_tensor_model_parallel_group', 'get_pipeline_model_parallel_group', 'get_data_parallel_group', 'get_context_parallel_group', 'get_model_parallel_group', 'get_embedding_group', 'get_position_embedding_group', 'get_tensor_model_parallel_world_size', 'get_tensor_model_parallel_rank', 'get_pipeline_model_parallel_world_size', 'get_pipeline_model_parallel_rank', 'get_data_parallel_world_size', 'get_data_parallel_rank', 'get_context_parallel_world_size', 'get_context_parallel_rank', 'get_virtual_pipeline_model_parallel_world_size', 'get_tensor_model_parallel_src_rank', 'get_data_parallel_src_rank', 'get_pipeline_model_parallel_first_rank', 'get_pipeline_model_parallel_last_rank', 'get_pipeline_model_parallel_next_rank', 'get_pipeline_model_parallel_prev_rank', 'is_rank_in_embedding_group', 'is_rank_in_position_embedding_group']
_name: str = 'is_rank_in_position_embedding_group'
