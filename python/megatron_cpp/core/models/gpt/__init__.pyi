"""
megatron.core.models.gpt: GPTModel with megatron-core's constructor.
"""
from __future__ import annotations
from . import gpt_layer_specs
from megatron_cpp._modules import GPTModel as _GPTModel
from megatron_cpp.core.models.gpt.gpt_layer_specs import LocalLayerSpec
from megatron_cpp.training import global_vars
import megatron_cpp._modules
__all__: list[str] = ['GPTModel', 'LocalLayerSpec', 'global_vars', 'gpt_layer_specs']
class GPTModel(megatron_cpp._modules.GPTModel):
    """
    megatron-core's GPTModel(config, transformer_layer_spec, vocab_size, max_sequence_length,
        pre_process, post_process, ...) on megatron_cpp's: the pipeline rank, seed and vocabulary
        padding come from the run in progress (call it from model_builder, as Megatron-LM does).
        vocab_size is usually get_args().padded_vocab_size, which padding leaves as it is.
    """
    def __init__(self, config, transformer_layer_spec, vocab_size, max_sequence_length, pre_process = True, post_process = True, fp16_lm_cross_entropy = False, parallel_output = True, share_embeddings_and_output_weights = False, position_embedding_type = 'learned_absolute', rotary_percent = 1.0, rotary_base = 10000, seq_len_interpolation_factor = None, vp_stage = None):
        ...
