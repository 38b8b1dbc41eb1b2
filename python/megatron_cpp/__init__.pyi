"""Type stub of megatron_cpp: the extension module _C and the Python layer (_modules, _training)."""
from enum import Enum
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, overload

import numpy as np
import torch

__version__: str
torch_version: str

# --- logging --------------------------------------------------------------------------------
def init_logging(rank: int = 0, world_size: int = 1, level: str = "") -> None: ...

# --- host memory ----------------------------------------------------------------------------
def enable_cpu_allocator_cache(max_cached_bytes: int = -1) -> None: ...
def empty_cpu_allocator_cache() -> None: ...
def cpu_allocator_cache_stats() -> Dict[str, int]: ...
def warm_up_cpu_math() -> None: ...

# --- comm -----------------------------------------------------------------------------------
class Launcher(Enum):
    NONE = 0
    OPENMPI = 1
    PMI = 2
    TORCHRUN = 3

class LauncherEnv:
    launcher: Launcher
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    @staticmethod
    def from_environment() -> LauncherEnv: ...
    @staticmethod
    def from_variables(variables: Mapping[str, str]) -> LauncherEnv: ...

class ReduceOp(Enum):
    SUM = 0
    AVG = 1
    MAX = 2
    MIN = 3

class ProcessGroup:
    @property
    def name(self) -> str: ...
    def rank(self) -> int: ...
    def size(self) -> int: ...
    @property
    def global_ranks(self) -> List[int]: ...
    def global_rank(self, group_rank: int) -> int: ...
    @property
    def timeout_seconds(self) -> float: ...
    def new_group(self, ranks: Sequence[int], name: str) -> Optional[ProcessGroup]: ...
    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp = ReduceOp.SUM) -> None: ...
    def all_gather(self, output: torch.Tensor, input: torch.Tensor) -> None: ...
    def reduce_scatter(self, output: torch.Tensor, input: torch.Tensor, op: ReduceOp = ReduceOp.SUM) -> None: ...
    def broadcast(self, tensor: torch.Tensor, src: int) -> None: ...
    def send(self, tensor: torch.Tensor, dst: int) -> None: ...
    def recv(self, tensor: torch.Tensor, src: int) -> None: ...
    def barrier(self) -> None: ...

def init_distributed(env: Optional[LauncherEnv] = None, *, timeout_seconds: Optional[float] = None,
                     device: Union[str, torch.device] = "cpu") -> ProcessGroup: ...
def abort_job(exit_code: int = 1) -> None: ...

# --- parallel state -------------------------------------------------------------------------
def rank_layout(world_size: int, tensor_model_parallel_size: int = 1,
                pipeline_model_parallel_size: int = 1,
                context_parallel_size: int = 1) -> Dict[str, List[List[int]]]: ...

class ParallelState:
    @staticmethod
    def initialize_model_parallel(world: ProcessGroup, tensor_model_parallel_size: int = 1,
                                  pipeline_model_parallel_size: int = 1,
                                  virtual_pipeline_model_parallel_size: Optional[int] = None,
                                  context_parallel_size: int = 1) -> ParallelState: ...
    def get_world_group(self) -> ProcessGroup: ...
    def get_tensor_model_parallel_group(self) -> ProcessGroup: ...
    def get_pipeline_model_parallel_group(self) -> ProcessGroup: ...
    def get_data_parallel_group(self) -> ProcessGroup: ...
    def get_context_parallel_group(self) -> ProcessGroup: ...
    def get_model_parallel_group(self) -> ProcessGroup: ...
    def get_embedding_group(self) -> Optional[ProcessGroup]: ...
    def get_position_embedding_group(self) -> Optional[ProcessGroup]: ...
    def get_world_size(self) -> int: ...
    def get_rank(self) -> int: ...
    def get_tensor_model_parallel_world_size(self) -> int: ...
    def get_tensor_model_parallel_rank(self) -> int: ...
    def get_pipeline_model_parallel_world_size(self) -> int: ...
    def get_pipeline_model_parallel_rank(self) -> int: ...
    def get_data_parallel_world_size(self) -> int: ...
    def get_data_parallel_rank(self) -> int: ...
    def get_context_parallel_world_size(self) -> int: ...
    def get_context_parallel_rank(self) -> int: ...
    def get_virtual_pipeline_model_parallel_world_size(self) -> Optional[int]: ...
    def get_tensor_model_parallel_src_rank(self) -> int: ...
    def get_data_parallel_src_rank(self) -> int: ...
    def get_pipeline_model_parallel_first_rank(self) -> int: ...
    def get_pipeline_model_parallel_last_rank(self) -> int: ...
    def get_pipeline_model_parallel_next_rank(self) -> int: ...
    def get_pipeline_model_parallel_prev_rank(self) -> int: ...
    def is_pipeline_first_stage(self, virtual_rank: Optional[int] = None) -> bool: ...
    def is_pipeline_last_stage(self, virtual_rank: Optional[int] = None) -> bool: ...
    def is_rank_in_embedding_group(self) -> bool: ...
    def is_rank_in_position_embedding_group(self) -> bool: ...

# --- tensor parallel ------------------------------------------------------------------------
class ShardLayout:
    partition_dim: int
    num_chunks: int
    rank: int
    size: int
    def is_sharded(self) -> bool: ...
    def shard(self, full: torch.Tensor) -> torch.Tensor: ...
    def unshard(self, shards: Sequence[torch.Tensor]) -> torch.Tensor: ...
    def full_shape(self, shard_shape: Sequence[int]) -> List[int]: ...

class ParamInit:
    class Kind(Enum):
        NORMAL = 0
        ZEROS = 1
        ONES = 2
    kind: ParamInit.Kind
    std: float
    layout: ShardLayout

class RngTracker:
    def __init__(self, device: torch.device = ...) -> None: ...
    def add(self, name: str, seed: int) -> None: ...
    def has(self, name: str) -> bool: ...
    def reset(self) -> None: ...
    def fork(self, fn: Callable[[], Any], name: str = "model-parallel-rng") -> None: ...
    def get_states(self) -> Dict[str, torch.Tensor]: ...
    def set_states(self, states: Mapping[str, torch.Tensor]) -> None: ...
    @property
    def device(self) -> torch.device: ...

def model_parallel_manual_seed(seed: int, tp_rank: int, device: torch.device = ...) -> RngTracker: ...
def copy_to_tensor_model_parallel_region(input: torch.Tensor, group: Optional[ProcessGroup]) -> torch.Tensor: ...
def reduce_from_tensor_model_parallel_region(input: torch.Tensor, group: Optional[ProcessGroup]) -> torch.Tensor: ...
def scatter_to_tensor_model_parallel_region(input: torch.Tensor, group: Optional[ProcessGroup]) -> torch.Tensor: ...
def gather_from_tensor_model_parallel_region(input: torch.Tensor, group: Optional[ProcessGroup]) -> torch.Tensor: ...
def scatter_to_sequence_parallel_region(input: torch.Tensor, group: Optional[ProcessGroup]) -> torch.Tensor: ...
def gather_from_sequence_parallel_region(input: torch.Tensor, group: Optional[ProcessGroup],
                                         tensor_parallel_output_grad: bool = True) -> torch.Tensor: ...
def reduce_scatter_to_sequence_parallel_region(input: torch.Tensor, group: Optional[ProcessGroup]) -> torch.Tensor: ...
def vocab_parallel_cross_entropy(vocab_parallel_logits: torch.Tensor, target: torch.Tensor,
                                 group: Optional[ProcessGroup] = None, label_smoothing: float = 0.0) -> torch.Tensor: ...

# torch.nn.Modules over C++ modules (python/megatron_cpp/_modules.py): parameters, buffers and
# submodules are the C++ ones; C++-only members are reachable as attributes.
class CppModule(torch.nn.Module):
    cpp_module: Any
    training: bool  # the C++ module's flag
    @classmethod
    def from_cpp(cls, cpp_module: Any) -> CppModule: ...

class ColumnParallelLinear(CppModule):
    output_size_per_partition: int
    def __init__(self, input_size: int, output_size: int, *, bias: bool = True, gather_output: bool = False,
                 sequence_parallel: bool = False, skip_weight_param_allocation: bool = False,
                 num_chunks: int = 1, init_method_std: float = 0.02, perform_initialization: bool = True,
                 tp_group: Optional[ProcessGroup] = None) -> None: ...
    def forward(self, input: torch.Tensor, weight: Optional[torch.Tensor] = None) -> torch.Tensor: ...
    def param_inits(self) -> List[Tuple[str, ParamInit]]: ...

class RowParallelLinear(CppModule):
    input_size_per_partition: int
    def __init__(self, input_size: int, output_size: int, *, bias: bool = True, input_is_parallel: bool = False,
                 sequence_parallel: bool = False, init_method_std: float = 0.02,
                 perform_initialization: bool = True, tp_group: Optional[ProcessGroup] = None) -> None: ...
    def forward(self, input: torch.Tensor) -> torch.Tensor: ...
    def param_inits(self) -> List[Tuple[str, ParamInit]]: ...

class VocabParallelEmbedding(CppModule):
    vocab_start_index: int
    vocab_end_index: int
    def __init__(self, num_embeddings: int, embedding_dim: int, *, reduce_scatter_embeddings: bool = False,
                 init_method_std: float = 0.02, perform_initialization: bool = True,
                 tp_group: Optional[ProcessGroup] = None) -> None: ...
    def forward(self, input: torch.Tensor) -> torch.Tensor: ...
    def param_inits(self) -> List[Tuple[str, ParamInit]]: ...

# --- transformer ----------------------------------------------------------------------------
class Normalization(Enum):
    LAYER_NORM = 0
    RMS_NORM = 1

class Activation(Enum):
    GELU = 0
    GELU_TANH = 1
    SILU = 2

class RecomputeGranularity(Enum):
    NONE = 0
    FULL = 1
    SELECTIVE = 2

class RecomputeMethod(Enum):
    UNIFORM = 0
    BLOCK = 1

class TransformerConfig:
    """Keyword construction; enum fields also take Megatron's strings ('RMSNorm', 'silu', 'full')."""
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_query_groups: Optional[int]
    ffn_hidden_size: Optional[int]
    kv_channels: Optional[int]
    normalization: Normalization
    layernorm_epsilon: float
    add_bias_linear: bool
    add_qkv_bias: Optional[bool]
    gated_linear_unit: bool
    activation: Activation
    hidden_dropout: float
    attention_dropout: float
    init_method_std: float
    use_scaled_init_method: bool
    perform_initialization: bool
    tensor_model_parallel_size: int
    pipeline_model_parallel_size: int
    virtual_pipeline_model_parallel_size: Optional[int]
    tp_group: Optional[ProcessGroup]
    sequence_parallel: bool
    rng_tracker: Optional[RngTracker]
    recompute_granularity: RecomputeGranularity
    recompute_method: RecomputeMethod
    recompute_num_layers: int
    def __init__(self, **fields: Any) -> None: ...
    def finalize(self) -> TransformerConfig: ...

# --- models ---------------------------------------------------------------------------------
def vocab_size_with_padding(vocab_size: int, make_vocab_size_divisible_by: int,
                            tensor_model_parallel_size: int) -> int: ...

class ShardedParameter:
    name: str
    init_name: str
    param: torch.Tensor
    init: ParamInit

class GPTModel(CppModule):
    config: TransformerConfig
    padded_vocab_size: int
    pre_process: bool
    post_process: bool
    def __init__(self, config: TransformerConfig, vocab_size: int, max_sequence_length: int, *,
                 make_vocab_size_divisible_by: int = 128, pre_process: bool = True, post_process: bool = True,
                 pipeline_model_parallel_rank: int = 0, virtual_pipeline_model_parallel_rank: int = 0,
                 share_embeddings_and_output_weights: bool = True,
                 position_embedding_type: str = "learned_absolute", rotary_percent: float = 1.0,
                 rotary_base: float = 10000.0, parallel_output: bool = False, label_smoothing: float = 0.0,
                 seed: int = 1234) -> None: ...
    def forward(self, input_ids: torch.Tensor, position_ids: Optional[torch.Tensor] = None,
                attention_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None) -> torch.Tensor: ...
    def set_input_tensor(self, input: torch.Tensor) -> None: ...
    def shared_embedding_or_output_weight(self) -> torch.Tensor: ...
    def allreduce_word_embedding_grads(self, embedding_group: Optional[ProcessGroup]) -> None: ...
    def allreduce_sequence_parallel_grads(self) -> None: ...
    def sharded_parameters(self) -> List[ShardedParameter]: ...
    def initialize_parameters(self, seed: int) -> None: ...
    def full_state_dict(self) -> Dict[str, torch.Tensor]: ...
    def load_full_state_dict(self, state_dict: Mapping[str, torch.Tensor], strict: bool = True) -> None: ...
    def save_state_dict_file(self, path: str) -> None: ...
    def load_state_dict_file(self, path: str, strict: bool = True) -> None: ...

# --- tokenizer ------------------------------------------------------------------------------
class Tokenizer:
    def tokenize(self, text: Union[str, bytes]) -> List[int]: ...
    def detokenize(self, ids: Sequence[int]) -> str: ...
    def detokenize_bytes(self, ids: Sequence[int]) -> bytes: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def eod(self) -> int: ...

class GPT2BPETokenizer(Tokenizer):
    def __init__(self, vocab_file: str, merge_file: str) -> None: ...
    def token_to_id(self, token: str) -> int: ...

class NullTokenizer(Tokenizer):
    def __init__(self, vocab_size: int) -> None: ...

class BpeTrainer:
    def __init__(self, vocab_size: int = 8192, min_frequency: int = 2) -> None: ...
    def add_text(self, text: Union[str, bytes]) -> None: ...
    def train_and_save(self, dir: str) -> None: ...
    @property
    def num_words(self) -> int: ...

@overload
def build_tokenizer(tokenizer_type: str, *, vocab_file: str = "", merge_file: str = "", vocab_size: int = 0) -> Tokenizer: ...
@overload
def build_tokenizer(args: Arguments) -> Tokenizer: ...

# --- datasets -------------------------------------------------------------------------------
class DType(Enum):
    UINT8 = 1
    INT8 = 2
    INT16 = 3
    INT32 = 4
    INT64 = 5
    FLOAT64 = 6
    FLOAT32 = 7
    UINT16 = 8
    @property
    def numpy(self) -> np.dtype: ...
    @property
    def itemsize(self) -> int: ...

def optimal_dtype(vocab_size: int) -> DType: ...
def indexed_dataset_exists(path_prefix: str) -> bool: ...

_TokenIds = Union[torch.Tensor, np.ndarray, Sequence[int]]

class IndexedDataset:
    def __init__(self, path_prefix: str) -> None: ...
    @property
    def path_prefix(self) -> str: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def num_documents(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    def __len__(self) -> int: ...
    def __getitem__(self, idx: int) -> np.ndarray: ...
    def get(self, idx: int, offset: int = 0, length: Optional[int] = None) -> np.ndarray: ...
    def get_document(self, doc: int) -> np.ndarray: ...
    @property
    def sequence_lengths(self) -> np.ndarray: ...
    @property
    def sequence_pointers(self) -> np.ndarray: ...
    @property
    def document_indices(self) -> np.ndarray: ...
    def check_unchanged(self) -> None: ...

class IndexedDatasetBuilder:
    def __init__(self, bin_path: str, dtype: Union[DType, np.dtype, type, str] = DType.INT32) -> None: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def num_sequences(self) -> int: ...
    @property
    def num_documents(self) -> int: ...
    def add_item(self, tokens: _TokenIds) -> None: ...
    def end_document(self) -> None: ...
    def add_document(self, tokens: _TokenIds, lengths: Sequence[int]) -> None: ...
    def add_index(self, path_prefix: str) -> None: ...
    def finalize(self, idx_path: str) -> None: ...

class Split(Enum):
    TRAIN = 0
    VALID = 1
    TEST = 2

class GPTDatasetConfig:
    random_seed: int
    sequence_length: int
    split: str
    add_extra_token_to_sequence: bool
    drop_last_partial_validation_sequence: bool
    pad_token: int
    path_to_cache: str
    build_cache: bool
    def __init__(self, *, random_seed: int = 1234, sequence_length: int = 0, split: str = "969,30,1",
                 add_extra_token_to_sequence: bool = True, drop_last_partial_validation_sequence: bool = True,
                 pad_token: int = -1, path_to_cache: str = "", build_cache: bool = True) -> None: ...

class MegatronDataset:
    def __len__(self) -> int: ...
    def __getitem__(self, idx: int) -> np.ndarray: ...
    @property
    def sample_length(self) -> int: ...
    @property
    def pad_token(self) -> int: ...
    @property
    def description(self) -> str: ...
    def check_unchanged(self) -> None: ...

class GPTDataset(MegatronDataset):
    def __init__(self, dataset: IndexedDataset, range: Optional[Tuple[int, int]] = None,
                 num_samples: Optional[int] = None, split: Split = Split.TRAIN,
                 config: GPTDatasetConfig = ...) -> None: ...
    def get(self, idx: int) -> Tuple[np.ndarray, np.ndarray]: ...
    @property
    def document_index(self) -> np.ndarray: ...
    @property
    def sample_index(self) -> np.ndarray: ...
    @property
    def shuffle_index(self) -> np.ndarray: ...
    @property
    def num_epochs(self) -> int: ...
    @property
    def separate_final_epoch(self) -> bool: ...
    @property
    def loaded_from_cache(self) -> bool: ...
    @property
    def cache_prefix(self) -> str: ...

class BlendedDataset(MegatronDataset):
    def __init__(self, datasets: Sequence[MegatronDataset], weights: Sequence[float],
                 size: Optional[int] = None) -> None: ...
    @property
    def dataset_index(self) -> np.ndarray: ...
    @property
    def dataset_sample_index(self) -> np.ndarray: ...

_DataPath = Union[str, Sequence[str]]
_SampleCounts = Sequence[Optional[int]]
_DatasetTriple = Tuple[Optional[MegatronDataset], Optional[MegatronDataset], Optional[MegatronDataset]]

def parse_and_normalize_split(split: str) -> List[float]: ...
def parse_data_path(data_path: _DataPath) -> Tuple[List[str], List[float]]: ...
def train_valid_test_num_samples(train_iters: int, global_batch_size: int, eval_interval: int,
                                 eval_iters: int) -> List[Optional[int]]: ...
def build_gpt_datasets(data_path: _DataPath, sizes: _SampleCounts, config: GPTDatasetConfig,
                       mid_level_surplus: float = 0.005) -> _DatasetTriple: ...
def build_gpt_datasets_on_ranks(data_path: _DataPath, sizes: _SampleCounts, config: GPTDatasetConfig,
                                group: ProcessGroup, mid_level_surplus: float = 0.005) -> _DatasetTriple: ...
def build_mock_gpt_datasets(vocab_size: int, eod_token: int, sizes: _SampleCounts,
                            config: GPTDatasetConfig) -> _DatasetTriple: ...

class BatchSampler:
    def __iter__(self) -> Iterator[List[int]]: ...
    def __next__(self) -> List[int]: ...
    @property
    def consumed_samples(self) -> int: ...

class MegatronPretrainingSampler(BatchSampler):
    def __init__(self, total_samples: int, consumed_samples: int, micro_batch_size: int,
                 data_parallel_rank: int, data_parallel_size: int, drop_last: bool = True) -> None: ...

class MegatronPretrainingRandomSampler(BatchSampler):
    def __init__(self, total_samples: int, consumed_samples: int, micro_batch_size: int,
                 data_parallel_rank: int, data_parallel_size: int, data_sharding: bool = True) -> None: ...

class BatchOptions:
    eod_token: int
    sequence_length: int
    reset_position_ids: bool
    reset_attention_mask: bool
    eod_mask_loss: bool
    create_attention_mask: bool
    add_extra_token_to_sequence: bool
    pin_memory: bool
    def __init__(self, *, eod_token: int = -1, sequence_length: int = 0, reset_position_ids: bool = False,
                 reset_attention_mask: bool = False, eod_mask_loss: bool = False,
                 create_attention_mask: bool = True, add_extra_token_to_sequence: bool = True,
                 pin_memory: bool = False) -> None: ...

# tokens, labels [b, s] int64; loss_mask [b, s] float32; attention_mask bool [b, 1, s, s] or None;
# position_ids [b, s] int64.
_Batch = Dict[str, Optional[torch.Tensor]]

def build_batch(dataset: MegatronDataset, indices: Sequence[int], options: BatchOptions = ...) -> _Batch: ...

class DataIterator:
    def __init__(self, dataset: MegatronDataset, sampler: BatchSampler, options: BatchOptions = ...,
                 prefetch: int = 0, check_files_every: int = 100) -> None: ...
    def __iter__(self) -> Iterator[_Batch]: ...
    def __next__(self) -> _Batch: ...
    @property
    def consumed_samples(self) -> int: ...

# --- arguments ------------------------------------------------------------------------------
class Arguments:
    num_layers: int
    hidden_size: int
    ffn_hidden_size: Optional[int]
    num_attention_heads: int
    group_query_attention: bool
    num_query_groups: int
    kv_channels: Optional[int]
    seq_length: int
    max_position_embeddings: int
    position_embedding_type: str
    rotary_percent: float
    rotary_base: float
    normalization: str
    norm_epsilon: float
    swiglu: bool
    openai_gelu: bool
    disable_bias_linear: bool
    untie_embeddings_and_output_weights: bool
    attention_dropout: float
    hidden_dropout: float
    init_method_std: float
    make_vocab_size_divisible_by: int
    recompute_granularity: str
    recompute_method: str
    recompute_num_layers: int
    tensor_model_parallel_size: int
    pipeline_model_parallel_size: int
    num_layers_per_virtual_pipeline_stage: Optional[int]
    num_virtual_stages_per_pipeline_rank: Optional[int]
    sequence_parallel: bool
    use_distributed_optimizer: bool
    distributed_timeout_minutes: float
    data_path: List[str]
    split: str
    mock_data: bool
    tokenizer_type: str
    vocab_file: str
    merge_file: str
    vocab_size: Optional[int]
    data_cache_path: str
    reset_position_ids: bool
    reset_attention_mask: bool
    eod_mask_loss: bool
    num_workers: int
    micro_batch_size: int
    global_batch_size: Optional[int]
    train_iters: Optional[int]
    train_samples: Optional[int]
    seed: int
    optimizer: str
    lr: Optional[float]
    min_lr: float
    lr_decay_style: str
    lr_decay_iters: Optional[int]
    lr_decay_samples: Optional[int]
    lr_warmup_iters: int
    lr_warmup_fraction: Optional[float]
    lr_warmup_samples: int
    lr_warmup_init: float
    lr_wsd_decay_style: str
    lr_wsd_decay_iters: Optional[int]
    weight_decay: float
    adam_beta1: float
    adam_beta2: float
    adam_eps: float
    sgd_momentum: float
    clip_grad: float
    bf16: bool
    fp16: bool
    loss_scale: Optional[float]
    initial_loss_scale: float
    min_loss_scale: float
    loss_scale_window: int
    hysteresis: int
    log_interval: int
    eval_interval: int
    eval_iters: int
    metrics_file: str
    skip_nan_iterations: bool
    save: str
    save_interval: Optional[int]
    no_save_optim: bool
    no_save_rng: bool
    load: str
    no_load_optim: bool
    no_load_rng: bool
    finetune: bool
    ckpt_step: Optional[int]
    load_fallback: bool
    keep_last_checkpoints: int
    exit_signal_handler: bool
    device: str
    tf32: bool
    no_cpu_allocator_cache: bool
    exit_interval: Optional[int]
    exit_duration_in_mins: Optional[float]
    recompute_activations: bool
    use_rotary_position_embeddings: bool
    use_mcore_models: bool
    transformer_impl: str
    use_flash_attn: bool
    attention_backend: str
    no_masked_softmax_fusion: bool
    attention_softmax_in_fp32: bool
    apply_query_key_layer_scaling: bool
    no_bias_gelu_fusion: bool
    no_bias_dropout_fusion: bool
    no_bias_swiglu_fusion: bool
    no_rope_fusion: bool
    no_gradient_accumulation_fusion: bool
    no_persist_layer_norm: bool
    overlap_grad_reduce: bool
    overlap_param_gather: bool
    distributed_backend: str
    no_create_attention_mask_in_dataloader: bool
    manual_gc: bool
    manual_gc_interval: int
    log_throughput: bool
    timing_log_level: int
    world_size: int
    data_parallel_size: int
    virtual_pipeline_model_parallel_size: Optional[int]
    num_microbatches: int
    config_file: str
    def __init__(self) -> None: ...
    def validate(self, world_size: int) -> None: ...
    def to_dict(self) -> Dict[str, Any]: ...

_ArgumentsLike = Union[Arguments, Sequence[str], Mapping[str, Any]]

def parse_arguments(args: Union[Sequence[str], Mapping[str, Any]], world_size: Optional[int] = None,
                    program: str = "pretrain_gpt") -> Optional[Arguments]: ...
def arguments_help(program: str = "pretrain_gpt") -> str: ...

# --- training -------------------------------------------------------------------------------
class TrainingContext:
    @property
    def args(self) -> Arguments: ...
    @property
    def parallel_state(self) -> ParallelState: ...
    @property
    def rng_tracker(self) -> RngTracker: ...
    @property
    def device(self) -> torch.device: ...
    @property
    def virtual_pipeline_model_parallel_rank(self) -> Optional[int]: ...

class Datasets:
    def __init__(self, train: MegatronDataset, valid: Optional[MegatronDataset] = None,
                 test: Optional[MegatronDataset] = None, eod_token: int = -1) -> None: ...
    @property
    def train(self) -> MegatronDataset: ...
    @property
    def valid(self) -> Optional[MegatronDataset]: ...
    @property
    def test(self) -> Optional[MegatronDataset]: ...
    @property
    def eod_token(self) -> int: ...

class IterationRecord:
    iteration: int
    metrics: Dict[str, float]
    learning_rate: float
    grad_norm: float
    loss_scale: float
    skipped: bool
    elapsed_ms: float

class EvaluationRecord:
    iteration: int
    split: str
    metrics: Dict[str, float]

class TrainingResult:
    iterations: List[IterationRecord]
    evaluations: List[EvaluationRecord]
    consumed_train_samples: int
    iteration: int
    loaded_iteration: Optional[int]
    saved_iterations: List[int]
    exited_on_signal: bool
    exited_early: bool

_LossFunc = Callable[[torch.Tensor], Tuple[torch.Tensor, Dict[str, Union[torch.Tensor, float]]]]
_ModelBuilder = Callable[[TrainingContext, bool, bool], CppModule]
_DatasetBuilder = Callable[[TrainingContext, List[int]], Union[Datasets, Sequence[Optional[MegatronDataset]]]]
_ForwardStep = Callable[[DataIterator, CppModule], Tuple[torch.Tensor, _LossFunc]]

def core_transformer_config_from_args(ctx: TrainingContext) -> TransformerConfig: ...
def num_floating_point_operations(args: Arguments, batch_size: int, padded_vocab_size: int) -> float: ...
def gpt_loss_func(loss_mask: torch.Tensor, output_tensor: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]: ...
def pretrain(args: _ArgumentsLike, model_builder: Optional[_ModelBuilder] = None,
             dataset_builder: Optional[_DatasetBuilder] = None, forward_step: Optional[_ForwardStep] = None, *,
             world: Optional[ProcessGroup] = None) -> Optional[TrainingResult]: ...

# --- checkpointing --------------------------------------------------------------------------
def iteration_dir_name(iteration: Optional[int]) -> str: ...
def rank_dir_name(tp_rank: int, pp_rank: int, pp_size: int) -> str: ...
def read_tracker(dir: str) -> Union[int, str, None]: ...
def list_iterations(dir: str) -> List[int]: ...
def read_checkpoint_file(path: str) -> Any: ...
def checkpoint_arguments(path: str) -> Arguments: ...
def convert_checkpoint(
    *,
    load: str = "",
    save: str = "",
    ckpt_step: Optional[int] = None,
    target_tensor_model_parallel_size: int = 1,
    target_pipeline_model_parallel_size: int = 1,
    target_num_layers_per_virtual_pipeline_stage: Optional[int] = None,
    export_hf: str = "",
    import_hf: str = "",
    make_vocab_size_divisible_by: int = 128,
) -> Union[int, str]: ...
