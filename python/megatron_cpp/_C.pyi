"""
megatron-cpp: Megatron-style GPT pretraining on LibTorch
"""
from __future__ import annotations
import collections.abc
import numpy
import numpy.typing
import torch
import torch._C.cpp.nn
import typing
__all__: list[str] = ['Activation', 'Arguments', 'BatchIterator', 'BatchOptions', 'BatchSampler', 'BlendedDataset', 'BpeTrainer', 'ColumnParallelLinear', 'DType', 'DataIterator', 'Datasets', 'EvaluationRecord', 'Fp8Config', 'Fp8Meta', 'GPT2BPETokenizer', 'GPTDataset', 'GPTDatasetConfig', 'GPTModel', 'HuggingFaceTokenizer', 'IndexedDataset', 'IndexedDatasetBuilder', 'IterationRecord', 'Launcher', 'LauncherEnv', 'MegatronDataset', 'MegatronPretrainingRandomSampler', 'MegatronPretrainingSampler', 'MoELayer', 'Normalization', 'NullTokenizer', 'ParallelState', 'ParamInit', 'ProcessGroup', 'RecomputeGranularity', 'RecomputeMethod', 'ReduceOp', 'RngTracker', 'RowParallelLinear', 'SentencePieceTokenizer', 'ShardLayout', 'ShardedParameter', 'Split', 'TikTokenizer', 'Tokenizer', 'TopKRouter', 'TrainingContext', 'TrainingResult', 'TransformerConfig', 'VocabParallelEmbedding', 'abort_job', 'arguments_help', 'build_batch', 'build_gpt_datasets', 'build_gpt_datasets_on_ranks', 'build_gpt_datasets_per_split_on_ranks', 'build_mock_gpt_datasets', 'build_tokenizer', 'check_args', 'checkpoint_arguments', 'convert_checkpoint', 'copy_to_tensor_model_parallel_region', 'core_transformer_config_from_args', 'cpu_allocator_cache_stats', 'empty_cpu_allocator_cache', 'enable_cpu_allocator_cache', 'fp8_current_scale', 'fp8_linear', 'fp8_quantize', 'gather_from_sequence_parallel_region', 'gather_from_tensor_model_parallel_region', 'get_batch_on_this_cp_rank', 'get_ltor_masks_and_position_ids', 'gpt_loss_func', 'host_readback_count', 'indexed_dataset_exists', 'init_distributed', 'init_logging', 'iteration_dir_name', 'list_iterations', 'model_parallel_manual_seed', 'num_floating_point_operations', 'optimal_dtype', 'parse_and_normalize_split', 'parse_arguments', 'parse_data_path', 'rank_dir_name', 'rank_layout', 'read_checkpoint_file', 'read_tracker', 'reduce_from_tensor_model_parallel_region', 'reduce_scatter_to_sequence_parallel_region', 'scatter_to_sequence_parallel_region', 'scatter_to_tensor_model_parallel_region', 'torch_version', 'train_valid_test_num_samples', 'vocab_parallel_cross_entropy', 'vocab_size_with_padding', 'warm_up_cpu_math']
class Activation:
    """
    Members:
    
      GELU
    
      GELU_TANH
    
      SILU
    
      SQUARED_RELU
    """
    GELU: typing.ClassVar[Activation]  # value = <Activation.GELU: 0>
    GELU_TANH: typing.ClassVar[Activation]  # value = <Activation.GELU_TANH: 1>
    SILU: typing.ClassVar[Activation]  # value = <Activation.SILU: 2>
    SQUARED_RELU: typing.ClassVar[Activation]  # value = <Activation.SQUARED_RELU: 3>
    __members__: typing.ClassVar[dict[str, Activation]]  # value = {'GELU': <Activation.GELU: 0>, 'GELU_TANH': <Activation.GELU_TANH: 1>, 'SILU': <Activation.SILU: 2>, 'SQUARED_RELU': <Activation.SQUARED_RELU: 3>}
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class Arguments:
    """
    Every setting of a training run, with Megatron-LM's flag names as attributes (--num-layers -> num_layers). Usually from parse_arguments(); a default-constructed one holds the defaults and must pass validate() before pretrain() uses it.
    """
    def __copy__(self) -> Arguments:
        ...
    def __deepcopy__(self, memo: dict) -> Arguments:
        ...
    def __init__(self) -> None:
        ...
    def __repr__(self) -> str:
        ...
    def to_dict(self) -> dict:
        """
        Every field by attribute name.
        """
    def validate(self, world_size: typing.SupportsInt) -> None:
        """
        Checks every combination against world_size and fills the derived values (data_parallel_size, num_microbatches, ...); raises naming the flags.
        """
    @property
    def abort_on_unmet_fused_kernel_constraints(self) -> bool:
        """
        accepted, no effect: where a fused kernel does not apply (CPU, an unsupported size) ATen's path runs
        """
    @abort_on_unmet_fused_kernel_constraints.setter
    def abort_on_unmet_fused_kernel_constraints(self, arg0: bool) -> None:
        ...
    @property
    def account_for_embedding_in_pipeline_split(self) -> bool:
        """
        count the embedding as a layer when splitting the layers over the stages: the first chunk holds one fewer
        """
    @account_for_embedding_in_pipeline_split.setter
    def account_for_embedding_in_pipeline_split(self, arg0: bool) -> None:
        ...
    @property
    def account_for_loss_in_pipeline_split(self) -> bool:
        """
        count the output layer and loss as a layer when splitting: the last chunk holds one fewer
        """
    @account_for_loss_in_pipeline_split.setter
    def account_for_loss_in_pipeline_split(self, arg0: bool) -> None:
        ...
    @property
    def accumulate_allreduce_grads_in_fp32(self) -> bool:
        """
        accumulate and reduce gradients in fp32: always so here unless --grad-reduce-in-bf16
        """
    @accumulate_allreduce_grads_in_fp32.setter
    def accumulate_allreduce_grads_in_fp32(self, arg0: bool) -> None:
        ...
    @property
    def adam_beta1(self) -> float:
        """
        Adam beta1
        """
    @adam_beta1.setter
    def adam_beta1(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def adam_beta2(self) -> float:
        """
        Adam beta2
        """
    @adam_beta2.setter
    def adam_beta2(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def adam_eps(self) -> float:
        """
        Adam epsilon
        """
    @adam_eps.setter
    def adam_eps(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def add_qkv_bias(self) -> bool:
        """
        bias on the Q, K, V projection even with --disable-bias-linear
        """
    @add_qkv_bias.setter
    def add_qkv_bias(self, arg0: bool) -> None:
        ...
    @property
    def allow_save_rewind(self) -> bool:
        """
        let this run save into a --save whose tracker names a later iteration (moving it back, replacing those)
        """
    @allow_save_rewind.setter
    def allow_save_rewind(self, arg0: bool) -> None:
        ...
    @property
    def apply_layernorm_1p(self) -> bool:
        """
        norm weights centred on zero: stored as gamma - 1, initialised to 0, applied as 1 + weight
        """
    @apply_layernorm_1p.setter
    def apply_layernorm_1p(self, arg0: bool) -> None:
        ...
    @property
    def apply_query_key_layer_scaling(self) -> bool:
        """
        accepted, no effect: with an fp32 softmax the scaling cancels out
        """
    @apply_query_key_layer_scaling.setter
    def apply_query_key_layer_scaling(self, arg0: bool) -> None:
        ...
    @property
    def async_ckpt_use_cpu_shm(self) -> bool:
        """
        accepted, no effect: --async-save already copies the state to (pinned) host memory in the training process
        """
    @async_ckpt_use_cpu_shm.setter
    def async_ckpt_use_cpu_shm(self, arg0: bool) -> None:
        ...
    @property
    def async_save(self) -> bool:
        """
        copy each checkpoint to host memory and write it on a background thread while training goes on; it becomes the latest once every rank has written it
        """
    @async_save.setter
    def async_save(self, arg0: bool) -> None:
        ...
    @property
    def async_strategy(self) -> str:
        """
        accepted, no effect: --async-save writes from a thread of the training process
        """
    @async_strategy.setter
    def async_strategy(self, arg0: str) -> None:
        ...
    @property
    def attention_backend(self) -> str:
        """
        accepted, no effect: attention is at::scaled_dot_product_attention (flash / memory-efficient kernels on CUDA)
        """
    @attention_backend.setter
    def attention_backend(self, arg0: str) -> None:
        ...
    @property
    def attention_dropout(self) -> float:
        """
        dropout on attention probabilities
        """
    @attention_dropout.setter
    def attention_dropout(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def attention_softmax_in_fp32(self) -> bool:
        """
        accepted, no effect: the attention softmax accumulates in fp32 already
        """
    @attention_softmax_in_fp32.setter
    def attention_softmax_in_fp32(self, arg0: bool) -> None:
        ...
    @property
    def auto_detect_ckpt_format(self) -> bool:
        """
        accepted, no effect: --load's format is always detected from its files
        """
    @auto_detect_ckpt_format.setter
    def auto_detect_ckpt_format(self, arg0: bool) -> None:
        ...
    @property
    def bf16(self) -> bool:
        """
        bfloat16 model, fp32 master weights
        """
    @bf16.setter
    def bf16(self, arg0: bool) -> None:
        ...
    @property
    def calculate_per_token_loss(self) -> bool:
        """
        sum the loss over tokens and divide by the token count of the whole batch, not average micro-batch means
        """
    @calculate_per_token_loss.setter
    def calculate_per_token_loss(self, arg0: bool) -> None:
        ...
    @property
    def causal_lm(self) -> bool:
        """
        accepted, no effect: the GPT model is always a causal language model
        """
    @causal_lm.setter
    def causal_lm(self, arg0: bool) -> None:
        ...
    @property
    def check_weight_hash_across_dp_replicas_interval(self) -> int | None:
        """
        every N iterations, check that each parameter is bit-identical on all its data-parallel replicas; stop with the parameter and the ranks if not
        """
    @check_weight_hash_across_dp_replicas_interval.setter
    def check_weight_hash_across_dp_replicas_interval(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def checkpoint_activations(self) -> bool:
        """
        = --recompute-granularity full (each layer's activations recomputed in backward)
        """
    @checkpoint_activations.setter
    def checkpoint_activations(self, arg0: bool) -> None:
        ...
    @property
    def ckpt_assume_constant_structure(self) -> bool:
        """
        accepted, no effect: an option of megatron-core's torch_dist writer; torch_dist saves here are fully parallel, loads strict
        """
    @ckpt_assume_constant_structure.setter
    def ckpt_assume_constant_structure(self, arg0: bool) -> None:
        ...
    @property
    def ckpt_drop_redundant_extra_state(self) -> bool:
        """
        accepted, no effect: checkpoints hold no Transformer Engine _extra_state
        """
    @ckpt_drop_redundant_extra_state.setter
    def ckpt_drop_redundant_extra_state(self, arg0: bool) -> None:
        ...
    @property
    def ckpt_format(self) -> str:
        """
        the format --save writes: torch (default), Megatron-LM's per-rank model_optim_rng.pt files; torch_dist, megatron-core's sharded files, which load at any TP/PP/DP. --load reads either
        """
    @ckpt_format.setter
    def ckpt_format(self, arg0: str) -> None:
        ...
    @property
    def ckpt_fully_parallel_load(self) -> bool:
        """
        accepted, no effect: an option of megatron-core's torch_dist writer; torch_dist saves here are fully parallel, loads strict
        """
    @ckpt_fully_parallel_load.setter
    def ckpt_fully_parallel_load(self, arg0: bool) -> None:
        ...
    @property
    def ckpt_fully_parallel_load_per_rank_objects(self) -> bool:
        """
        accepted, no effect: an option of megatron-core's torch_dist writer; torch_dist saves here are fully parallel, loads strict
        """
    @ckpt_fully_parallel_load_per_rank_objects.setter
    def ckpt_fully_parallel_load_per_rank_objects(self, arg0: bool) -> None:
        ...
    @property
    def ckpt_fully_parallel_save(self) -> bool:
        """
        accepted, no effect: an option of megatron-core's torch_dist writer; torch_dist saves here are fully parallel, loads strict
        """
    @ckpt_fully_parallel_save.setter
    def ckpt_fully_parallel_save(self, arg0: bool) -> None:
        ...
    @property
    def ckpt_step(self) -> int | None:
        """
        load this iteration instead of the tracker's
        """
    @ckpt_step.setter
    def ckpt_step(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def clip_grad(self) -> float:
        """
        clip gradients to this global norm (0: off)
        """
    @clip_grad.setter
    def clip_grad(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def config_file(self) -> str:
        """
        the --config file
        """
    @config_file.setter
    def config_file(self, arg0: str) -> None:
        ...
    @property
    def context_parallel_size(self) -> int:
        """
        ranks the sequence is split over: each holds 2 of its 2 x N chunks, attention exchanges keys and values
        """
    @context_parallel_size.setter
    def context_parallel_size(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def cp_comm_type(self) -> list[str]:
        """
        p2p (a ring, overlapped) | all_gather | a2a (all-to-all over heads): how attention exchanges keys and values over the context-parallel ranks; one value, or one per layer
        """
    @cp_comm_type.setter
    def cp_comm_type(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def cross_entropy_fusion_impl(self) -> str:
        """
        accepted, no effect: the cross entropy kernel is the library's own
        """
    @cross_entropy_fusion_impl.setter
    def cross_entropy_fusion_impl(self, arg0: str) -> None:
        ...
    @property
    def cross_entropy_loss_fusion(self) -> bool:
        """
        accepted, no effect: the vocab-parallel cross entropy is one fused kernel on CUDA with or without it
        """
    @cross_entropy_loss_fusion.setter
    def cross_entropy_loss_fusion(self, arg0: bool) -> None:
        ...
    @property
    def data_args_path(self) -> str:
        """
        a file holding --data-path's words (for long blends)
        """
    @data_args_path.setter
    def data_args_path(self, arg0: str) -> None:
        ...
    @property
    def data_cache_path(self) -> str:
        """
        where index caches go (default next to the data)
        """
    @data_cache_path.setter
    def data_cache_path(self, arg0: str) -> None:
        ...
    @property
    def data_impl(self) -> str:
        """
        accepted, no effect: .bin/.idx files are read memory-mapped (--no-mmap-bin-files: with reads)
        """
    @data_impl.setter
    def data_impl(self, arg0: str) -> None:
        ...
    @property
    def data_parallel_sharding_strategy(self) -> str:
        """
        no_shard | optim (ZeRO-1, the distributed optimizer) | optim_grads (ZeRO-2: also the gradients) | optim_grads_params (ZeRO-3: also the parameters, gathered per layer before use); the last two need --use-megatron-fsdp
        """
    @data_parallel_sharding_strategy.setter
    def data_parallel_sharding_strategy(self, arg0: str) -> None:
        ...
    @property
    def data_parallel_size(self) -> int:
        """
        world size / (TP x PP)
        """
    @data_parallel_size.setter
    def data_parallel_size(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def data_path(self) -> list[str]:
        """
        dataset prefix, or weight prefix weight prefix ...
        """
    @data_path.setter
    def data_path(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def dataloader_type(self) -> str:
        """
        single: consecutive global batches (default); cyclic: a permutation seeded by the epoch, repeated without end; external is refused (pretrain_gpt builds its own loader)
        """
    @dataloader_type.setter
    def dataloader_type(self, arg0: str) -> None:
        ...
    @property
    def ddp_average_in_collective(self) -> bool:
        """
        accepted, no effect: data-parallel gradients are always averaged in the collective (ReduceOp AVG)
        """
    @ddp_average_in_collective.setter
    def ddp_average_in_collective(self, arg0: bool) -> None:
        ...
    @property
    def ddp_bucket_size(self) -> int | None:
        """
        elements per data-parallel gradient bucket (default max(40M, 1M x data-parallel size))
        """
    @ddp_bucket_size.setter
    def ddp_bucket_size(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def ddp_num_buckets(self) -> int | None:
        """
        split each data-parallel gradient buffer into about N buckets instead of by --ddp-bucket-size
        """
    @ddp_num_buckets.setter
    def ddp_num_buckets(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def ddp_pad_buckets_for_high_nccl_busbw(self) -> bool:
        """
        accepted, no effect: buckets are cut by --ddp-bucket-size only
        """
    @ddp_pad_buckets_for_high_nccl_busbw.setter
    def ddp_pad_buckets_for_high_nccl_busbw(self, arg0: bool) -> None:
        ...
    @property
    def decoder_first_pipeline_num_layers(self) -> int | None:
        """
        the transformer layers of the first pipeline stage; the others' split evenly (with --decoder-last-pipeline-num-layers, between the stages in the middle)
        """
    @decoder_first_pipeline_num_layers.setter
    def decoder_first_pipeline_num_layers(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def decoder_last_pipeline_num_layers(self) -> int | None:
        """
        the transformer layers of the last pipeline stage; the others' split evenly
        """
    @decoder_last_pipeline_num_layers.setter
    def decoder_last_pipeline_num_layers(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def decoupled_lr(self) -> float | None:
        """
        learning rate of the input and output layer
        """
    @decoupled_lr.setter
    def decoupled_lr(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def decoupled_min_lr(self) -> float | None:
        """
        floor of --decoupled-lr (default --min-lr)
        """
    @decoupled_min_lr.setter
    def decoupled_min_lr(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def deepspeed(self) -> bool:
        """
        Megatron-DeepSpeed's switch: read --deepspeed_config
        """
    @deepspeed.setter
    def deepspeed(self, arg0: bool) -> None:
        ...
    @property
    def deepspeed_activation_checkpointing(self) -> bool:
        """
        accepted, no effect: activations are recomputed as --recompute-granularity says
        """
    @deepspeed_activation_checkpointing.setter
    def deepspeed_activation_checkpointing(self, arg0: bool) -> None:
        ...
    @property
    def deepspeed_config(self) -> str:
        """
        DeepSpeed JSON config: batch sizes, clipping, ZeRO stage, fp16/bf16, Adam (docs/migrating.md)
        """
    @deepspeed_config.setter
    def deepspeed_config(self, arg0: str) -> None:
        ...
    @property
    def defer_embedding_wgrad_compute(self) -> bool:
        """
        accepted, no effect: the output layer's weight gradient is computed in its own backward step
        """
    @defer_embedding_wgrad_compute.setter
    def defer_embedding_wgrad_compute(self, arg0: bool) -> None:
        ...
    @property
    def delay_wgrad_compute(self) -> bool:
        """
        accepted, no effect: weight gradients are computed in each layer's backward, not deferred
        """
    @delay_wgrad_compute.setter
    def delay_wgrad_compute(self, arg0: bool) -> None:
        ...
    @property
    def deterministic_mode(self) -> bool:
        """
        only deterministic algorithms (ATen's, cuDNN's, cuBLAS with a fixed workspace): reruns are bit-identical
        """
    @deterministic_mode.setter
    def deterministic_mode(self, arg0: bool) -> None:
        ...
    @property
    def device(self) -> str:
        """
        cpu | cuda (default cuda when a GPU is visible)
        """
    @device.setter
    def device(self, arg0: str) -> None:
        ...
    @property
    def disable_bf16_reduced_precision_matmul(self) -> bool:
        """
        cuBLAS bf16 GEMMs without reduced-precision reductions (fp32 throughout), on CUDA
        """
    @disable_bf16_reduced_precision_matmul.setter
    def disable_bf16_reduced_precision_matmul(self, arg0: bool) -> None:
        ...
    @property
    def disable_bias_linear(self) -> bool:
        """
        no biases in linear layers
        """
    @disable_bias_linear.setter
    def disable_bias_linear(self, arg0: bool) -> None:
        ...
    @property
    def disable_gloo_process_groups(self) -> bool:
        """
        accepted, no effect: host-side collectives use the transport the launcher gives (MPI or Gloo)
        """
    @disable_gloo_process_groups.setter
    def disable_gloo_process_groups(self, arg0: bool) -> None:
        ...
    @property
    def dist_ckpt_optim_fully_reshardable(self) -> bool:
        """
        accepted, no effect: an option of megatron-core's torch_dist writer; torch_dist saves here are fully parallel, loads strict
        """
    @dist_ckpt_optim_fully_reshardable.setter
    def dist_ckpt_optim_fully_reshardable(self, arg0: bool) -> None:
        ...
    @property
    def dist_ckpt_strictness(self) -> str:
        """
        accepted, no effect: an option of megatron-core's torch_dist writer; torch_dist saves here are fully parallel, loads strict
        """
    @dist_ckpt_strictness.setter
    def dist_ckpt_strictness(self, arg0: str) -> None:
        ...
    @property
    def distributed_backend(self) -> str:
        """
        nccl: CUDA tensors through NCCL; gloo: a CPU job. Host tensors: MPI under mpirun, Gloo under torchrun/deepspeed
        """
    @distributed_backend.setter
    def distributed_backend(self, arg0: str) -> None:
        ...
    @property
    def distributed_timeout_minutes(self) -> float:
        """
        collective timeout
        """
    @distributed_timeout_minutes.setter
    def distributed_timeout_minutes(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def domino(self) -> bool:
        """
        DeepSpeed-Domino: split each micro-batch in two along the batch, one half's tensor-parallel all-reduces under the other half's compute (even --micro-batch-size; no --sequence-parallel, no full recompute)
        """
    @domino.setter
    def domino(self, arg0: bool) -> None:
        ...
    @property
    def domino_intra_layer_overlap(self) -> bool:
        """
        with --domino: overlap within each layer only (DeepSpeed's domino_intra_layer_overlap), not across layers
        """
    @domino_intra_layer_overlap.setter
    def domino_intra_layer_overlap(self, arg0: bool) -> None:
        ...
    @property
    def embed_layernorm(self) -> bool:
        """
        LayerNorm on the word embeddings, as BLOOM
        """
    @embed_layernorm.setter
    def embed_layernorm(self, arg0: bool) -> None:
        ...
    @property
    def empty_unused_memory_level(self) -> int:
        """
        1: return the allocator's unused memory after forward-backward; 2: also after the optimizer step
        """
    @empty_unused_memory_level.setter
    def empty_unused_memory_level(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def enable_experimental(self) -> bool:
        """
        accepted, no effect: no feature here is gated by it
        """
    @enable_experimental.setter
    def enable_experimental(self, arg0: bool) -> None:
        ...
    @property
    def eod_mask_loss(self) -> bool:
        """
        no loss on EOD tokens
        """
    @eod_mask_loss.setter
    def eod_mask_loss(self, arg0: bool) -> None:
        ...
    @property
    def eval_interval(self) -> int:
        """
        iterations between evaluations
        """
    @eval_interval.setter
    def eval_interval(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def eval_iters(self) -> int:
        """
        iterations per evaluation
        """
    @eval_iters.setter
    def eval_iters(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def exit_duration_in_mins(self) -> float | None:
        """
        stop once training has run this many minutes (slowest rank), saving first
        """
    @exit_duration_in_mins.setter
    def exit_duration_in_mins(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def exit_interval(self) -> int | None:
        """
        stop when the iteration is a multiple of this, saving a checkpoint to --save first
        """
    @exit_interval.setter
    def exit_interval(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def exit_signal_handler(self) -> bool:
        """
        on SIGTERM, finish the current iteration, save a checkpoint to --save and stop
        """
    @exit_signal_handler.setter
    def exit_signal_handler(self, arg0: bool) -> None:
        ...
    @property
    def exp_avg_dtype(self) -> str:
        """
        fp32: the only one here
        """
    @exp_avg_dtype.setter
    def exp_avg_dtype(self, arg0: str) -> None:
        ...
    @property
    def exp_avg_sq_dtype(self) -> str:
        """
        fp32: the only one here
        """
    @exp_avg_sq_dtype.setter
    def exp_avg_sq_dtype(self, arg0: str) -> None:
        ...
    @property
    def expert_model_parallel_size(self) -> int:
        """
        ranks the experts are split over
        """
    @expert_model_parallel_size.setter
    def expert_model_parallel_size(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def expert_tensor_parallel_size(self) -> int | None:
        """
        tensor-parallel ranks of each expert (default TP)
        """
    @expert_tensor_parallel_size.setter
    def expert_tensor_parallel_size(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def ffn_hidden_size(self) -> int | None:
        """
        MLP hidden size (default 4 x hidden)
        """
    @ffn_hidden_size.setter
    def ffn_hidden_size(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def finetune(self) -> bool:
        """
        load the model weights only; iteration and consumed samples start at 0
        """
    @finetune.setter
    def finetune(self, arg0: bool) -> None:
        ...
    @property
    def first_last_layers_bf16(self) -> bool:
        """
        keep the first and last layers' GEMMs out of FP8
        """
    @first_last_layers_bf16.setter
    def first_last_layers_bf16(self, arg0: bool) -> None:
        ...
    @property
    def fp16(self) -> bool:
        """
        float16 model, fp32 master weights, loss scaling
        """
    @fp16.setter
    def fp16(self, arg0: bool) -> None:
        ...
    @property
    def fp8_amax_compute_algo(self) -> str:
        """
        delayed: the scale follows the newest amax or the history's largest
        """
    @fp8_amax_compute_algo.setter
    def fp8_amax_compute_algo(self, arg0: str) -> None:
        ...
    @property
    def fp8_amax_history_len(self) -> int:
        """
        delayed: iterations of amax history kept
        """
    @fp8_amax_history_len.setter
    def fp8_amax_history_len(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def fp8_format(self) -> str:
        """
        FP8 GEMMs (at::_scaled_mm, no Transformer Engine) in the attention and dense MLP linear layers: e4m3 everywhere, or hybrid (e5m2 output gradients); needs FP8 tensor cores (sm_89+) on CUDA
        """
    @fp8_format.setter
    def fp8_format(self, arg0: str) -> None:
        ...
    @property
    def fp8_interval(self) -> int:
        """
        accepted, no effect: deprecated, Megatron-LM ignores it too
        """
    @fp8_interval.setter
    def fp8_interval(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def fp8_margin(self) -> int:
        """
        delayed: scales leave 2^margin of headroom
        """
    @fp8_margin.setter
    def fp8_margin(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def fp8_recipe(self) -> str:
        """
        delayed: scales from each tensor's amax history, updated once per iteration; tensorwise: each tensor scaled by its own amax (mxfp8, blockwise and custom are not implemented)
        """
    @fp8_recipe.setter
    def fp8_recipe(self, arg0: str) -> None:
        ...
    @property
    def fsdp_db_use_persist_buf_on_alloc_fail(self) -> bool:
        """
        accepted, no effect: ZeRO-3 gathers into the caching allocator's blocks
        """
    @fsdp_db_use_persist_buf_on_alloc_fail.setter
    def fsdp_db_use_persist_buf_on_alloc_fail(self, arg0: bool) -> None:
        ...
    @property
    def fsdp_double_buffer(self) -> bool:
        """
        accepted, no effect: ZeRO-3 gathers into the caching allocator's blocks
        """
    @fsdp_double_buffer.setter
    def fsdp_double_buffer(self, arg0: bool) -> None:
        ...
    @property
    def fsdp_manual_registration(self) -> bool:
        """
        accepted, no effect: NCCL user buffers are not registered
        """
    @fsdp_manual_registration.setter
    def fsdp_manual_registration(self, arg0: bool) -> None:
        ...
    @property
    def global_batch_size(self) -> int | None:
        """
        samples per iteration over all ranks (default micro x data-parallel)
        """
    @global_batch_size.setter
    def global_batch_size(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def grad_reduce_in_bf16(self) -> bool:
        """
        reduce the data-parallel gradient buckets as bfloat16 copies (half the traffic); gradients still accumulate in fp32
        """
    @grad_reduce_in_bf16.setter
    def grad_reduce_in_bf16(self, arg0: bool) -> None:
        ...
    @property
    def group_query_attention(self) -> bool:
        """
        grouped-query attention
        """
    @group_query_attention.setter
    def group_query_attention(self, arg0: bool) -> None:
        ...
    @property
    def hidden_dropout(self) -> float:
        """
        dropout on hidden states
        """
    @hidden_dropout.setter
    def hidden_dropout(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def hidden_size(self) -> int:
        """
        transformer hidden size
        """
    @hidden_size.setter
    def hidden_size(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def hierarchical_context_parallel_sizes(self) -> list[int]:
        """
        with --cp-comm-type a2a+p2p: the inner (all-to-all) and outer (ring) sizes, inner first
        """
    @hierarchical_context_parallel_sizes.setter
    def hierarchical_context_parallel_sizes(self, arg0: collections.abc.Sequence[typing.SupportsInt]) -> None:
        ...
    @property
    def high_priority_stream_groups(self) -> list[str]:
        """
        accepted, no effect: communicators are created without NCCL stream priorities
        """
    @high_priority_stream_groups.setter
    def high_priority_stream_groups(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def hysteresis(self) -> int:
        """
        overflows tolerated before the scale shrinks
        """
    @hysteresis.setter
    def hysteresis(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def ignore_memory_check(self) -> bool:
        """
        train even when the theoretical memory at start-up exceeds the memory free on the device
        """
    @ignore_memory_check.setter
    def ignore_memory_check(self, arg0: bool) -> None:
        ...
    @property
    def init_method_std(self) -> float:
        """
        std of the normal weight initialisation
        """
    @init_method_std.setter
    def init_method_std(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def init_model_with_meta_device(self) -> bool:
        """
        accepted, no effect: parameters are initialised on the device they train on, as without it
        """
    @init_model_with_meta_device.setter
    def init_model_with_meta_device(self, arg0: bool) -> None:
        ...
    @property
    def initial_loss_scale(self) -> float:
        """
        first dynamic loss scale
        """
    @initial_loss_scale.setter
    def initial_loss_scale(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def keep_last_checkpoints(self) -> int:
        """
        keep only the newest N checkpoints in --save, deleting older ones after each save (0: keep all)
        """
    @keep_last_checkpoints.setter
    def keep_last_checkpoints(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def kill_switch_path(self) -> str:
        """
        stop, without saving, before the next iteration once this file exists (Megatron-DeepSpeed's)
        """
    @kill_switch_path.setter
    def kill_switch_path(self, arg0: str) -> None:
        ...
    @property
    def kv_channels(self) -> int | None:
        """
        head dim (default hidden / heads)
        """
    @kv_channels.setter
    def kv_channels(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def layernorm_epsilon(self) -> float | None:
        """
        = --norm-epsilon
        """
    @layernorm_epsilon.setter
    def layernorm_epsilon(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def llama_model(self) -> bool:
        """
        accepted, no effect: the layers follow --normalization, --swiglu, --position-embedding-type, --disable-bias-linear
        """
    @llama_model.setter
    def llama_model(self, arg0: bool) -> None:
        ...
    @property
    def load(self) -> str:
        """
        directory to resume from (latest_checkpointed_iteration.txt names the iteration)
        """
    @load.setter
    def load(self, arg0: str) -> None:
        ...
    @property
    def load_fallback(self) -> bool:
        """
        if the checkpoint to load is missing, truncated or corrupt, load the newest older complete one
        """
    @load_fallback.setter
    def load_fallback(self, arg0: bool) -> None:
        ...
    @property
    def local_rank(self) -> int | None:
        """
        this process's rank on its node, as deepspeed (--local_rank=N) and torch.distributed.launch pass it; must agree with the launcher's LOCAL_RANK
        """
    @local_rank.setter
    def local_rank(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def log_batch_size_to_tensorboard(self) -> bool:
        """
        accepted, no effect: batch-size is always written
        """
    @log_batch_size_to_tensorboard.setter
    def log_batch_size_to_tensorboard(self, arg0: bool) -> None:
        ...
    @property
    def log_interval(self) -> int:
        """
        iterations between log lines
        """
    @log_interval.setter
    def log_interval(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def log_memory_interval(self) -> int | None:
        """
        the memory report (allocated, reserved, peaks) every N iterations, a multiple of --log-interval
        """
    @log_memory_interval.setter
    def log_memory_interval(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def log_memory_to_tensorboard(self) -> bool:
        """
        the CUDA caching allocator's counters (GPU runs)
        """
    @log_memory_to_tensorboard.setter
    def log_memory_to_tensorboard(self, arg0: bool) -> None:
        ...
    @property
    def log_num_zeros_in_grad(self) -> bool:
        """
        the zeros in the clipped gradients in the iteration line and TensorBoard (num-zeros)
        """
    @log_num_zeros_in_grad.setter
    def log_num_zeros_in_grad(self, arg0: bool) -> None:
        ...
    @property
    def log_params_norm(self) -> bool:
        """
        the norm of the updated parameters in the iteration line and TensorBoard (params-norm)
        """
    @log_params_norm.setter
    def log_params_norm(self, arg0: bool) -> None:
        ...
    @property
    def log_throughput(self) -> bool:
        """
        with --log-timers-to-tensorboard, a throughput scalar (the iteration line always reports it)
        """
    @log_throughput.setter
    def log_throughput(self, arg0: bool) -> None:
        ...
    @property
    def log_timers_to_tensorboard(self) -> bool:
        """
        iteration-time (s) and, with --log-throughput, throughput (TFLOP/s/GPU) at each log interval
        """
    @log_timers_to_tensorboard.setter
    def log_timers_to_tensorboard(self, arg0: bool) -> None:
        ...
    @property
    def log_validation_ppl_to_tensorboard(self) -> bool:
        """
        validation PPL scalars too
        """
    @log_validation_ppl_to_tensorboard.setter
    def log_validation_ppl_to_tensorboard(self, arg0: bool) -> None:
        ...
    @property
    def log_world_size_to_tensorboard(self) -> bool:
        """
        world-size scalars
        """
    @log_world_size_to_tensorboard.setter
    def log_world_size_to_tensorboard(self, arg0: bool) -> None:
        ...
    @property
    def logging_level(self) -> int | None:
        """
        Python's logging level: 10 (DEBUG) or lower adds debug lines; higher keeps the iteration and start-up lines, which Megatron-LM prints without its logger; default $MEGATRON_LOGGING_LEVEL
        """
    @logging_level.setter
    def logging_level(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def loss_scale(self) -> float | None:
        """
        fixed loss scale (default: dynamic with --fp16)
        """
    @loss_scale.setter
    def loss_scale(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def loss_scale_window(self) -> int:
        """
        good iterations before the scale grows
        """
    @loss_scale_window.setter
    def loss_scale_window(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def lr(self) -> float | None:
        """
        peak learning rate
        """
    @lr.setter
    def lr(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def lr_decay_iters(self) -> int | None:
        """
        iterations to decay over (default --train-iters)
        """
    @lr_decay_iters.setter
    def lr_decay_iters(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def lr_decay_samples(self) -> int | None:
        """
        samples to decay over
        """
    @lr_decay_samples.setter
    def lr_decay_samples(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def lr_decay_style(self) -> str:
        """
        constant | linear | cosine | inverse-square-root | WSD
        """
    @lr_decay_style.setter
    def lr_decay_style(self, arg0: str) -> None:
        ...
    @property
    def lr_warmup_fraction(self) -> float | None:
        """
        warm-up as a fraction of the decay
        """
    @lr_warmup_fraction.setter
    def lr_warmup_fraction(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def lr_warmup_init(self) -> float:
        """
        learning rate at the start of warm-up
        """
    @lr_warmup_init.setter
    def lr_warmup_init(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def lr_warmup_iters(self) -> int:
        """
        linear warm-up iterations
        """
    @lr_warmup_iters.setter
    def lr_warmup_iters(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def lr_warmup_samples(self) -> int:
        """
        warm-up samples
        """
    @lr_warmup_samples.setter
    def lr_warmup_samples(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def lr_wsd_decay_iters(self) -> int | None:
        """
        final decay iterations of WSD
        """
    @lr_wsd_decay_iters.setter
    def lr_wsd_decay_iters(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def lr_wsd_decay_samples(self) -> int | None:
        """
        final decay samples of WSD
        """
    @lr_wsd_decay_samples.setter
    def lr_wsd_decay_samples(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def lr_wsd_decay_style(self) -> str:
        """
        exponential | linear | cosine
        """
    @lr_wsd_decay_style.setter
    def lr_wsd_decay_style(self, arg0: str) -> None:
        ...
    @property
    def main_grads_dtype(self) -> str:
        """
        fp32: the only one here
        """
    @main_grads_dtype.setter
    def main_grads_dtype(self, arg0: str) -> None:
        ...
    @property
    def main_params_dtype(self) -> str:
        """
        fp32: the only one here
        """
    @main_params_dtype.setter
    def main_params_dtype(self, arg0: str) -> None:
        ...
    @property
    def make_vocab_size_divisible_by(self) -> int:
        """
        pad the vocabulary to a multiple of this x TP
        """
    @make_vocab_size_divisible_by.setter
    def make_vocab_size_divisible_by(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def manual_gc(self) -> bool:
        """
        accepted, no effect: there is no Python garbage collector
        """
    @manual_gc.setter
    def manual_gc(self, arg0: bool) -> None:
        ...
    @property
    def manual_gc_interval(self) -> int:
        """
        accepted, no effect: there is no Python garbage collector
        """
    @manual_gc_interval.setter
    def manual_gc_interval(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def max_position_embeddings(self) -> int:
        """
        position table size (default --seq-length)
        """
    @max_position_embeddings.setter
    def max_position_embeddings(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def megatron_fsdp_grad_comm_dtype(self) -> str:
        """
        Megatron-FSDP's gradient reduction: fp32 (the only one here)
        """
    @megatron_fsdp_grad_comm_dtype.setter
    def megatron_fsdp_grad_comm_dtype(self, arg0: str) -> None:
        ...
    @property
    def megatron_fsdp_main_grads_dtype(self) -> str:
        """
        Megatron-FSDP's main gradients: fp32 (the only one here)
        """
    @megatron_fsdp_main_grads_dtype.setter
    def megatron_fsdp_main_grads_dtype(self, arg0: str) -> None:
        ...
    @property
    def megatron_fsdp_main_params_dtype(self) -> str:
        """
        Megatron-FSDP's main parameters: fp32 (the only one here)
        """
    @megatron_fsdp_main_params_dtype.setter
    def megatron_fsdp_main_params_dtype(self, arg0: str) -> None:
        ...
    @property
    def megatron_fsdp_max_pool_double_buffer(self) -> bool:
        """
        accepted, no effect: ZeRO-3 gathers into the caching allocator's blocks
        """
    @megatron_fsdp_max_pool_double_buffer.setter
    def megatron_fsdp_max_pool_double_buffer(self, arg0: bool) -> None:
        ...
    @property
    def merge_file(self) -> str:
        """
        GPT-2 merges.txt
        """
    @merge_file.setter
    def merge_file(self, arg0: str) -> None:
        ...
    @property
    def metrics_file(self) -> str:
        """
        JSONL file of logged metrics
        """
    @metrics_file.setter
    def metrics_file(self, arg0: str) -> None:
        ...
    @property
    def micro_batch_size(self) -> int:
        """
        samples per micro-batch per rank
        """
    @micro_batch_size.setter
    def micro_batch_size(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def microbatch_group_size_per_virtual_pipeline_stage(self) -> int | None:
        """
        accepted, no effect: the interleaved schedule groups micro-batches by the pipeline size (the order changes, not the result)
        """
    @microbatch_group_size_per_virtual_pipeline_stage.setter
    def microbatch_group_size_per_virtual_pipeline_stage(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def min_loss_scale(self) -> float:
        """
        dynamic loss scale floor
        """
    @min_loss_scale.setter
    def min_loss_scale(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def min_lr(self) -> float:
        """
        floor of the decayed learning rate
        """
    @min_lr.setter
    def min_lr(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def mock_data(self) -> bool:
        """
        synthetic data instead of --data-path
        """
    @mock_data.setter
    def mock_data(self, arg0: bool) -> None:
        ...
    @property
    def moe_aux_loss_coeff(self) -> float:
        """
        weight of the load-balancing loss
        """
    @moe_aux_loss_coeff.setter
    def moe_aux_loss_coeff(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def moe_enable_deepep(self) -> bool:
        """
        accepted, no effect: --moe-token-dispatcher-type flex with DeepEP
        """
    @moe_enable_deepep.setter
    def moe_enable_deepep(self, arg0: bool) -> None:
        ...
    @property
    def moe_expert_capacity_factor(self) -> float | None:
        """
        tokens an expert takes: ceil(tokens x topk / experts x this)
        """
    @moe_expert_capacity_factor.setter
    def moe_expert_capacity_factor(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def moe_ffn_hidden_size(self) -> int | None:
        """
        an expert's MLP hidden size (default --ffn-hidden-size)
        """
    @moe_ffn_hidden_size.setter
    def moe_ffn_hidden_size(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def moe_flex_dispatcher_backend(self) -> str:
        """
        accepted, no effect: DeepEP / HybridEP kernels are not in this build; flex runs the alltoall dispatcher
        """
    @moe_flex_dispatcher_backend.setter
    def moe_flex_dispatcher_backend(self, arg0: str) -> None:
        ...
    @property
    def moe_flex_dispatcher_num_sms(self) -> int | None:
        """
        accepted, no effect: DeepEP / HybridEP kernels are not in this build
        """
    @moe_flex_dispatcher_num_sms.setter
    def moe_flex_dispatcher_num_sms(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def moe_grouped_gemm(self) -> bool:
        """
        the local experts' GEMMs grouped into one call each (at::_grouped_mm)
        """
    @moe_grouped_gemm.setter
    def moe_grouped_gemm(self, arg0: bool) -> None:
        ...
    @property
    def moe_hybridep_num_sms(self) -> int | None:
        """
        accepted, no effect: HybridEP kernels are not in this build
        """
    @moe_hybridep_num_sms.setter
    def moe_hybridep_num_sms(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def moe_layer_freq(self) -> str:
        """
        MoE layers: every N-th from layer 0, or a Python list of 0/1 per layer such as "([1]*3+[0])*2"
        """
    @moe_layer_freq.setter
    def moe_layer_freq(self, arg0: str) -> None:
        ...
    @property
    def moe_pad_expert_input_to_capacity(self) -> bool:
        """
        every expert takes exactly its capacity
        """
    @moe_pad_expert_input_to_capacity.setter
    def moe_pad_expert_input_to_capacity(self, arg0: bool) -> None:
        ...
    @property
    def moe_permute_fusion(self) -> bool:
        """
        accepted, no effect: kernels are LibTorch's
        """
    @moe_permute_fusion.setter
    def moe_permute_fusion(self, arg0: bool) -> None:
        ...
    @property
    def moe_router_bias_update_rate(self) -> float:
        """
        step of the expert-bias update
        """
    @moe_router_bias_update_rate.setter
    def moe_router_bias_update_rate(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def moe_router_dtype(self) -> str:
        """
        the router's GEMM and scores in this type
        """
    @moe_router_dtype.setter
    def moe_router_dtype(self, arg0: str) -> None:
        ...
    @property
    def moe_router_enable_expert_bias(self) -> bool:
        """
        aux-loss-free balancing with a per-expert selection bias
        """
    @moe_router_enable_expert_bias.setter
    def moe_router_enable_expert_bias(self, arg0: bool) -> None:
        ...
    @property
    def moe_router_fusion(self) -> bool:
        """
        accepted, no effect: kernels are LibTorch's
        """
    @moe_router_fusion.setter
    def moe_router_fusion(self, arg0: bool) -> None:
        ...
    @property
    def moe_router_group_topk(self) -> int | None:
        """
        groups each token may be routed into
        """
    @moe_router_group_topk.setter
    def moe_router_group_topk(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def moe_router_load_balancing_type(self) -> str:
        """
        aux_loss (Switch Transformer's, over the micro-batch) | seq_aux_loss (per sequence) | none
        """
    @moe_router_load_balancing_type.setter
    def moe_router_load_balancing_type(self, arg0: str) -> None:
        ...
    @property
    def moe_router_num_groups(self) -> int | None:
        """
        expert groups for group-limited routing
        """
    @moe_router_num_groups.setter
    def moe_router_num_groups(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def moe_router_pre_softmax(self) -> bool:
        """
        softmax over all experts before the top-k (else over the top-k)
        """
    @moe_router_pre_softmax.setter
    def moe_router_pre_softmax(self, arg0: bool) -> None:
        ...
    @property
    def moe_router_score_function(self) -> str:
        """
        softmax | sigmoid (DeepSeek-V3)
        """
    @moe_router_score_function.setter
    def moe_router_score_function(self, arg0: str) -> None:
        ...
    @property
    def moe_router_topk(self) -> int:
        """
        experts each token is routed to
        """
    @moe_router_topk.setter
    def moe_router_topk(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def moe_router_topk_scaling_factor(self) -> float | None:
        """
        multiplies the routing probabilities
        """
    @moe_router_topk_scaling_factor.setter
    def moe_router_topk_scaling_factor(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def moe_shared_expert_gate(self) -> bool:
        """
        a sigmoid gate on the shared expert's output
        """
    @moe_shared_expert_gate.setter
    def moe_shared_expert_gate(self, arg0: bool) -> None:
        ...
    @property
    def moe_shared_expert_intermediate_size(self) -> int | None:
        """
        hidden size of the shared expert every token takes
        """
    @moe_shared_expert_intermediate_size.setter
    def moe_shared_expert_intermediate_size(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def moe_shared_expert_overlap(self) -> bool:
        """
        accepted, no effect: the shared experts run before the routed ones, not under their token exchange
        """
    @moe_shared_expert_overlap.setter
    def moe_shared_expert_overlap(self, arg0: bool) -> None:
        ...
    @property
    def moe_token_dispatcher_type(self) -> str:
        """
        how tokens reach their experts (flex: alltoall's exchange; DeepEP / HybridEP kernels are not in this build)
        """
    @moe_token_dispatcher_type.setter
    def moe_token_dispatcher_type(self, arg0: str) -> None:
        ...
    @property
    def moe_token_drop_policy(self) -> str:
        """
        past capacity, keep the tokens of highest probability | the earliest
        """
    @moe_token_drop_policy.setter
    def moe_token_drop_policy(self, arg0: str) -> None:
        ...
    @property
    def moe_z_loss_coeff(self) -> float | None:
        """
        weight of the router z-loss (ST-MoE)
        """
    @moe_z_loss_coeff.setter
    def moe_z_loss_coeff(self, arg0: typing.SupportsFloat | None) -> None:
        ...
    @property
    def no_bias_dropout_fusion(self) -> bool:
        """
        accepted, no effect: kernels are LibTorch's
        """
    @no_bias_dropout_fusion.setter
    def no_bias_dropout_fusion(self, arg0: bool) -> None:
        ...
    @property
    def no_bias_gelu_fusion(self) -> bool:
        """
        CUDA: ATen's bias add, GELU and bias-gradient sum instead of the fused bias-GELU kernels
        """
    @no_bias_gelu_fusion.setter
    def no_bias_gelu_fusion(self, arg0: bool) -> None:
        ...
    @property
    def no_bias_swiglu_fusion(self) -> bool:
        """
        accepted, no effect: kernels are LibTorch's
        """
    @no_bias_swiglu_fusion.setter
    def no_bias_swiglu_fusion(self, arg0: bool) -> None:
        ...
    @property
    def no_check_for_nan_in_loss_and_grad(self) -> bool:
        """
        accepted, no effect: the NaN check rides on the step's one read-back and stays; --skip-nan-iterations skips such updates instead of stopping
        """
    @no_check_for_nan_in_loss_and_grad.setter
    def no_check_for_nan_in_loss_and_grad(self, arg0: bool) -> None:
        ...
    @property
    def no_ckpt_fully_parallel_save(self) -> bool:
        """
        accepted, no effect: an option of megatron-core's torch_dist writer; torch_dist saves here are fully parallel, loads strict
        """
    @no_ckpt_fully_parallel_save.setter
    def no_ckpt_fully_parallel_save(self, arg0: bool) -> None:
        ...
    @property
    def no_ckpt_load_validate_sharding_integrity(self) -> bool:
        """
        accepted, no effect: an option of megatron-core's torch_dist writer; torch_dist saves here are fully parallel, loads strict
        """
    @no_ckpt_load_validate_sharding_integrity.setter
    def no_ckpt_load_validate_sharding_integrity(self, arg0: bool) -> None:
        ...
    @property
    def no_cpu_allocator_cache(self) -> bool:
        """
        return freed host memory to the OS at once instead of keeping it for the next allocation of the same size
        """
    @no_cpu_allocator_cache.setter
    def no_cpu_allocator_cache(self, arg0: bool) -> None:
        ...
    @property
    def no_create_attention_mask_in_dataloader(self) -> bool:
        """
        accepted, no effect: batches carry a mask only with --reset-attention-mask
        """
    @no_create_attention_mask_in_dataloader.setter
    def no_create_attention_mask_in_dataloader(self, arg0: bool) -> None:
        ...
    @property
    def no_data_sharding(self) -> bool:
        """
        cyclic: deal one permutation of the whole epoch round-robin, not each rank's own bucket shuffled
        """
    @no_data_sharding.setter
    def no_data_sharding(self, arg0: bool) -> None:
        ...
    @property
    def no_fp8_wgrad(self) -> bool:
        """
        weight-gradient GEMMs in the model's precision, not FP8
        """
    @no_fp8_wgrad.setter
    def no_fp8_wgrad(self, arg0: bool) -> None:
        ...
    @property
    def no_fsdp_prefetch(self) -> bool:
        """
        with optim_grads_params: gather each layer's parameters when it runs, not one layer ahead
        """
    @no_fsdp_prefetch.setter
    def no_fsdp_prefetch(self, arg0: bool) -> None:
        ...
    @property
    def no_gradient_accumulation_fusion(self) -> bool:
        """
        accepted, no effect: kernels are LibTorch's
        """
    @no_gradient_accumulation_fusion.setter
    def no_gradient_accumulation_fusion(self, arg0: bool) -> None:
        ...
    @property
    def no_load_optim(self) -> bool:
        """
        do not load the optimizer state and learning-rate schedule
        """
    @no_load_optim.setter
    def no_load_optim(self, arg0: bool) -> None:
        ...
    @property
    def no_load_rng(self) -> bool:
        """
        do not load the RNG states
        """
    @no_load_rng.setter
    def no_load_rng(self, arg0: bool) -> None:
        ...
    @property
    def no_log_loss_scale_to_tensorboard(self) -> bool:
        """
        no loss-scale scalars
        """
    @no_log_loss_scale_to_tensorboard.setter
    def no_log_loss_scale_to_tensorboard(self, arg0: bool) -> None:
        ...
    @property
    def no_masked_softmax_fusion(self) -> bool:
        """
        accepted, no effect: attention is at::scaled_dot_product_attention (flash / memory-efficient kernels on CUDA)
        """
    @no_masked_softmax_fusion.setter
    def no_masked_softmax_fusion(self, arg0: bool) -> None:
        ...
    @property
    def no_mmap_bin_files(self) -> bool:
        """
        read the .bin files instead of memory-mapping them
        """
    @no_mmap_bin_files.setter
    def no_mmap_bin_files(self, arg0: bool) -> None:
        ...
    @property
    def no_persist_layer_norm(self) -> bool:
        """
        CUDA: ATen's LayerNorm / RMSNorm kernels and a separate residual add instead of the fused kernels
        """
    @no_persist_layer_norm.setter
    def no_persist_layer_norm(self, arg0: bool) -> None:
        ...
    @property
    def no_position_embedding(self) -> bool:
        """
        Megatron-LM's deprecated switch: accepted with --position-embedding-type rope (no learned positions)
        """
    @no_position_embedding.setter
    def no_position_embedding(self, arg0: bool) -> None:
        ...
    @property
    def no_rope_fusion(self) -> bool:
        """
        accepted, no effect: kernels are LibTorch's
        """
    @no_rope_fusion.setter
    def no_rope_fusion(self, arg0: bool) -> None:
        ...
    @property
    def no_save_optim(self) -> bool:
        """
        leave the optimizer state out of saved checkpoints
        """
    @no_save_optim.setter
    def no_save_optim(self, arg0: bool) -> None:
        ...
    @property
    def no_save_rng(self) -> bool:
        """
        leave the RNG states out of saved checkpoints
        """
    @no_save_rng.setter
    def no_save_rng(self, arg0: bool) -> None:
        ...
    @property
    def norm_epsilon(self) -> float:
        """
        normalisation epsilon
        """
    @norm_epsilon.setter
    def norm_epsilon(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def normalization(self) -> str:
        """
        LayerNorm | RMSNorm
        """
    @normalization.setter
    def normalization(self, arg0: str) -> None:
        ...
    @property
    def num_attention_heads(self) -> int:
        """
        attention heads
        """
    @num_attention_heads.setter
    def num_attention_heads(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def num_distributed_optimizer_instances(self) -> int:
        """
        with --use-distributed-optimizer: the data-parallel ranks in N blocks, each holding a whole optimizer state sharded over its ranks; the gradients reduced in each block, then averaged across the blocks
        """
    @num_distributed_optimizer_instances.setter
    def num_distributed_optimizer_instances(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def num_experts(self) -> int | None:
        """
        experts per MoE layer (unset: dense MLPs)
        """
    @num_experts.setter
    def num_experts(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def num_layers(self) -> int:
        """
        number of transformer layers
        """
    @num_layers.setter
    def num_layers(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def num_layers_at_end_in_bf16(self) -> int:
        """
        with --first-last-layers-bf16: last layers kept
        """
    @num_layers_at_end_in_bf16.setter
    def num_layers_at_end_in_bf16(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def num_layers_at_start_in_bf16(self) -> int:
        """
        with --first-last-layers-bf16: first layers kept
        """
    @num_layers_at_start_in_bf16.setter
    def num_layers_at_start_in_bf16(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def num_layers_per_virtual_pipeline_stage(self) -> int | None:
        """
        layers per model chunk: the interleaved 1F1B schedule
        """
    @num_layers_per_virtual_pipeline_stage.setter
    def num_layers_per_virtual_pipeline_stage(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def num_microbatches(self) -> int:
        """
        global batch / (micro batch x DP)
        """
    @num_microbatches.setter
    def num_microbatches(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def num_query_groups(self) -> int:
        """
        key/value heads with --group-query-attention
        """
    @num_query_groups.setter
    def num_query_groups(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def num_virtual_stages_per_pipeline_rank(self) -> int | None:
        """
        model chunks per pipeline stage: the interleaved 1F1B schedule
        """
    @num_virtual_stages_per_pipeline_rank.setter
    def num_virtual_stages_per_pipeline_rank(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def num_workers(self) -> int:
        """
        batches prefetched in the background
        """
    @num_workers.setter
    def num_workers(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def openai_gelu(self) -> bool:
        """
        tanh-approximated GELU, as OpenAI's GPT-2
        """
    @openai_gelu.setter
    def openai_gelu(self, arg0: bool) -> None:
        ...
    @property
    def optimizer(self) -> str:
        """
        adam | sgd
        """
    @optimizer.setter
    def optimizer(self, arg0: str) -> None:
        ...
    @property
    def outer_dp_sharding_strategy(self) -> str:
        """
        hybrid FSDP's outer level: no_shard (the only one here: one sharded group over all data-parallel ranks)
        """
    @outer_dp_sharding_strategy.setter
    def outer_dp_sharding_strategy(self, arg0: str) -> None:
        ...
    @property
    def overlap_grad_reduce(self) -> bool:
        """
        all-reduce each data-parallel gradient bucket during the backward pass, as soon as the last micro-batch completes it (with --use-distributed-optimizer each bucket is reduced to the ranks whose shards hold it)
        """
    @overlap_grad_reduce.setter
    def overlap_grad_reduce(self, arg0: bool) -> None:
        ...
    @property
    def overlap_moe_expert_parallel_comm(self) -> bool:
        """
        accepted, no effect: the expert all-to-alls are not overlapped with another micro-batch's compute
        """
    @overlap_moe_expert_parallel_comm.setter
    def overlap_moe_expert_parallel_comm(self, arg0: bool) -> None:
        ...
    @property
    def overlap_p2p_communication_warmup_flush(self) -> bool:
        """
        accepted, no effect: the pipeline's sends and receives are not split from its warm-up and flush
        """
    @overlap_p2p_communication_warmup_flush.setter
    def overlap_p2p_communication_warmup_flush(self, arg0: bool) -> None:
        ...
    @property
    def overlap_param_gather(self) -> bool:
        """
        with --use-distributed-optimizer and --overlap-grad-reduce: gather the updated parameters under the next forward pass, each bucket waited for by the first layer that reads it (optim_grads_params prefetches anyway)
        """
    @overlap_param_gather.setter
    def overlap_param_gather(self, arg0: bool) -> None:
        ...
    @property
    def overlap_param_gather_with_optimizer_step(self) -> bool:
        """
        accepted, no effect: the parameter all-gather starts once the whole optimizer step is done
        """
    @overlap_param_gather_with_optimizer_step.setter
    def overlap_param_gather_with_optimizer_step(self, arg0: bool) -> None:
        ...
    @property
    def override_data_check(self) -> bool:
        """
        resume although the data files, split, sequence length or seed differ from the checkpoint's
        """
    @override_data_check.setter
    def override_data_check(self, arg0: bool) -> None:
        ...
    @property
    def override_opt_param_scheduler(self) -> bool:
        """
        on resume, keep this run's learning-rate schedule where the checkpoint's differs
        """
    @override_opt_param_scheduler.setter
    def override_opt_param_scheduler(self, arg0: bool) -> None:
        ...
    @property
    def pad_vocab_size_to(self) -> int | None:
        """
        pad the vocabulary to exactly this size (a multiple of TP; BLOOM's 250880)
        """
    @pad_vocab_size_to.setter
    def pad_vocab_size_to(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def per_split_data_args_path(self) -> str:
        """
        a JSON file of the three: {"train": [...], "valid": [...], "test": [...]}, each a list or one string
        """
    @per_split_data_args_path.setter
    def per_split_data_args_path(self, arg0: str) -> None:
        ...
    @property
    def persistent_save_interval(self) -> int | None:
        """
        = --save-interval
        """
    @persistent_save_interval.setter
    def persistent_save_interval(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def pipeline_model_parallel_layout(self) -> str:
        """
        each virtual stage's layers, as Megatron-Core's layout string: '|' between stages (virtual rank major), E embedding, t transformer layer, L loss, (...)*n and x*n repeat; sets the virtual stages per rank
        """
    @pipeline_model_parallel_layout.setter
    def pipeline_model_parallel_layout(self, arg0: str) -> None:
        ...
    @property
    def pipeline_model_parallel_size(self) -> int:
        """
        pipeline stages
        """
    @pipeline_model_parallel_size.setter
    def pipeline_model_parallel_size(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def position_embedding_type(self) -> str:
        """
        learned_absolute | rope | alibi (BLOOM's linear attention biases) | none
        """
    @position_embedding_type.setter
    def position_embedding_type(self, arg0: str) -> None:
        ...
    @property
    def pp_partition_method(self) -> str:
        """
        type:transformer accepted, no effect: each pipeline stage holds an equal share of the transformer layers
        """
    @pp_partition_method.setter
    def pp_partition_method(self, arg0: str) -> None:
        ...
    @property
    def profile(self) -> bool:
        """
        profile the iterations after --profile-step-start up to --profile-step-end on --profile-ranks
        """
    @profile.setter
    def profile(self, arg0: bool) -> None:
        ...
    @property
    def profile_ranks(self) -> list[int]:
        """
        global ranks to profile
        """
    @profile_ranks.setter
    def profile_ranks(self, arg0: collections.abc.Sequence[typing.SupportsInt]) -> None:
        ...
    @property
    def profile_step_end(self) -> int:
        """
        profiling stops after this iteration
        """
    @profile_step_end.setter
    def profile_step_end(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def profile_step_start(self) -> int:
        """
        profiling starts after this many iterations
        """
    @profile_step_start.setter
    def profile_step_start(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def qk_layernorm(self) -> bool:
        """
        normalise each head's query and key (--normalization) before RoPE
        """
    @qk_layernorm.setter
    def qk_layernorm(self, arg0: bool) -> None:
        ...
    @property
    def qk_layernorm_across_heads(self) -> bool:
        """
        with --qk-layernorm: one RMSNorm over all heads' queries and one over the keys (OLMoE), not per head
        """
    @qk_layernorm_across_heads.setter
    def qk_layernorm_across_heads(self, arg0: bool) -> None:
        ...
    @property
    def rampup_batch_size(self) -> list[int]:
        """
        START INCREMENT SAMPLES: the global batch grows from START by INCREMENT over SAMPLES
        """
    @rampup_batch_size.setter
    def rampup_batch_size(self, arg0: collections.abc.Sequence[typing.SupportsInt]) -> None:
        ...
    @property
    def recompute_activations(self) -> bool:
        """
        = --recompute-granularity selective
        """
    @recompute_activations.setter
    def recompute_activations(self, arg0: bool) -> None:
        ...
    @property
    def recompute_granularity(self) -> str:
        """
        full | selective
        """
    @recompute_granularity.setter
    def recompute_granularity(self, arg0: str) -> None:
        ...
    @property
    def recompute_method(self) -> str:
        """
        uniform | block
        """
    @recompute_method.setter
    def recompute_method(self, arg0: str) -> None:
        ...
    @property
    def recompute_modules(self) -> list[str]:
        """
        with --recompute-granularity selective: core_attn (default), mlp (dense MLPs), shared_experts; the rest are refused with the reason
        """
    @recompute_modules.setter
    def recompute_modules(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def recompute_num_layers(self) -> int:
        """
        layers per recompute unit
        """
    @recompute_num_layers.setter
    def recompute_num_layers(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def rerun_mode(self) -> str:
        """
        accepted, no effect: a NaN or Inf loss or gradient norm stops the run with one line (as a reproducible one does under Megatron-LM's validate_results; its rerun to tell a transient fault apart is not implemented); report_stats is refused
        """
    @rerun_mode.setter
    def rerun_mode(self, arg0: str) -> None:
        ...
    @property
    def reset_attention_mask(self) -> bool:
        """
        no attention across EOD
        """
    @reset_attention_mask.setter
    def reset_attention_mask(self, arg0: bool) -> None:
        ...
    @property
    def reset_position_ids(self) -> bool:
        """
        restart positions after each EOD
        """
    @reset_position_ids.setter
    def reset_position_ids(self, arg0: bool) -> None:
        ...
    @property
    def rope_scaling_factor(self) -> float:
        """
        with --use-rope-scaling: the low frequencies' divisor
        """
    @rope_scaling_factor.setter
    def rope_scaling_factor(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def rope_scaling_high_freq_factor(self) -> float:
        """
        with --use-rope-scaling: wavelengths below original context / this are kept
        """
    @rope_scaling_high_freq_factor.setter
    def rope_scaling_high_freq_factor(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def rope_scaling_low_freq_factor(self) -> float:
        """
        with --use-rope-scaling: wavelengths above original context / this are scaled fully
        """
    @rope_scaling_low_freq_factor.setter
    def rope_scaling_low_freq_factor(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def rope_scaling_original_max_position_embeddings(self) -> int:
        """
        with --use-rope-scaling: the context length the frequencies were trained for
        """
    @rope_scaling_original_max_position_embeddings.setter
    def rope_scaling_original_max_position_embeddings(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def rotary_base(self) -> float:
        """
        RoPE base
        """
    @rotary_base.setter
    def rotary_base(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def rotary_interleaved(self) -> bool:
        """
        rotate channel pairs (2i, 2i+1) instead of the two halves
        """
    @rotary_interleaved.setter
    def rotary_interleaved(self, arg0: bool) -> None:
        ...
    @property
    def rotary_percent(self) -> float:
        """
        fraction of head dim rotated
        """
    @rotary_percent.setter
    def rotary_percent(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def save(self) -> str:
        """
        directory to save checkpoints to
        """
    @save.setter
    def save(self, arg0: str) -> None:
        ...
    @property
    def save_interval(self) -> int | None:
        """
        iterations between checkpoints to --save (one is also saved when training ends); without --save, none
        """
    @save_interval.setter
    def save_interval(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def save_retain_interval(self) -> int | None:
        """
        after each save, delete the older checkpoints whose iteration is not a multiple of N (a multiple of --save-interval)
        """
    @save_retain_interval.setter
    def save_retain_interval(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def seed(self) -> int:
        """
        random seed
        """
    @seed.setter
    def seed(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def seq_length(self) -> int:
        """
        tokens per sample
        """
    @seq_length.setter
    def seq_length(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def sequence_parallel(self) -> bool:
        """
        split norms and dropout along the sequence over TP
        """
    @sequence_parallel.setter
    def sequence_parallel(self, arg0: bool) -> None:
        ...
    @property
    def sgd_momentum(self) -> float:
        """
        SGD momentum
        """
    @sgd_momentum.setter
    def sgd_momentum(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def skip_nan_iterations(self) -> bool:
        """
        skip the update of an iteration whose loss is NaN/Inf instead of stopping
        """
    @skip_nan_iterations.setter
    def skip_nan_iterations(self, arg0: bool) -> None:
        ...
    @property
    def spec(self) -> list[str]:
        """
        local, or a GPT layer spec of megatron.core.models.gpt.gpt_layer_specs: accepted, no effect (the layers follow the flags); other specs are refused
        """
    @spec.setter
    def spec(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def split(self) -> str:
        """
        train, valid, test proportions
        """
    @split.setter
    def split(self, arg0: str) -> None:
        ...
    @property
    def squared_relu(self) -> bool:
        """
        squared ReLU MLP activation, relu(x)^2, instead of GELU
        """
    @squared_relu.setter
    def squared_relu(self, arg0: bool) -> None:
        ...
    @property
    def swiglu(self) -> bool:
        """
        SwiGLU MLP instead of GELU
        """
    @swiglu.setter
    def swiglu(self, arg0: bool) -> None:
        ...
    @property
    def sync_tp_duplicated_parameters(self) -> bool:
        """
        accepted, no effect: parameters replicated over tensor-parallel ranks get the same gradients and stay equal
        """
    @sync_tp_duplicated_parameters.setter
    def sync_tp_duplicated_parameters(self, arg0: bool) -> None:
        ...
    @property
    def te_rng_tracker(self) -> bool:
        """
        accepted, no effect: dropout streams come from the library's RNG tracker
        """
    @te_rng_tracker.setter
    def te_rng_tracker(self, arg0: bool) -> None:
        ...
    @property
    def tensor_model_parallel_size(self) -> int:
        """
        tensor-parallel ranks
        """
    @tensor_model_parallel_size.setter
    def tensor_model_parallel_size(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def tensorboard_dir(self) -> str:
        """
        TensorBoard event file of the run's scalars (last rank), and where --use-pytorch-profiler writes its trace
        """
    @tensorboard_dir.setter
    def tensorboard_dir(self, arg0: str) -> None:
        ...
    @property
    def tensorboard_log_interval(self) -> int:
        """
        iterations between TensorBoard scalars
        """
    @tensorboard_log_interval.setter
    def tensorboard_log_interval(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def tensorboard_queue_size(self) -> int:
        """
        scalars held before the event file is flushed
        """
    @tensorboard_queue_size.setter
    def tensorboard_queue_size(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def test_data_path(self) -> list[str]:
        """
        the test split's own blend, as --data-path
        """
    @test_data_path.setter
    def test_data_path(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def test_mode(self) -> bool:
        """
        check each iteration that every parameter is bit-identical on its data-parallel replicas and its tensor-parallel copies (norms, biases); stop with the parameter and the ranks if not
        """
    @test_mode.setter
    def test_mode(self, arg0: bool) -> None:
        ...
    @property
    def tf32(self) -> bool:
        """
        TF32 tensor cores for fp32 matmuls and convolutions on CUDA
        """
    @tf32.setter
    def tf32(self, arg0: bool) -> None:
        ...
    @property
    def tiktoken_num_special_tokens(self) -> int:
        """
        TikTokenizer: special tokens before the vocabulary
        """
    @tiktoken_num_special_tokens.setter
    def tiktoken_num_special_tokens(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def tiktoken_pattern(self) -> str:
        """
        TikTokenizer's split pattern (default v2)
        """
    @tiktoken_pattern.setter
    def tiktoken_pattern(self, arg0: str) -> None:
        ...
    @property
    def timing_log_level(self) -> int:
        """
        accepted, no effect: forward-backward and optimizer times are always logged
        """
    @timing_log_level.setter
    def timing_log_level(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def timing_log_option(self) -> str:
        """
        how the timers report across ranks: the maximum, the minimum and maximum, or every rank's time
        """
    @timing_log_option.setter
    def timing_log_option(self, arg0: str) -> None:
        ...
    @property
    def tokenizer_hf_no_include_special_tokens(self) -> bool:
        """
        HuggingFaceTokenizer: leave out the post-processor's tokens (BOS/EOS) when tokenizing
        """
    @tokenizer_hf_no_include_special_tokens.setter
    def tokenizer_hf_no_include_special_tokens(self, arg0: bool) -> None:
        ...
    @property
    def tokenizer_model(self) -> str:
        """
        HuggingFaceTokenizer: a tokenizer.json, or the folder holding it; TikTokenizer: Megatron-LM's tiktoken JSON; the SentencePiece types: a .model file
        """
    @tokenizer_model.setter
    def tokenizer_model(self, arg0: str) -> None:
        ...
    @property
    def tokenizer_name_or_path(self) -> str:
        """
        = --tokenizer-model (Megatron-DeepSpeed's PretrainedFromHF)
        """
    @tokenizer_name_or_path.setter
    def tokenizer_name_or_path(self, arg0: str) -> None:
        ...
    @property
    def tokenizer_special_tokens(self) -> list[str]:
        """
        TikTokenizer: its special tokens in id order (all of <unk> <s> </s> <mask> <pad> <cls> <sep> among them); HuggingFaceTokenizer / GPT2BPETokenizer: tokens added after the vocabulary, matched whole in the text
        """
    @tokenizer_special_tokens.setter
    def tokenizer_special_tokens(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def tokenizer_type(self) -> str:
        """
        GPT2BPETokenizer | HuggingFaceTokenizer | TikTokenizer | SentencePieceTokenizer | GPTSentencePieceTokenizer | Llama2Tokenizer | NullTokenizer (PretrainedFromHF, Megatron-DeepSpeed's name: = HuggingFaceTokenizer)
        """
    @tokenizer_type.setter
    def tokenizer_type(self, arg0: str) -> None:
        ...
    @property
    def tp_comm_overlap(self) -> bool:
        """
        accepted, no effect: Transformer Engine's userbuffers overlap is not built; --domino hides TP communication
        """
    @tp_comm_overlap.setter
    def tp_comm_overlap(self, arg0: bool) -> None:
        ...
    @property
    def tp_comm_overlap_cfg(self) -> str:
        """
        accepted, no effect: a --tp-comm-overlap configuration
        """
    @tp_comm_overlap_cfg.setter
    def tp_comm_overlap_cfg(self, arg0: str) -> None:
        ...
    @property
    def tp_only_amax_red(self) -> bool:
        """
        reduce FP8 amaxes over tensor-parallel ranks only, not DP x CP
        """
    @tp_only_amax_red.setter
    def tp_only_amax_red(self, arg0: bool) -> None:
        ...
    @property
    def train_data_path(self) -> list[str]:
        """
        the training split's own blend, as --data-path (no --split)
        """
    @train_data_path.setter
    def train_data_path(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def train_iters(self) -> int | None:
        """
        iterations to train
        """
    @train_iters.setter
    def train_iters(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def train_samples(self) -> int | None:
        """
        samples to train (instead of --train-iters)
        """
    @train_samples.setter
    def train_samples(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def transformer_impl(self) -> str:
        """
        accepted, no effect: kernels are LibTorch's
        """
    @transformer_impl.setter
    def transformer_impl(self, arg0: str) -> None:
        ...
    @property
    def untie_embeddings_and_output_weights(self) -> bool:
        """
        separate output layer weight
        """
    @untie_embeddings_and_output_weights.setter
    def untie_embeddings_and_output_weights(self, arg0: bool) -> None:
        ...
    @property
    def use_checkpoint_args(self) -> bool:
        """
        the model's shape and tokenizer settings not given here, and the parallel sizes, from --load's saved args
        """
    @use_checkpoint_args.setter
    def use_checkpoint_args(self, arg0: bool) -> None:
        ...
    @property
    def use_checkpoint_opt_param_scheduler(self) -> bool:
        """
        on resume, take the checkpoint's learning-rate schedule (--lr, --min-lr, warm-up, decay length and style)
        """
    @use_checkpoint_opt_param_scheduler.setter
    def use_checkpoint_opt_param_scheduler(self, arg0: bool) -> None:
        ...
    @property
    def use_distributed_optimizer(self) -> bool:
        """
        shard optimizer state over data-parallel ranks (ZeRO-1)
        """
    @use_distributed_optimizer.setter
    def use_distributed_optimizer(self, arg0: bool) -> None:
        ...
    @property
    def use_flash_attn(self) -> bool:
        """
        accepted, no effect: attention is at::scaled_dot_product_attention (flash / memory-efficient kernels on CUDA)
        """
    @use_flash_attn.setter
    def use_flash_attn(self, arg0: bool) -> None:
        ...
    @property
    def use_fused_weighted_squared_relu(self) -> bool:
        """
        accepted, no effect: the experts' squared ReLU and routing weights are LibTorch's kernels, same result
        """
    @use_fused_weighted_squared_relu.setter
    def use_fused_weighted_squared_relu(self, arg0: bool) -> None:
        ...
    @property
    def use_mcore_models(self) -> bool:
        """
        accepted, no effect: there is one model implementation
        """
    @use_mcore_models.setter
    def use_mcore_models(self, arg0: bool) -> None:
        ...
    @property
    def use_megatron_fsdp(self) -> bool:
        """
        fully sharded data parallelism: shard what --data-parallel-sharding-strategy says over data-parallel ranks
        """
    @use_megatron_fsdp.setter
    def use_megatron_fsdp(self, arg0: bool) -> None:
        ...
    @property
    def use_nccl_ub(self) -> bool:
        """
        accepted, no effect: NCCL user buffers are not registered
        """
    @use_nccl_ub.setter
    def use_nccl_ub(self, arg0: bool) -> None:
        ...
    @property
    def use_persistent_ckpt_worker(self) -> bool:
        """
        accepted, no effect: --async-save always writes on a background thread of the training process
        """
    @use_persistent_ckpt_worker.setter
    def use_persistent_ckpt_worker(self, arg0: bool) -> None:
        ...
    @property
    def use_precision_aware_optimizer(self) -> bool:
        """
        accepted, no effect: the main parameters, gradients and Adam moments are fp32 (what their dtype flags take here)
        """
    @use_precision_aware_optimizer.setter
    def use_precision_aware_optimizer(self, arg0: bool) -> None:
        ...
    @property
    def use_pytorch_profiler(self) -> bool:
        """
        with --profile: a Kineto trace (CPU and CUDA) into --tensorboard-dir; without: CUDA profiler ranges for nsys
        """
    @use_pytorch_profiler.setter
    def use_pytorch_profiler(self, arg0: bool) -> None:
        ...
    @property
    def use_rope_scaling(self) -> bool:
        """
        Llama 3's RoPE frequency scaling (Hugging Face rope_type llama3)
        """
    @use_rope_scaling.setter
    def use_rope_scaling(self, arg0: bool) -> None:
        ...
    @property
    def use_rotary_position_embeddings(self) -> bool:
        """
        = --position-embedding-type rope
        """
    @use_rotary_position_embeddings.setter
    def use_rotary_position_embeddings(self, arg0: bool) -> None:
        ...
    @property
    def use_torch_fsdp2(self) -> bool:
        """
        = --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params (one FSDP implementation here)
        """
    @use_torch_fsdp2.setter
    def use_torch_fsdp2(self, arg0: bool) -> None:
        ...
    @property
    def use_tp_pp_dp_mapping(self) -> bool:
        """
        order the ranks TP, CP, PP, DP instead of TP, CP, DP, PP (a pipeline's stages on adjacent ranks)
        """
    @use_tp_pp_dp_mapping.setter
    def use_tp_pp_dp_mapping(self, arg0: bool) -> None:
        ...
    @property
    def use_transformer_engine_op_fuser(self) -> bool:
        """
        accepted, no effect: kernels are LibTorch's
        """
    @use_transformer_engine_op_fuser.setter
    def use_transformer_engine_op_fuser(self, arg0: bool) -> None:
        ...
    @property
    def valid_data_path(self) -> list[str]:
        """
        the validation split's own blend, as --data-path
        """
    @valid_data_path.setter
    def valid_data_path(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def valid_num_workers(self) -> int:
        """
        accepted, no effect: validation reads as --num-workers says
        """
    @valid_num_workers.setter
    def valid_num_workers(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def verify_integrity(self) -> bool:
        """
        torch_dist: write integrity.json (every file's SHA-256) with each save and check it before loading
        """
    @verify_integrity.setter
    def verify_integrity(self, arg0: bool) -> None:
        ...
    @property
    def virtual_pipeline_model_parallel_size(self) -> int | None:
        """
        model chunks per pipeline stage
        """
    @virtual_pipeline_model_parallel_size.setter
    def virtual_pipeline_model_parallel_size(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def vocab_file(self) -> str:
        """
        GPT-2 vocab.json
        """
    @vocab_file.setter
    def vocab_file(self, arg0: str) -> None:
        ...
    @property
    def vocab_size(self) -> int | None:
        """
        vocabulary size of NullTokenizer / mock data; TikTokenizer's with its special tokens (default 131072)
        """
    @vocab_size.setter
    def vocab_size(self, arg0: typing.SupportsInt | None) -> None:
        ...
    @property
    def wandb_project(self) -> str:
        """
        refused: Weights & Biases needs network access; use --tensorboard-dir
        """
    @wandb_project.setter
    def wandb_project(self, arg0: str) -> None:
        ...
    @property
    def weight_decay(self) -> float:
        """
        decoupled weight decay (not on biases and norms)
        """
    @weight_decay.setter
    def weight_decay(self, arg0: typing.SupportsFloat) -> None:
        ...
    @property
    def wgrad_deferral_limit(self) -> int:
        """
        accepted, no effect: the output layer's weight gradient is computed in its own backward step
        """
    @wgrad_deferral_limit.setter
    def wgrad_deferral_limit(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def world_size(self) -> int:
        """
        ranks in the job
        """
    @world_size.setter
    def world_size(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def zero_stage(self) -> int | None:
        """
        Megatron-DeepSpeed's ZeRO stage: 0-3 = --data-parallel-sharding-strategy no_shard, optim, optim_grads, optim_grads_params
        """
    @zero_stage.setter
    def zero_stage(self, arg0: typing.SupportsInt | None) -> None:
        ...
class BatchIterator:
    """
    What forward_step draws micro-batches from: next(it) is a dict of tensors (None for a tensor not created).
    """
    def __iter__(self) -> typing.Any:
        ...
    def __next__(self) -> typing.Any:
        ...
class BatchOptions:
    """
    How samples become a batch (Megatron's GPT sample construction).
    """
    add_extra_token_to_sequence: bool
    create_attention_mask: bool
    eod_mask_loss: bool
    pin_memory: bool
    reset_attention_mask: bool
    reset_position_ids: bool
    def __init__(self, **kwargs) -> None:
        """
        Keywords are field names; the others keep their defaults.
        """
    def __repr__(self) -> str:
        ...
    @property
    def eod_token(self) -> int:
        ...
    @eod_token.setter
    def eod_token(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def sequence_length(self) -> int:
        ...
    @sequence_length.setter
    def sequence_length(self, arg0: typing.SupportsInt) -> None:
        ...
class BatchSampler:
    """
    Yields this data-parallel rank's micro-batches of sample indices.
    """
    def __iter__(self) -> typing.Any:
        ...
    def __next__(self) -> list:
        ...
    @property
    def consumed_samples(self) -> int:
        """
        Samples consumed by all data-parallel ranks so far.
        """
class BlendedDataset(MegatronDataset):
    """
    Weighted blend of datasets (Megatron-LM's BlendedDataset).
    """
    def __init__(self, datasets: collections.abc.Sequence[MegatronDataset], weights: collections.abc.Sequence[typing.SupportsFloat], size: typing.SupportsInt | None = None) -> None:
        """
        size: samples to draw by the weights; None: exactly weights[i] samples of dataset i.
        """
    @property
    def dataset_index(self) -> numpy.ndarray:
        ...
    @property
    def dataset_sample_index(self) -> numpy.ndarray:
        ...
class BpeTrainer:
    """
    Trains a GPT-2 style byte-level BPE vocabulary (vocab.json + merges.txt).
    """
    def __init__(self, vocab_size: typing.SupportsInt = 8192, min_frequency: typing.SupportsInt = 2) -> None:
        ...
    def add_text(self, text: typing.Any) -> None:
        """
        Counts the pre-tokenized words of one document.
        """
    def train_and_save(self, dir: str) -> None:
        """
        Learns the merges and writes {dir}/vocab.json and {dir}/merges.txt.
        """
    @property
    def num_words(self) -> int:
        ...
class ColumnParallelLinear(torch._C.cpp.nn.Module):
    """
    Y = XA + b with A split by columns across the TP group: weight [out/tp, in].
    """
    def __init__(self, input_size: typing.SupportsInt, output_size: typing.SupportsInt, *, bias: bool = True, gather_output: bool = False, sequence_parallel: bool = False, skip_weight_param_allocation: bool = False, num_chunks: typing.SupportsInt = 1, init_method_std: typing.SupportsFloat = 0.02, perform_initialization: bool = True, tp_group: ProcessGroup = None) -> None:
        ...
    def forward(self, input: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        """
        input [*, in] (or [s/tp, b, in] with sequence_parallel) -> [*, out/tp], or [*, out] with gather_output; weight: the tied weight when skip_weight_param_allocation.
        """
    def param_inits(self) -> list[tuple[str, ParamInit]]:
        ...
    @property
    def output_size_per_partition(self) -> int:
        ...
class DType:
    """
    Element type codes of Megatron's .idx header.
    
    Members:
    
      UINT8
    
      INT8
    
      INT16
    
      INT32
    
      INT64
    
      FLOAT64
    
      FLOAT32
    
      UINT16
    """
    FLOAT32: typing.ClassVar[DType]  # value = <DType.FLOAT32: 7>
    FLOAT64: typing.ClassVar[DType]  # value = <DType.FLOAT64: 6>
    INT16: typing.ClassVar[DType]  # value = <DType.INT16: 3>
    INT32: typing.ClassVar[DType]  # value = <DType.INT32: 4>
    INT64: typing.ClassVar[DType]  # value = <DType.INT64: 5>
    INT8: typing.ClassVar[DType]  # value = <DType.INT8: 2>
    UINT16: typing.ClassVar[DType]  # value = <DType.UINT16: 8>
    UINT8: typing.ClassVar[DType]  # value = <DType.UINT8: 1>
    __members__: typing.ClassVar[dict[str, DType]]  # value = {'UINT8': <DType.UINT8: 1>, 'INT8': <DType.INT8: 2>, 'INT16': <DType.INT16: 3>, 'INT32': <DType.INT32: 4>, 'INT64': <DType.INT64: 5>, 'FLOAT64': <DType.FLOAT64: 6>, 'FLOAT32': <DType.FLOAT32: 7>, 'UINT16': <DType.UINT16: 8>}
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def itemsize(self) -> int:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def numpy(self) -> numpy.dtype[typing.Any]:
        """
        The numpy dtype.
        """
    @property
    def value(self) -> int:
        ...
class DataIterator(BatchIterator):
    """
    Batches from a dataset and a sampler (what forward_step reads): next(it) is a dict of text (the samples as read), tokens, labels, loss_mask, attention_mask (None when not created) and position_ids; optionally prefetched on a background thread.
    """
    def __init__(self, dataset: MegatronDataset, sampler: BatchSampler, options: BatchOptions = ..., prefetch: typing.SupportsInt = 0, check_files_every: typing.SupportsInt = 100) -> None:
        """
        The iterator advances the sampler (from its background thread when prefetching).
        """
    @property
    def consumed_samples(self) -> int:
        """
        consumed_samples after the batches handed out so far.
        """
class Datasets:
    """
    What dataset_builder returns: train (required), valid, test, and the EOD id.
    """
    def __init__(self, train: typing.Any, valid: typing.Any = None, test: typing.Any = None, eod_token: typing.SupportsInt = -1) -> None:
        """
        eod_token is needed by --reset-position-ids, --reset-attention-mask and --eod-mask-loss.
        """
    @property
    def eod_token(self) -> int:
        ...
    @property
    def test(self) -> typing.Any:
        ...
    @property
    def train(self) -> typing.Any:
        ...
    @property
    def valid(self) -> typing.Any:
        ...
class EvaluationRecord:
    """
    One evaluation on the valid or test split.
    """
    @property
    def iteration(self) -> int:
        ...
    @property
    def metrics(self) -> dict[str, float]:
        ...
    @property
    def split(self) -> str:
        ...
class Fp8Config:
    """
    FP8 GEMM settings, Megatron-LM's --fp8-* flags (e4m3 | hybrid; delayed | tensorwise).
    """
    def __init__(self, format: str = 'hybrid', recipe: str = 'delayed', margin: typing.SupportsInt = 0, amax_history_len: typing.SupportsInt = 1, amax_compute_algo: str = 'most_recent', wgrad: bool = True) -> None:
        ...
    @property
    def amax_history_len(self) -> int:
        ...
    @property
    def margin(self) -> int:
        ...
    @property
    def wgrad(self) -> bool:
        ...
class Fp8Meta:
    """
    One linear layer's delayed-scaling state: amax_history [len, 3] and scale [3] for its input, weight and output gradient.
    """
    amax_history: torch.Tensor
    scale: torch.Tensor
    def __init__(self, config: Fp8Config) -> None:
        ...
    def update_scales(self) -> None:
        """
        The delayed recipe's step: scales from the history, then the history rolls.
        """
class GPT2BPETokenizer(Tokenizer):
    """
    GPT-2 byte-level BPE from vocab.json and merges.txt, encoding as HF tokenizers does.
    """
    def __init__(self, vocab_file: str, merge_file: str, special_tokens: collections.abc.Sequence[str] = []) -> None:
        """
        special_tokens: added after the vocabulary unless in it, matched whole in the text (--tokenizer-special-tokens).
        """
    def token_to_id(self, token: str) -> int:
        """
        Id of a vocabulary entry (in its byte-to-unicode spelling), or -1.
        """
class GPTDataset(MegatronDataset):
    """
    Megatron-LM's GPTDataset: fixed-length samples over shuffled documents, with the same document, sample and shuffle indices as Megatron-LM (cached as .npy files).
    """
    def __init__(self, dataset: IndexedDataset, range: tuple[typing.SupportsInt, typing.SupportsInt] | None = None, num_samples: typing.SupportsInt | None = None, split: Split = Split.TRAIN, config: GPTDatasetConfig = ...) -> None:
        """
        Samples from sequences [range[0], range[1]) of dataset (all when None); num_samples: at least this many (more epochs as needed), one epoch when None.
        """
    def get(self, idx: typing.SupportsInt) -> tuple:
        """
        Sample idx as (tokens, ids of the documents it spans).
        """
    @property
    def cache_prefix(self) -> str:
        ...
    @property
    def document_index(self) -> numpy.ndarray:
        """
        [E * N] int32, a read-only view (memory-mapped when loaded from the cache).
        """
    @property
    def loaded_from_cache(self) -> bool:
        ...
    @property
    def num_epochs(self) -> int:
        ...
    @property
    def sample_index(self) -> numpy.ndarray:
        """
        [S + 1, 2] int64 (document-index position, token offset) of each sample, a read-only view.
        """
    @property
    def separate_final_epoch(self) -> bool:
        ...
    @property
    def shuffle_index(self) -> numpy.ndarray:
        """
        [S] int64 permutation of the samples, a read-only view.
        """
class GPTDatasetConfig:
    """
    Settings of GPTDataset (Megatron's GPTDatasetConfig).
    """
    add_extra_token_to_sequence: bool
    build_cache: bool
    drop_last_partial_validation_sequence: bool
    mmap_bin_files: bool
    path_to_cache: str
    split: str
    def __init__(self, **kwargs) -> None:
        """
        Keywords are field names; the others keep their defaults.
        """
    def __repr__(self) -> str:
        ...
    @property
    def pad_token(self) -> int:
        ...
    @pad_token.setter
    def pad_token(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def random_seed(self) -> int:
        ...
    @random_seed.setter
    def random_seed(self, arg0: typing.SupportsInt) -> None:
        ...
    @property
    def sequence_length(self) -> int:
        ...
    @sequence_length.setter
    def sequence_length(self, arg0: typing.SupportsInt) -> None:
        ...
class GPTModel(torch._C.cpp.nn.Module):
    """
    Megatron's GPTModel: embedding (first stage), transformer block, final norm and output layer (last stage), with megatron/core's state-dict names.
    """
    def __init__(self, config: TransformerConfig, vocab_size: typing.SupportsInt, max_sequence_length: typing.SupportsInt, *, make_vocab_size_divisible_by: typing.SupportsInt = 128, pre_process: bool = True, post_process: bool = True, pipeline_model_parallel_rank: typing.SupportsInt = 0, virtual_pipeline_model_parallel_rank: typing.SupportsInt = 0, share_embeddings_and_output_weights: bool = True, position_embedding_type: str = 'learned_absolute', rotary_percent: typing.SupportsFloat = 1.0, rotary_base: typing.SupportsFloat = 10000.0, rope_scaling: dict | None = None, embed_layernorm: bool = False, pad_vocab_size_to: typing.SupportsInt | None = None, parallel_output: bool = False, label_smoothing: typing.SupportsFloat = 0.0, seed: typing.SupportsInt = 1234) -> None:
        ...
    def allreduce_sequence_parallel_grads(self) -> None:
        ...
    def allreduce_word_embedding_grads(self, embedding_group: ProcessGroup) -> None:
        ...
    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> torch.Tensor:
        """
        input_ids, position_ids, labels [b, s] int64; attention_mask None (causal) or bool [b or 1, 1, s, s], True = masked out. Returns the per-token loss [b, s] (fp32) with labels on the last stage, else logits [b, s, V] there, else hidden states [s, b, h].
        """
    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """
        Full (TP = 1) tensors under the same names, all-gathered over the TP group (collective).
        """
    def initialize_parameters(self, seed: typing.SupportsInt) -> None:
        ...
    def load_full_state_dict(self, state_dict: collections.abc.Mapping[str, torch.Tensor], strict: bool = True) -> None:
        """
        Keeps this rank's shard of each full tensor.
        """
    def load_state_dict_file(self, path: str, strict: bool = True) -> None:
        ...
    def save_state_dict_file(self, path: str) -> None:
        """
        A torch.save-compatible file of this rank's state dict.
        """
    def set_input_tensor(self, input: torch.Tensor) -> None:
        """
        The hidden states from the previous pipeline stage.
        """
    def sharded_parameters(self) -> list[ShardedParameter]:
        ...
    def shared_embedding_or_output_weight(self) -> torch.Tensor:
        ...
    @property
    def config(self) -> TransformerConfig:
        ...
    @property
    def padded_vocab_size(self) -> int:
        ...
    @property
    def post_process(self) -> bool:
        ...
    @property
    def pre_process(self) -> bool:
        ...
class HuggingFaceTokenizer(Tokenizer):
    """
    A Hugging Face tokenizer.json (BPE: byte-level or metaspace), encoding as the tokenizers package does.
    """
    def __init__(self, path: str, include_special_tokens: bool = True, special_tokens: collections.abc.Sequence[str] = []) -> None:
        """
        path: a tokenizer.json or its folder (a tokenizer_config.json beside it names eos/bos). special_tokens: added as Hugging Face's add_special_tokens adds them (--tokenizer-special-tokens).
        """
    def id_to_token(self, id: typing.SupportsInt) -> str:
        """
        A token's spelling in tokenizer.json.
        """
    def token_to_id(self, token: str) -> int:
        """
        Id of a token, or -1.
        """
    @property
    def bos(self) -> int:
        """
        The beginning-of-sequence id, or -1.
        """
class IndexedDataset:
    """
    Reader of a Megatron .bin/.idx pair (MMIDIDX v1), memory-mapped and checked on open. Sequences come back as read-only numpy views of the mapped .bin (no copy); with mmap=False (--no-mmap-bin-files) the .bin is read, and each sequence is a copy.
    """
    def __getitem__(self, idx: typing.SupportsInt) -> numpy.ndarray:
        """
        Sequence idx as a read-only numpy view of the .bin.
        """
    def __init__(self, path_prefix: str, mmap: bool = True) -> None:
        ...
    def __len__(self) -> int:
        ...
    def __repr__(self) -> str:
        ...
    def check_unchanged(self) -> None:
        """
        Raises when either file was replaced or touched since it was opened.
        """
    def get(self, idx: typing.SupportsInt, offset: typing.SupportsInt = 0, length: typing.SupportsInt | None = None) -> numpy.ndarray:
        """
        Tokens [offset, offset + length) of sequence idx (to its end when length is None).
        """
    def get_document(self, doc: typing.SupportsInt) -> numpy.ndarray:
        """
        All tokens of document doc.
        """
    @property
    def document_indices(self) -> numpy.typing.NDArray[numpy.int64]:
        """
        Document boundaries [D + 1] int64: document d is sequences [doc[d], doc[d+1]) (a copy).
        """
    @property
    def dtype(self) -> DType:
        ...
    @property
    def num_documents(self) -> int:
        ...
    @property
    def num_tokens(self) -> int:
        ...
    @property
    def path_prefix(self) -> str:
        ...
    @property
    def sequence_lengths(self) -> numpy.typing.NDArray[numpy.int32]:
        """
        Lengths [S] int32 (a copy: they sit unaligned in the .idx).
        """
    @property
    def sequence_pointers(self) -> numpy.typing.NDArray[numpy.int64]:
        """
        Byte offsets [S] int64 into the .bin (a copy).
        """
class IndexedDatasetBuilder:
    """
    Writer of a .bin/.idx pair: tokens stream into a temporary .bin, finalize() writes the .idx and renames both into place (readers never see a half-written pair).
    """
    def __init__(self, bin_path: str, dtype: typing.Any = DType.INT32) -> None:
        """
        dtype: DType or numpy dtype (np.uint16, 'int32', ...).
        """
    def add_document(self, tokens: typing.Any, lengths: collections.abc.Sequence[typing.SupportsInt]) -> None:
        """
        One document of several sequences: tokens are their concatenation, lengths their sizes.
        """
    def add_index(self, path_prefix: str) -> None:
        """
        Appends a whole dataset of the same dtype.
        """
    def add_item(self, tokens: typing.Any) -> None:
        """
        One sequence: a 1-D torch tensor, numpy array or list of ids (int32/int64 CPU arrays are read in place). Ids that do not fit the dtype are refused.
        """
    def end_document(self) -> None:
        """
        Closes the current document.
        """
    def finalize(self, idx_path: str) -> None:
        """
        Writes the .idx and renames both files into place.
        """
    @property
    def dtype(self) -> DType:
        ...
    @property
    def num_documents(self) -> int:
        ...
    @property
    def num_sequences(self) -> int:
        ...
class IterationRecord:
    """
    One training iteration.
    """
    def __repr__(self) -> str:
        ...
    @property
    def elapsed_ms(self) -> float:
        ...
    @property
    def global_batch_size(self) -> int:
        ...
    @property
    def grad_norm(self) -> float:
        ...
    @property
    def iteration(self) -> int:
        ...
    @property
    def learning_rate(self) -> float:
        ...
    @property
    def loss_scale(self) -> float:
        ...
    @property
    def metrics(self) -> dict[str, float]:
        """
        loss_func's metrics averaged over micro-batches and DP ranks.
        """
    @property
    def num_zeros(self) -> float | None:
        """
        --log-num-zeros-in-grad, else None
        """
    @property
    def params_norm(self) -> float | None:
        """
        --log-params-norm, else None
        """
    @property
    def skipped(self) -> bool:
        ...
class Launcher:
    """
    Which launcher started this process.
    
    Members:
    
      NONE
    
      OPENMPI
    
      PMI
    
      TORCHRUN
    
      SLURM
    """
    NONE: typing.ClassVar[Launcher]  # value = <Launcher.NONE: 0>
    OPENMPI: typing.ClassVar[Launcher]  # value = <Launcher.OPENMPI: 1>
    PMI: typing.ClassVar[Launcher]  # value = <Launcher.PMI: 2>
    SLURM: typing.ClassVar[Launcher]  # value = <Launcher.SLURM: 4>
    TORCHRUN: typing.ClassVar[Launcher]  # value = <Launcher.TORCHRUN: 3>
    __members__: typing.ClassVar[dict[str, Launcher]]  # value = {'NONE': <Launcher.NONE: 0>, 'OPENMPI': <Launcher.OPENMPI: 1>, 'PMI': <Launcher.PMI: 2>, 'TORCHRUN': <Launcher.TORCHRUN: 3>, 'SLURM': <Launcher.SLURM: 4>}
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class LauncherEnv:
    """
    This process's rank, world size and local rank, read from mpirun, PMI or torchrun-style variables (none: rank 0 of 1).
    """
    @staticmethod
    def from_environment() -> LauncherEnv:
        """
        Reads the process environment.
        """
    @staticmethod
    def from_variables(variables: collections.abc.Mapping[str, str]) -> LauncherEnv:
        """
        Same rules over a dict of variables.
        """
    def __repr__(self) -> str:
        ...
    @property
    def launcher(self) -> Launcher:
        ...
    @property
    def local_rank(self) -> int:
        ...
    @property
    def local_world_size(self) -> int:
        ...
    @property
    def master_addr(self) -> str:
        ...
    @property
    def master_port(self) -> int:
        ...
    @property
    def rank(self) -> int:
        ...
    @property
    def world_size(self) -> int:
        ...
class MegatronDataset:
    """
    A fixed-length list of token samples (what samplers and DataIterator draw from).
    """
    def __getitem__(self, idx: typing.SupportsInt) -> numpy.typing.NDArray[numpy.int64]:
        """
        Sample idx: sample_length int64 ids.
        """
    def __len__(self) -> int:
        ...
    def __repr__(self) -> str:
        ...
    def check_unchanged(self) -> None:
        ...
    @property
    def description(self) -> str:
        ...
    @property
    def pad_token(self) -> int:
        ...
    @property
    def sample_length(self) -> int:
        """
        Tokens per sample (sequence_length + 1 with the extra label token).
        """
class MegatronPretrainingRandomSampler(BatchSampler):
    """
    dataloader_type 'cyclic': a seeded shuffle per epoch, endless.
    """
    def __init__(self, total_samples: typing.SupportsInt, consumed_samples: typing.SupportsInt, micro_batch_size: typing.SupportsInt, data_parallel_rank: typing.SupportsInt, data_parallel_size: typing.SupportsInt, data_sharding: bool = True) -> None:
        ...
class MegatronPretrainingSampler(BatchSampler):
    """
    dataloader_type 'single': consecutive global batches from consumed_samples.
    """
    def __init__(self, total_samples: typing.SupportsInt, consumed_samples: typing.SupportsInt, micro_batch_size: typing.SupportsInt, data_parallel_rank: typing.SupportsInt, data_parallel_size: typing.SupportsInt, drop_last: bool = True) -> None:
        ...
class MoELayer(torch._C.cpp.nn.Module):
    """
    Megatron-Core's MoELayer: router, experts (SequentialMLP), optional shared expert.
    """
    def __init__(self, config: TransformerConfig) -> None:
        ...
    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """
        [s, b, h] -> [s, b, h].
        """
class Normalization:
    """
    Members:
    
      LAYER_NORM
    
      RMS_NORM
    """
    LAYER_NORM: typing.ClassVar[Normalization]  # value = <Normalization.LAYER_NORM: 0>
    RMS_NORM: typing.ClassVar[Normalization]  # value = <Normalization.RMS_NORM: 1>
    __members__: typing.ClassVar[dict[str, Normalization]]  # value = {'LAYER_NORM': <Normalization.LAYER_NORM: 0>, 'RMS_NORM': <Normalization.RMS_NORM: 1>}
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class NullTokenizer(Tokenizer):
    """
    Megatron's NullTokenizer: text is space-separated ids; EOD is vocab_size - 1.
    """
    def __init__(self, vocab_size: typing.SupportsInt) -> None:
        ...
class ParallelState:
    """
    This rank's place in the TP x CP x DP x PP grid and its process groups, in Megatron-LM's rank order (Megatron's parallel_state, as an object instead of module globals).
    """
    @staticmethod
    def initialize_model_parallel(world: ProcessGroup, tensor_model_parallel_size: typing.SupportsInt = 1, pipeline_model_parallel_size: typing.SupportsInt = 1, virtual_pipeline_model_parallel_size: typing.SupportsInt | None = None, context_parallel_size: typing.SupportsInt = 1, expert_model_parallel_size: typing.SupportsInt = 1, expert_tensor_parallel_size: typing.SupportsInt | None = None, use_tp_pp_dp_mapping: bool = False, hierarchical_context_parallel_sizes: collections.abc.Sequence[typing.SupportsInt] = []) -> ParallelState:
        """
        Splits the world group into groups; collective over world, same arguments on every rank.
        """
    def __repr__(self) -> str:
        ...
    def get_context_parallel_group(self) -> ProcessGroup:
        ...
    def get_context_parallel_rank(self) -> int:
        ...
    def get_context_parallel_world_size(self) -> int:
        ...
    def get_data_parallel_group(self, with_context_parallel: bool = False) -> ProcessGroup:
        """
        with_context_parallel: the ranks holding the same parameters (gradients reduce over them).
        """
    def get_data_parallel_rank(self, with_context_parallel: bool = False) -> int:
        ...
    def get_data_parallel_src_rank(self) -> int:
        ...
    def get_data_parallel_world_size(self, with_context_parallel: bool = False) -> int:
        ...
    def get_embedding_group(self) -> ProcessGroup:
        """
        None on ranks outside the first and last pipeline stage.
        """
    def get_expert_data_parallel_group(self) -> ProcessGroup:
        ...
    def get_expert_data_parallel_rank(self) -> int:
        ...
    def get_expert_data_parallel_world_size(self) -> int:
        ...
    def get_expert_model_parallel_group(self) -> ProcessGroup:
        ...
    def get_expert_model_parallel_rank(self) -> int:
        ...
    def get_expert_model_parallel_world_size(self) -> int:
        ...
    def get_expert_tensor_and_model_parallel_group(self) -> ProcessGroup:
        ...
    def get_expert_tensor_parallel_group(self) -> ProcessGroup:
        ...
    def get_expert_tensor_parallel_rank(self) -> int:
        ...
    def get_expert_tensor_parallel_world_size(self) -> int:
        ...
    def get_hierarchical_context_parallel_groups(self) -> list[ProcessGroup]:
        ...
    def get_model_parallel_group(self) -> ProcessGroup:
        ...
    def get_pipeline_model_parallel_first_rank(self) -> int:
        ...
    def get_pipeline_model_parallel_group(self) -> ProcessGroup:
        ...
    def get_pipeline_model_parallel_last_rank(self) -> int:
        ...
    def get_pipeline_model_parallel_next_rank(self) -> int:
        ...
    def get_pipeline_model_parallel_prev_rank(self) -> int:
        ...
    def get_pipeline_model_parallel_rank(self) -> int:
        ...
    def get_pipeline_model_parallel_world_size(self) -> int:
        ...
    def get_position_embedding_group(self) -> ProcessGroup:
        """
        None on ranks outside the first pipeline stage.
        """
    def get_rank(self) -> int:
        ...
    def get_tensor_model_parallel_group(self) -> ProcessGroup:
        ...
    def get_tensor_model_parallel_rank(self) -> int:
        ...
    def get_tensor_model_parallel_src_rank(self) -> int:
        ...
    def get_tensor_model_parallel_world_size(self) -> int:
        ...
    def get_virtual_pipeline_model_parallel_world_size(self) -> int | None:
        ...
    def get_world_group(self) -> ProcessGroup:
        ...
    def get_world_size(self) -> int:
        ...
    def is_pipeline_first_stage(self, virtual_rank: typing.SupportsInt | None = None) -> bool:
        ...
    def is_pipeline_last_stage(self, virtual_rank: typing.SupportsInt | None = None) -> bool:
        ...
    def is_rank_in_embedding_group(self) -> bool:
        ...
    def is_rank_in_position_embedding_group(self) -> bool:
        ...
class ParamInit:
    """
    Megatron's initialiser of a parameter and its sharding.
    """
    class Kind:
        """
        Members:
        
          NORMAL
        
          ZEROS
        
          ONES
        """
        NORMAL: typing.ClassVar[ParamInit.Kind]  # value = <Kind.NORMAL: 0>
        ONES: typing.ClassVar[ParamInit.Kind]  # value = <Kind.ONES: 2>
        ZEROS: typing.ClassVar[ParamInit.Kind]  # value = <Kind.ZEROS: 1>
        __members__: typing.ClassVar[dict[str, ParamInit.Kind]]  # value = {'NORMAL': <Kind.NORMAL: 0>, 'ZEROS': <Kind.ZEROS: 1>, 'ONES': <Kind.ONES: 2>}
        def __eq__(self, other: typing.Any) -> bool:
            ...
        def __getstate__(self) -> int:
            ...
        def __hash__(self) -> int:
            ...
        def __index__(self) -> int:
            ...
        def __init__(self, value: typing.SupportsInt) -> None:
            ...
        def __int__(self) -> int:
            ...
        def __ne__(self, other: typing.Any) -> bool:
            ...
        def __repr__(self) -> str:
            ...
        def __setstate__(self, state: typing.SupportsInt) -> None:
            ...
        def __str__(self) -> str:
            ...
        @property
        def name(self) -> str:
            ...
        @property
        def value(self) -> int:
            ...
    @property
    def kind(self) -> ParamInit.Kind:
        ...
    @property
    def layout(self) -> ShardLayout:
        ...
    @property
    def std(self) -> float:
        ...
class ProcessGroup:
    """
    Collectives and point-to-point over an ordered set of ranks: MPI for CPU tensors, NCCL for CUDA tensors. Every operation works in place on the torch tensors given (contiguous, same shape and dtype on every rank); every rank of the group calls it.
    """
    def __repr__(self) -> str:
        ...
    def all_gather(self, output: torch.Tensor, input: torch.Tensor) -> None:
        """
        output [size * n, ...] = every rank's input [n, ...] along dim 0.
        """
    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp = ReduceOp.SUM) -> None:
        ...
    def barrier(self) -> None:
        ...
    def broadcast(self, tensor: torch.Tensor, src: typing.SupportsInt) -> None:
        """
        src is a group rank.
        """
    def global_rank(self, group_rank: typing.SupportsInt) -> int:
        ...
    def new_group(self, ranks: collections.abc.Sequence[typing.SupportsInt], name: str) -> ProcessGroup:
        """
        A subgroup (ranks of this group, in the new group's order); collective over its members, None on the other ranks.
        """
    def rank(self) -> int:
        """
        This process's rank within the group.
        """
    def recv(self, tensor: torch.Tensor, src: typing.SupportsInt) -> None:
        ...
    def reduce_scatter(self, output: torch.Tensor, input: torch.Tensor, op: ReduceOp = ReduceOp.SUM) -> None:
        """
        input [size * n, ...]; output [n, ...] = this rank's slice of the reduction.
        """
    def send(self, tensor: torch.Tensor, dst: typing.SupportsInt) -> None:
        ...
    def size(self) -> int:
        ...
    @property
    def global_ranks(self) -> list[int]:
        """
        World rank of each group rank.
        """
    @property
    def name(self) -> str:
        ...
    @property
    def timeout_seconds(self) -> float:
        ...
class RecomputeGranularity:
    """
    Members:
    
      NONE
    
      FULL
    
      SELECTIVE
    """
    FULL: typing.ClassVar[RecomputeGranularity]  # value = <RecomputeGranularity.FULL: 1>
    NONE: typing.ClassVar[RecomputeGranularity]  # value = <RecomputeGranularity.NONE: 0>
    SELECTIVE: typing.ClassVar[RecomputeGranularity]  # value = <RecomputeGranularity.SELECTIVE: 2>
    __members__: typing.ClassVar[dict[str, RecomputeGranularity]]  # value = {'NONE': <RecomputeGranularity.NONE: 0>, 'FULL': <RecomputeGranularity.FULL: 1>, 'SELECTIVE': <RecomputeGranularity.SELECTIVE: 2>}
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class RecomputeMethod:
    """
    Members:
    
      UNIFORM
    
      BLOCK
    """
    BLOCK: typing.ClassVar[RecomputeMethod]  # value = <RecomputeMethod.BLOCK: 1>
    UNIFORM: typing.ClassVar[RecomputeMethod]  # value = <RecomputeMethod.UNIFORM: 0>
    __members__: typing.ClassVar[dict[str, RecomputeMethod]]  # value = {'UNIFORM': <RecomputeMethod.UNIFORM: 0>, 'BLOCK': <RecomputeMethod.BLOCK: 1>}
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class ReduceOp:
    """
    Reduction of all_reduce and reduce_scatter.
    
    Members:
    
      SUM
    
      AVG
    
      MAX
    
      MIN
    """
    AVG: typing.ClassVar[ReduceOp]  # value = <ReduceOp.AVG: 1>
    MAX: typing.ClassVar[ReduceOp]  # value = <ReduceOp.MAX: 2>
    MIN: typing.ClassVar[ReduceOp]  # value = <ReduceOp.MIN: 3>
    SUM: typing.ClassVar[ReduceOp]  # value = <ReduceOp.SUM: 0>
    __members__: typing.ClassVar[dict[str, ReduceOp]]  # value = {'SUM': <ReduceOp.SUM: 0>, 'AVG': <ReduceOp.AVG: 1>, 'MAX': <ReduceOp.MAX: 2>, 'MIN': <ReduceOp.MIN: 3>}
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class RngTracker:
    """
    Named RNG states for dropout inside tensor-parallel regions (Megatron's CudaRNGStatesTracker, for any device).
    """
    def __init__(self, device: torch.device = ...) -> None:
        ...
    def add(self, name: str, seed: typing.SupportsInt) -> None:
        ...
    def fork(self, fn: collections.abc.Callable, name: str = 'model-parallel-rng') -> None:
        """
        Calls fn() with the device's default generator set to state `name`, then stores the advanced state back and restores the generator.
        """
    def get_states(self) -> dict[str, torch.Tensor]:
        ...
    def has(self, name: str) -> bool:
        ...
    def reset(self) -> None:
        ...
    def set_states(self, states: collections.abc.Mapping[str, torch.Tensor]) -> None:
        ...
    @property
    def device(self) -> torch.device:
        ...
class RowParallelLinear(torch._C.cpp.nn.Module):
    """
    Y = XA + b with A split by rows across the TP group: weight [out, in/tp]; the partial products are all-reduced (reduce-scattered along s with sequence_parallel).
    """
    def __init__(self, input_size: typing.SupportsInt, output_size: typing.SupportsInt, *, bias: bool = True, input_is_parallel: bool = False, sequence_parallel: bool = False, init_method_std: typing.SupportsFloat = 0.02, perform_initialization: bool = True, tp_group: ProcessGroup = None) -> None:
        ...
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """
        input [*, in/tp] (or [*, in] unless input_is_parallel) -> [*, out].
        """
    def param_inits(self) -> list[tuple[str, ParamInit]]:
        ...
    @property
    def input_size_per_partition(self) -> int:
        ...
class SentencePieceTokenizer(Tokenizer):
    """
    A SentencePiece .model (BPE or unigram), encoding as sentencepiece's encode_as_ids does (Megatron-LM's SentencePieceTokenizer, GPTSentencePieceTokenizer and Llama2Tokenizer).
    """
    def __init__(self, model_file: str) -> None:
        ...
    @property
    def bos(self) -> int:
        """
        The <s> id, or -1.
        """
class ShardLayout:
    """
    How a parameter's full (TP = 1) tensor maps onto this rank's shard: partition_dim < 0 means replicated.
    """
    def full_shape(self, shard_shape: collections.abc.Sequence[typing.SupportsInt]) -> list[int]:
        ...
    def is_sharded(self) -> bool:
        ...
    def shard(self, full: torch.Tensor) -> torch.Tensor:
        """
        This rank's shard of a full tensor (a copy).
        """
    def unshard(self, shards: collections.abc.Sequence[torch.Tensor]) -> torch.Tensor:
        """
        The full tensor from every rank's shard.
        """
    @property
    def num_chunks(self) -> int:
        ...
    @property
    def partition_dim(self) -> int:
        ...
    @property
    def rank(self) -> int:
        ...
    @property
    def size(self) -> int:
        ...
class ShardedParameter:
    """
    One parameter of this rank with how its full tensor is sharded and initialised.
    """
    @property
    def init(self) -> ParamInit:
        ...
    @property
    def init_name(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def param(self) -> torch.Tensor:
        ...
class Split:
    """
    Members:
    
      TRAIN
    
      VALID
    
      TEST
    """
    TEST: typing.ClassVar[Split]  # value = <Split.TEST: 2>
    TRAIN: typing.ClassVar[Split]  # value = <Split.TRAIN: 0>
    VALID: typing.ClassVar[Split]  # value = <Split.VALID: 1>
    __members__: typing.ClassVar[dict[str, Split]]  # value = {'TRAIN': <Split.TRAIN: 0>, 'VALID': <Split.VALID: 1>, 'TEST': <Split.TEST: 2>}
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt) -> None:
        ...
    def __int__(self) -> int:
        ...
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class TikTokenizer(Tokenizer):
    """
    Megatron-LM's TikTokenizer: its tiktoken JSON, ids after num_special_tokens special tokens, encoding as tiktoken does.
    """
    def __init__(self, path: str, pattern: str = 'v2', num_special_tokens: typing.SupportsInt = 1000, vocab_size: typing.SupportsInt = 131072, special_tokens: collections.abc.Sequence[str] = []) -> None:
        """
        special_tokens: the special tokens in id order, the seven defaults among them (--tokenizer-special-tokens).
        """
    @property
    def bos(self) -> int:
        """
        The <s> id.
        """
    @property
    def special_tokens(self) -> list[str]:
        """
        Every special token, by id.
        """
class Tokenizer:
    """
    Text <-> token ids (Megatron's MegatronTokenizer interface).
    """
    def detokenize(self, ids: collections.abc.Sequence[typing.SupportsInt]) -> str:
        """
        The text of ids (invalid UTF-8 replaced by U+FFFD; see detokenize_bytes).
        """
    def detokenize_bytes(self, ids: collections.abc.Sequence[typing.SupportsInt]) -> bytes:
        """
        The exact bytes of ids.
        """
    def tokenize(self, text: typing.Any) -> list[int]:
        """
        Token ids of str (UTF-8) or bytes.
        """
    @property
    def eod(self) -> int:
        """
        The end-of-document id.
        """
    @property
    def vocab_size(self) -> int:
        ...
class TopKRouter(torch._C.cpp.nn.Module):
    """
    Megatron-Core's TopKRouter: each token's top-k experts and their probabilities.
    """
    def __init__(self, config: TransformerConfig) -> None:
        ...
    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """
        [s, b, h] -> (probs [s*b, E], routing_map [s*b, E] bool), token s_index * b + b_index; in training the load-balancing and z losses join the gradient through them.
        """
class TrainingContext:
    """
    What pretrain() hands to model_builder and dataset_builder (valid during the call).
    """
    @property
    def args(self) -> Arguments:
        ...
    @property
    def device(self) -> torch.device:
        ...
    @property
    def parallel_state(self) -> ParallelState:
        ...
    @property
    def rng_tracker(self) -> RngTracker:
        """
        RNG states for dropout inside tensor-parallel regions.
        """
    @property
    def virtual_pipeline_model_parallel_rank(self) -> int | None:
        """
        Which model chunk of this stage model_builder builds (interleaved schedule), else None.
        """
class TrainingResult:
    """
    What pretrain() returns.
    """
    @property
    def consumed_train_samples(self) -> int:
        ...
    @property
    def evaluations(self) -> list[EvaluationRecord]:
        ...
    @property
    def exited_early(self) -> bool:
        """
        Stopped before --train-iters: SIGTERM, --exit-interval or --exit-duration-in-mins.
        """
    @property
    def exited_on_signal(self) -> bool:
        """
        --exit-signal-handler saw SIGTERM and stopped after saving.
        """
    @property
    def iteration(self) -> int:
        """
        The last iteration trained (or loaded).
        """
    @property
    def iterations(self) -> list[IterationRecord]:
        """
        Those this run trained (after a loaded checkpoint).
        """
    @property
    def loaded_iteration(self) -> int | None:
        """
        --load: the checkpoint's iteration.
        """
    @property
    def saved_iterations(self) -> list[int]:
        """
        --save: the checkpoints written.
        """
class TransformerConfig:
    """
    Architecture and parallelism of a transformer stack (Megatron's TransformerConfig). Build with keywords, e.g. TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, normalization='RMSNorm'); finalize() returns a checked copy with derived defaults filled.
    """
    account_for_embedding_in_pipeline_split: typing.Any
    account_for_loss_in_pipeline_split: typing.Any
    activation: typing.Any
    add_bias_linear: typing.Any
    add_qkv_bias: typing.Any
    attention_dropout: typing.Any
    ffn_hidden_size: typing.Any
    gated_linear_unit: typing.Any
    hidden_dropout: typing.Any
    hidden_size: typing.Any
    init_method_std: typing.Any
    kv_channels: typing.Any
    layernorm_epsilon: typing.Any
    layernorm_zero_centered_gamma: typing.Any
    moe_aux_loss_coeff: typing.Any
    moe_expert_capacity_factor: typing.Any
    moe_ffn_hidden_size: typing.Any
    moe_grouped_gemm: typing.Any
    moe_layer_pattern: typing.Any
    moe_pad_expert_input_to_capacity: typing.Any
    moe_router_bias_update_rate: typing.Any
    moe_router_dtype: typing.Any
    moe_router_enable_expert_bias: typing.Any
    moe_router_group_topk: typing.Any
    moe_router_load_balancing_type: typing.Any
    moe_router_num_groups: typing.Any
    moe_router_pre_softmax: typing.Any
    moe_router_score_function: typing.Any
    moe_router_topk: typing.Any
    moe_router_topk_scaling_factor: typing.Any
    moe_shared_expert_gate: typing.Any
    moe_shared_expert_intermediate_size: typing.Any
    moe_token_drop_policy: typing.Any
    moe_z_loss_coeff: typing.Any
    normalization: typing.Any
    num_attention_heads: typing.Any
    num_layers: typing.Any
    num_layers_in_first_pipeline_stage: typing.Any
    num_layers_in_last_pipeline_stage: typing.Any
    num_moe_experts: typing.Any
    num_query_groups: typing.Any
    perform_initialization: typing.Any
    pipeline_model_parallel_layout: typing.Any
    pipeline_model_parallel_size: typing.Any
    qk_layernorm: typing.Any
    qk_layernorm_across_heads: typing.Any
    recompute_granularity: typing.Any
    recompute_method: typing.Any
    recompute_modules: typing.Any
    recompute_num_layers: typing.Any
    rng_tracker: typing.Any
    rotary_interleaved: typing.Any
    sequence_parallel: typing.Any
    tensor_model_parallel_size: typing.Any
    tp_group: typing.Any
    use_scaled_init_method: typing.Any
    virtual_pipeline_model_parallel_size: typing.Any
    def __init__(self, **kwargs) -> None:
        """
        Keywords are the field names; the others keep Megatron's defaults.
        """
    def __repr__(self) -> str:
        ...
    def finalize(self) -> TransformerConfig:
        """
        A copy with derived defaults filled in (num_query_groups, ffn_hidden_size, kv_channels, add_qkv_bias); raises naming the field on inconsistent settings.
        """
    def pipeline_layers(self, pp_rank: typing.SupportsInt, vp_rank: typing.SupportsInt = 0) -> tuple[int, int]:
        """
        (first layer, layer count) of model chunk vp_rank on pipeline stage pp_rank, as Megatron-Core's get_transformer_layer_offset and get_num_layers_to_build give them
        """
class VocabParallelEmbedding(torch._C.cpp.nn.Module):
    """
    Embedding table split along the vocabulary: rank r holds rows [r V/tp, (r+1) V/tp).
    """
    def __init__(self, num_embeddings: typing.SupportsInt, embedding_dim: typing.SupportsInt, *, reduce_scatter_embeddings: bool = False, init_method_std: typing.SupportsFloat = 0.02, perform_initialization: bool = True, tp_group: ProcessGroup = None) -> None:
        ...
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """
        ids [*] -> [*, h].
        """
    def param_inits(self) -> list[tuple[str, ParamInit]]:
        ...
    @property
    def vocab_end_index(self) -> int:
        ...
    @property
    def vocab_start_index(self) -> int:
        ...
def _pretrain(args: Arguments, model_builder: typing.Any, dataset_builder: typing.Any, forward_step: typing.Any, world: ProcessGroup = None) -> TrainingResult:
    ...
def abort_job(exit_code: typing.SupportsInt = 1) -> None:
    """
    Ends every rank of an mpirun job (MPI_Abort); returns without MPI. For error paths, so that no rank waits on one that failed.
    """
def arguments_help(program: str = 'pretrain_gpt') -> str:
    """
    The flag list --help prints.
    """
def build_batch(dataset: MegatronDataset, indices: collections.abc.Sequence[typing.SupportsInt], options: BatchOptions = ...) -> typing.Any:
    """
    The samples indices of dataset as one batch: dict of text (the samples as read), tokens, labels, loss_mask, attention_mask (None when not created), position_ids.
    """
def build_gpt_datasets(data_path: typing.Any, sizes: collections.abc.Sequence[typing.SupportsInt | None], config: GPTDatasetConfig, mid_level_surplus: typing.SupportsFloat = 0.005) -> tuple:
    """
    Megatron-LM's BlendedMegatronDatasetBuilder for GPT: (train, valid, test) for the split in config and the sample counts in sizes (None: one epoch); None for a split of weight 0.
    """
def build_gpt_datasets_on_ranks(data_path: typing.Any, sizes: collections.abc.Sequence[typing.SupportsInt | None], config: GPTDatasetConfig, group: ProcessGroup, mid_level_surplus: typing.SupportsFloat = 0.005) -> tuple:
    """
    The same in a job: group rank 0 builds the index caches, then the others load them (collective over group).
    """
def build_gpt_datasets_per_split_on_ranks(data_paths: collections.abc.Sequence[typing.Any], sizes: collections.abc.Sequence[typing.SupportsInt | None], config: GPTDatasetConfig, group: ProcessGroup = None, mid_level_surplus: typing.SupportsFloat = 0.005) -> tuple:
    """
    Megatron-LM's blend_per_split: each split from its own data path (None: none) over its datasets' whole documents; with a group, its rank 0 builds the index caches first.
    """
def build_mock_gpt_datasets(vocab_size: typing.SupportsInt, eod_token: typing.SupportsInt, sizes: collections.abc.Sequence[typing.SupportsInt | None], config: GPTDatasetConfig) -> tuple:
    """
    --mock-data: Megatron's mock documents, split 1,1,1, no cache.
    """
@typing.overload
def build_tokenizer(tokenizer_type: str, *, vocab_file: str = '', merge_file: str = '', tokenizer_model: str = '', include_special_tokens: bool = True, tiktoken_pattern: str = 'v2', tiktoken_num_special_tokens: typing.SupportsInt = 1000, vocab_size: typing.SupportsInt = 0, special_tokens: collections.abc.Sequence[str] = []) -> Tokenizer:
    """
    A tokenizer by Megatron's --tokenizer-type (GPT2BPETokenizer, HuggingFaceTokenizer, TikTokenizer or NullTokenizer).
    """
@typing.overload
def build_tokenizer(args: Arguments) -> Tokenizer:
    """
    The tokenizer the flags name (--tokenizer-type, NullTokenizer when empty; --vocab-file, --merge-file, --tokenizer-model, --vocab-size).
    """
def check_args(args: typing.Any, world_size: typing.SupportsInt | None = None, program: str = 'pretrain_gpt') -> tuple:
    """
    pretrain_gpt --check-args: whether a run with these flags (as parse_arguments takes them) would start on world_size ranks, without building anything. Returns (would_start, report): the report names each flag with no effect here and why, then the layout, or why the flags are refused.
    """
def checkpoint_arguments(path: str) -> Arguments:
    """
    The Arguments a checkpoint file was saved with.
    """
def convert_checkpoint(*, load: str = '', save: str = '', ckpt_step: typing.SupportsInt | None = None, target_tensor_model_parallel_size: typing.SupportsInt = 1, target_pipeline_model_parallel_size: typing.SupportsInt = 1, target_num_layers_per_virtual_pipeline_stage: typing.SupportsInt | None = None, export_hf: str = '', import_hf: str = '', make_vocab_size_divisible_by: typing.SupportsInt = 128, overwrite: bool = False, vocab_file: str = '', merge_file: str = '', tokenizer_model: str = '', hf_model_type: str = '', ckpt_format: str = 'torch', target_expert_model_parallel_size: typing.SupportsInt = 1, target_expert_tensor_parallel_size: typing.SupportsInt | None = None) -> typing.Any:
    """
    tools/convert_checkpoint in-process: reads the checkpoint in load (either format, or the Hugging Face model in import_hf), writes it to save at the target TP/PP/virtual-PP/EP layout (ckpt_format 'torch') or as megatron-core's torch_dist files ('torch_dist', which load at any layout) and/or exports it to export_hf (config.json + model.safetensors + the tokenizer's files; vocab_file, merge_file and tokenizer_model replace the paths it was trained with; hf_model_type picks the architecture, by default the first that fits). Returns the iteration converted ('release' for an import). A save folder that already holds checkpoints is refused unless overwrite.
    """
def copy_to_tensor_model_parallel_region(input: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """
    forward: identity; backward: all-reduce.
    """
def core_transformer_config_from_args(ctx: TrainingContext) -> TransformerConfig:
    """
    The TransformerConfig the flags describe, with this rank's TP group and RNG tracker (Megatron's core_transformer_config_from_args).
    """
def cpu_allocator_cache_stats() -> dict:
    """
    {enabled, cached_bytes, allocated_bytes, hits, misses} of the CPU allocator cache.
    """
def empty_cpu_allocator_cache() -> None:
    """
    Returns every cached CPU block to the OS.
    """
def enable_cpu_allocator_cache(max_cached_bytes: typing.SupportsInt = -1) -> None:
    """
    Keeps freed CPU blocks of 16 KiB or more for the next allocation of the same size (what pretrain() installs). max_cached_bytes < 0 keeps the current limit (8 GiB).
    """
def fp8_current_scale(amax: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """
    The tensorwise recipe's scale: fp8_max / amax (1 for an amax of 0 or not finite).
    """
def fp8_linear(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, meta: Fp8Meta) -> torch.Tensor:
    """
    Y = X W^T + b with the GEMMs in FP8 (at::_scaled_mm); autograd-aware.
    """
def fp8_quantize(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """
    x * scale in fp32, saturated to the float8 dtype's range, cast to it.
    """
def gather_from_sequence_parallel_region(input: torch.Tensor, group: ProcessGroup, tensor_parallel_output_grad: bool = True) -> torch.Tensor:
    """
    forward: all-gather dim 0; backward: reduce-scatter dim 0 (or this rank's slice).
    """
def gather_from_tensor_model_parallel_region(input: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """
    forward: all-gather the last dim; backward: this rank's slice.
    """
def get_batch_on_this_cp_rank(batch: collections.abc.Mapping[str, torch.Tensor], cp_size: typing.SupportsInt, cp_rank: typing.SupportsInt) -> dict[str, torch.Tensor]:
    """
    Each tensor of the batch cut along the sequence (the attention mask along its query rows) to context-parallel rank cp_rank's chunks cp_rank and 2 x cp_size - 1 - cp_rank of 2 x cp_size.
    """
def get_ltor_masks_and_position_ids(data: torch.Tensor, eod_token: typing.SupportsInt, reset_position_ids: bool, reset_attention_mask: bool, eod_mask_loss: bool) -> tuple:
    """
    Megatron-LM's (attention_mask, loss_mask, position_ids) for tokens [b, s], as build_batch makes them: attention_mask bool [b or 1, 1, s, s] (true = masked out; per sample with reset_attention_mask).
    """
def gpt_loss_func(loss_mask: torch.Tensor, output_tensor: torch.Tensor) -> tuple:
    """
    pretrain_gpt's loss_func in C++, in Megatron-LM's form: (the per-token losses summed where loss_mask is 1, the number of those tokens, {'lm loss': [sum, count]}).
    """
def host_readback_count() -> int:
    """
    Device-to-host reads made through the library's one helper since the process started (the train loop makes one per iteration).
    """
def indexed_dataset_exists(path_prefix: str) -> bool:
    ...
def init_distributed(env: megatron_cpp._C.LauncherEnv | None = None, *, timeout_seconds: typing.SupportsFloat | None = None, device: typing.Any = 'cpu') -> ProcessGroup:
    """
    Starts the communication runtime (MPI under mpirun; NCCL on the first CUDA tensor) and returns the world ProcessGroup. env: LauncherEnv.from_environment() when None; device: where the job's tensors live ('cpu' or 'cuda').
    """
def init_logging(rank: typing.SupportsInt = 0, world_size: typing.SupportsInt = 1, level: str = '') -> None:
    """
    Installs the rank-prefixed logger (level: trace, debug, info, warn, error, off; empty: $MEGATRON_LOG_LEVEL or info).
    """
def iteration_dir_name(iteration: typing.SupportsInt | None) -> str:
    """
    'iter_0000100' for 100, 'release' for None.
    """
def list_iterations(dir: str) -> list[int]:
    """
    Iterations of the iter_NNNNNNN folders in dir, ascending (complete or not).
    """
def model_parallel_manual_seed(seed: typing.SupportsInt, tp_rank: typing.SupportsInt, device: torch.device = ...) -> RngTracker:
    """
    Megatron's model_parallel_cuda_manual_seed for any device: seeds the default generator with seed and returns a tracker whose 'model-parallel-rng' state is seeded with seed + 2718 + tp_rank.
    """
def num_floating_point_operations(args: Arguments, batch_size: typing.SupportsInt, padded_vocab_size: typing.SupportsInt) -> float:
    """
    Megatron-LM's model FLOPs of one iteration (forward + backward).
    """
def optimal_dtype(vocab_size: typing.SupportsInt) -> DType:
    """
    Megatron's token dtype: uint16 when vocab_size < 65500, else int32.
    """
def parse_and_normalize_split(split: str) -> typing.Annotated[list[float], "FixedSize(3)"]:
    """
    '969,30,1' -> [0.969, 0.03, 0.001].
    """
def parse_arguments(args: typing.Any, world_size: typing.SupportsInt | None = None, program: str = 'pretrain_gpt') -> megatron_cpp._C.Arguments | None:
    """
    Parses Megatron-LM flags from a list of strings (['--num-layers', '2', '--config', 'gpt.toml', ...]) or a dict ({'num_layers': 2, 'mock_data': True, 'data_path': [...]}: keys are flag names with - or _, True/False switch flags, None leaves a flag out) and validates them for world_size (default: the launcher's). Returns None for --help (the help is printed); bad flags raise RuntimeError with one line naming them.
    """
def parse_data_path(data_path: typing.Any) -> tuple:
    """
    --data-path words (a list or one string) -> (prefixes, weights or []).
    """
def rank_dir_name(tp_rank: typing.SupportsInt, pp_rank: typing.SupportsInt, pp_size: typing.SupportsInt, ep_rank: typing.SupportsInt = 0, ep_size: typing.SupportsInt = 1) -> str:
    """
    'mp_rank_01' without pipeline parallelism, else 'mp_rank_01_002'; with expert parallelism the expert-parallel rank follows ('mp_rank_01_003', 'mp_rank_01_002_003'): Megatron-LM's names.
    """
def rank_layout(world_size: typing.SupportsInt, tensor_model_parallel_size: typing.SupportsInt = 1, pipeline_model_parallel_size: typing.SupportsInt = 1, context_parallel_size: typing.SupportsInt = 1, expert_model_parallel_size: typing.SupportsInt = 1, expert_tensor_parallel_size: typing.SupportsInt | None = None, use_tp_pp_dp_mapping: bool = False) -> dict:
    """
    The rank lists of every group of each kind (Megatron-LM's order: TP, CP, DP, PP; experts ETP, EP, expert DP, PP; PP before DP with use_tp_pp_dp_mapping).
    """
def read_checkpoint_file(path: str) -> typing.Any:
    """
    One checkpoint file (e.g. .../iter_0000100/mp_rank_00/model_optim_rng.pt) as Python values (dicts, lists, numbers, CPU tensors; a pickled object such as the args' argparse.Namespace as a dict of its attributes with its '__class__'), checked against its folder's checksums; a missing, truncated or corrupt file raises naming it.
    """
def read_tracker(dir: str) -> typing.Any:
    """
    The iteration the checkpoint folder's tracker file names ('release' for an import), or None when dir holds no checkpoint.
    """
def reduce_from_tensor_model_parallel_region(input: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """
    forward: all-reduce; backward: identity.
    """
def reduce_scatter_to_sequence_parallel_region(input: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """
    forward: reduce-scatter dim 0; backward: all-gather dim 0.
    """
def scatter_to_sequence_parallel_region(input: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """
    forward: this rank's slice of dim 0; backward: all-gather dim 0.
    """
def scatter_to_tensor_model_parallel_region(input: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """
    forward: this rank's slice of the last dim; backward: all-gather it.
    """
def train_valid_test_num_samples(train_iters: typing.SupportsInt, global_batch_size: typing.SupportsInt, eval_interval: typing.SupportsInt, eval_iters: typing.SupportsInt) -> list[int | None]:
    """
    Megatron's sample request per split.
    """
def vocab_parallel_cross_entropy(vocab_parallel_logits: torch.Tensor, target: torch.Tensor, group: ProcessGroup = None, label_smoothing: typing.SupportsFloat = 0.0) -> torch.Tensor:
    """
    Per-token loss (fp32) from logits split over the vocabulary [..., V/tp] and target ids [...] into the full vocabulary, without gathering the logits.
    """
def vocab_size_with_padding(vocab_size: typing.SupportsInt, make_vocab_size_divisible_by: typing.SupportsInt, tensor_model_parallel_size: typing.SupportsInt, pad_vocab_size_to: typing.SupportsInt | None = None) -> int:
    """
    ceil(vocab / (divisible_by x tp)) x divisible_by x tp, as Megatron-LM pads it; or pad_vocab_size_to.
    """
def warm_up_cpu_math() -> None:
    """
    Calls each CPU math function LibTorch sends to MKL's vector math library once on one element, so that its first multi-threaded call cannot race MKL's kernel choice and get a low-accuracy kernel (pytorch/pytorch#188792). Done on import.
    """
__version__: str = '0.1.0'
torch_version: str = '2.11.0+cu130'
