"""megatron.core.models.gpt: GPTModel with megatron-core's constructor."""
from ...._modules import GPTModel as _GPTModel
from ....training import global_vars
from . import gpt_layer_specs  # noqa: F401
from .gpt_layer_specs import LocalLayerSpec


class GPTModel(_GPTModel):
    """megatron-core's GPTModel(config, transformer_layer_spec, vocab_size, max_sequence_length,
    pre_process, post_process, ...) on megatron_cpp's: the pipeline rank, seed and vocabulary
    padding come from the run in progress (call it from model_builder, as Megatron-LM does).
    vocab_size is usually get_args().padded_vocab_size, which padding leaves as it is."""

    def __init__(self, config, transformer_layer_spec, vocab_size, max_sequence_length, pre_process=True,
                 post_process=True, fp16_lm_cross_entropy=False, parallel_output=True,
                 share_embeddings_and_output_weights=False, position_embedding_type="learned_absolute",
                 rotary_percent=1.0, rotary_base=10000, seq_len_interpolation_factor=None, vp_stage=None):
        if not isinstance(transformer_layer_spec, LocalLayerSpec):
            raise TypeError("[GPTModel] transformer_layer_spec must come from get_gpt_layer_local_spec(), found "
                            f"{type(transformer_layer_spec).__qualname__}")
        if fp16_lm_cross_entropy or seq_len_interpolation_factor is not None:
            raise NotImplementedError("[GPTModel] fp16_lm_cross_entropy and seq_len_interpolation_factor are not "
                                      "implemented")
        if transformer_layer_spec.qk_layernorm:
            config.qk_layernorm = True
        args = global_vars.get_args()
        ctx = global_vars.get_context()
        if vp_stage is None:
            vp_stage = ctx.virtual_pipeline_model_parallel_rank
        super().__init__(config, vocab_size, max_sequence_length,
                         make_vocab_size_divisible_by=args.make_vocab_size_divisible_by,
                         pre_process=pre_process, post_process=post_process,
                         pipeline_model_parallel_rank=ctx.parallel_state.get_pipeline_model_parallel_rank(),
                         virtual_pipeline_model_parallel_rank=vp_stage or 0,
                         share_embeddings_and_output_weights=share_embeddings_and_output_weights,
                         position_embedding_type=position_embedding_type, rotary_percent=rotary_percent,
                         rotary_base=rotary_base, parallel_output=parallel_output, seed=args.seed)
