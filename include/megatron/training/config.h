// From Arguments to the configurations of the library's parts, in one place (Megatron-LM's
// core_transformer_config_from_args and get_megatron_optimizer_config).
#pragma once

#include "megatron/export.h"

#include <c10/core/ScalarType.h>

#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/optimizer/optimizer.h"
#include "megatron/optimizer/param_scheduler.h"
#include "megatron/training/training.h"
#include "megatron/transformer/transformer_config.h"

namespace megatron::training {

// The transformer configuration the flags describe, with this rank's TP group and RNG tracker.
MEGATRON_API transformer::TransformerConfig core_transformer_config_from_args(const TrainingContext& ctx);

// How the flags split the layers over the pipeline stages (--decoder-first/last-pipeline-num-layers,
// --account-for-embedding/loss-in-pipeline-split), the model's split without building it.
MEGATRON_API transformer::PipelineSplit pipeline_split_from_args(const Arguments& args);

// AdamW/SGD, clipping and, with --fp16, the loss scaler.
MEGATRON_API optimizer::OptimizerConfig optimizer_config_from_args(const Arguments& args);

// Data parallelism: buckets, overlap, the distributed optimizer and Megatron-FSDP's sharding
// strategy (its flag's words read here and nowhere else).
MEGATRON_API distributed::DistributedDataParallelConfig ddp_config_from_args(const Arguments& args);

// The model's dtype (Megatron-LM's args.params_dtype): bf16 with --bf16, fp16 with --fp16, else fp32.
MEGATRON_API at::ScalarType params_dtype(const Arguments& args);

// The learning-rate schedule; its steps are samples, as in Megatron-LM.
MEGATRON_API optimizer::ParamSchedulerConfig scheduler_config_from_args(const Arguments& args);

}  // namespace megatron::training
