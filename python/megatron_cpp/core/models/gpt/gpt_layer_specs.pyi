"""
megatron.core.models.gpt.gpt_layer_specs: the layer specs GPTModel takes. megatron_cpp's
transformer layer is the local one (its own attention, MLP and norms, no Transformer Engine).
"""
from __future__ import annotations
__all__: list[str] = ['LocalLayerSpec', 'get_gpt_layer_local_spec', 'get_gpt_layer_with_transformer_engine_spec']
class LocalLayerSpec:
    """
    The local GPT layer (what get_gpt_layer_local_spec() returns).
    """
    def __init__(self, num_experts = None, moe_grouped_gemm = False, qk_layernorm = False, normalization = None):
        ...
    def __repr__(self):
        ...
def get_gpt_layer_local_spec(num_experts = None, moe_grouped_gemm = False, qk_layernorm = False, normalization = None, **kwargs):
    """
    The local transformer layer (the normalization comes from the TransformerConfig).
    """
def get_gpt_layer_with_transformer_engine_spec(*args, **kwargs):
    ...
