"""megatron-cpp from Python: Megatron-style GPT pretraining on LibTorch.

Megatron-LM's pieces under their Megatron names: launcher and parallel state
(init_distributed, ParallelState), TransformerConfig, GPTModel and the tensor-parallel layers
(torch.nn.Modules over C++ modules), datasets (IndexedDataset and its builder, GPTDataset,
samplers), tokenizers, parse_arguments, and pretrain() with model_builder, dataset_builder and
forward_step written in Python or taken from the library. torch tensors cross into C++ and back
without copies; the library's errors arrive as Python exceptions with its one-line message.

`pip install .` installs it; a CMake build (MEGATRON_WITH_PYTHON) puts it in build/python.
It uses the LibTorch of the torch it was built against: import torch first (done here).
"""
import torch  # noqa: F401  (loads LibTorch and torch's Python types before the extension)

from ._C import (  # noqa: F401
    Activation,
    Arguments,
    BatchOptions,
    BatchSampler,
    BlendedDataset,
    BpeTrainer,
    DataIterator,
    Datasets,
    DType,
    EvaluationRecord,
    GPT2BPETokenizer,
    GPTDataset,
    GPTDatasetConfig,
    IndexedDataset,
    IndexedDatasetBuilder,
    IterationRecord,
    Launcher,
    LauncherEnv,
    MegatronDataset,
    MegatronPretrainingRandomSampler,
    MegatronPretrainingSampler,
    Normalization,
    NullTokenizer,
    ParallelState,
    ParamInit,
    ProcessGroup,
    RecomputeGranularity,
    RecomputeMethod,
    ReduceOp,
    RngTracker,
    ShardedParameter,
    ShardLayout,
    Split,
    Tokenizer,
    TrainingContext,
    TrainingResult,
    TransformerConfig,
    __version__,
    abort_job,
    arguments_help,
    build_batch,
    build_gpt_datasets,
    build_gpt_datasets_on_ranks,
    build_mock_gpt_datasets,
    build_tokenizer,
    copy_to_tensor_model_parallel_region,
    core_transformer_config_from_args,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    gpt_loss_func,
    indexed_dataset_exists,
    init_distributed,
    init_logging,
    model_parallel_manual_seed,
    num_floating_point_operations,
    optimal_dtype,
    parse_and_normalize_split,
    parse_arguments,
    parse_data_path,
    rank_layout,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
    torch_version,
    train_valid_test_num_samples,
    vocab_parallel_cross_entropy,
    vocab_size_with_padding,
)
from ._modules import ColumnParallelLinear, CppModule, GPTModel, RowParallelLinear, VocabParallelEmbedding  # noqa: F401
from ._training import pretrain  # noqa: F401
