"""megatron.core.models.gpt.gpt_layer_specs: the layer specs GPTModel takes. megatron_cpp's
transformer layer is the local one (its own attention, MLP and norms, no Transformer Engine)."""


class LocalLayerSpec:
    """The local GPT layer (what get_gpt_layer_local_spec() returns)."""

    def __init__(self, num_experts=None, moe_grouped_gemm=False, qk_layernorm=False, normalization=None):
        if num_experts:
            raise NotImplementedError("[gpt_layer_specs] mixture-of-experts layers are not implemented")
        self.qk_layernorm = qk_layernorm  # GPTModel sets the config's (the C++ layer reads it there)
        self.normalization = normalization

    def __repr__(self):
        return f"LocalLayerSpec(qk_layernorm={self.qk_layernorm})"


def get_gpt_layer_local_spec(num_experts=None, moe_grouped_gemm=False, qk_layernorm=False, normalization=None,
                             **kwargs):
    """The local transformer layer (the normalization comes from the TransformerConfig)."""
    return LocalLayerSpec(num_experts, moe_grouped_gemm, qk_layernorm, normalization)


def get_gpt_layer_with_transformer_engine_spec(*args, **kwargs):
    raise NotImplementedError("[gpt_layer_specs] megatron_cpp has no Transformer Engine layers: "
                              "use get_gpt_layer_local_spec()")
