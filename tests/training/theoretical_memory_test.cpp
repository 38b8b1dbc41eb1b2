// The start-up memory estimate: parameter counts against the published sizes of GPT-2 124M and
// Llama 2 7B, the activation terms against what recompute and sequence parallelism remove, and
// the refusal of a run that cannot fit.
#include "megatron/training/theoretical_memory.h"

#include <gtest/gtest.h>

#include "error_of.h"

namespace megatron::training {
namespace {

Arguments gpt2_124m() {
  Arguments a;
  a.num_layers = 12;
  a.hidden_size = 768;
  a.num_attention_heads = a.num_query_groups = 12;
  a.seq_length = a.max_position_embeddings = 1024;
  a.micro_batch_size = 1;
  a.num_microbatches = 1;
  a.data_parallel_size = 1;
  return a;
}

TEST(TheoreticalMemory, ParameterCountsAreThePublishedOnes) {
  // GPT-2 small: 124,439,808 with its 50,257 tokens, plus 47 x 768 for Megatron's padding to 50,304.
  EXPECT_EQ(theoretical_memory(gpt2_124m(), 0, 50257).parameters, 124439808.0 + 47 * 768);
  Arguments llama;  // Llama 2 7B: 6,738,415,616
  llama.num_layers = 32;
  llama.hidden_size = 4096;
  llama.num_attention_heads = llama.num_query_groups = 32;
  llama.ffn_hidden_size = 11008;
  llama.swiglu = true;
  llama.disable_bias_linear = true;
  llama.normalization = "RMSNorm";
  llama.position_embedding_type = "rope";
  llama.untie_embeddings_and_output_weights = true;
  llama.seq_length = 4096;
  llama.micro_batch_size = llama.num_microbatches = llama.data_parallel_size = 1;
  EXPECT_EQ(theoretical_memory(llama, 0, 32000).parameters, 6738415616.0);
  // Split in two stages, each holds its half of the layers and its end of the model.
  llama.pipeline_model_parallel_size = 2;
  const double first = theoretical_memory(llama, 0, 32000).parameters;
  const double last = theoretical_memory(llama, 1, 32000).parameters;
  EXPECT_EQ(first + last, 6738415616.0);
  // Mixtral 8x7B (transformers' count: 46,702,792,704): 8 SwiGLU experts of 14,336 in every layer,
  // a router of 8 x 4,096, grouped-query attention with 8 key/value heads.
  Arguments mixtral = llama;
  mixtral.pipeline_model_parallel_size = 1;
  mixtral.group_query_attention = true;
  mixtral.num_query_groups = 8;
  mixtral.ffn_hidden_size = 14336;
  mixtral.num_experts = 8;
  EXPECT_EQ(theoretical_memory(mixtral, 0, 32000).parameters, 46702792704.0);
  // Every other layer MoE, over two stages: the stages' counts add up to the whole model's.
  mixtral.moe_layer_freq = "2";
  const double dense_half = theoretical_memory(mixtral, 0, 32000).parameters;
  mixtral.pipeline_model_parallel_size = 2;
  EXPECT_EQ(theoretical_memory(mixtral, 0, 32000).parameters + theoretical_memory(mixtral, 1, 32000).parameters,
            dense_half);
}

TEST(TheoreticalMemory, BytesFollowPrecisionAndTheDistributedOptimizer) {
  Arguments a = gpt2_124m();
  const auto fp32 = theoretical_memory(a, 0, 50257);
  EXPECT_EQ(fp32.weights_and_optimizer(), fp32.parameters * 16);  // weights, grads, Adam m and v
  a.bf16 = true;
  a.use_distributed_optimizer = true;
  a.data_parallel_size = 4;
  const auto bf16 = theoretical_memory(a, 0, 50257);
  EXPECT_EQ(bf16.weights_and_optimizer(), bf16.parameters * (2 + 4 + 12.0 / 4));  // Megatron-LM's 6 + 12 / DP
  // ZeRO-2 also shards the fp32 gradients; ZeRO-3 the parameters, held as their fp32 main shard.
  a.data_parallel_sharding_strategy = "optim_grads";
  EXPECT_EQ(theoretical_memory(a, 0, 50257).weights_and_optimizer(), bf16.parameters * (2 + 16.0 / 4));
  a.data_parallel_sharding_strategy = "optim_grads_params";
  EXPECT_EQ(theoretical_memory(a, 0, 50257).weights_and_optimizer(), bf16.parameters * (16.0 / 4));
  a.bf16 = false;
  EXPECT_EQ(theoretical_memory(a, 0, 50257).weights_and_optimizer(), bf16.parameters * (16.0 / 4));
}

TEST(TheoreticalMemory, RecomputeAndSequenceParallelismShrinkActivations) {
  Arguments a = gpt2_124m();
  a.tensor_model_parallel_size = 2;
  const double none = theoretical_memory(a, 0, 50257).activations;
  a.sequence_parallel = true;
  const double sp = theoretical_memory(a, 0, 50257).activations;
  a.recompute_granularity = "selective";
  const double selective = theoretical_memory(a, 0, 50257).activations;
  a.recompute_modules = {"core_attn", "mlp"};
  const double both = theoretical_memory(a, 0, 50257).activations;
  EXPECT_LT(both, selective);  // the MLP's hidden activations go too
  a.recompute_modules = {"mlp"};
  EXPECT_GT(theoretical_memory(a, 0, 50257).activations, both);  // the attention scores stay
  a.recompute_modules.clear();
  a.recompute_granularity = "full";
  const double full = theoretical_memory(a, 0, 50257).activations;
  EXPECT_LT(sp, none);
  EXPECT_LT(selective, sp);
  EXPECT_LT(full, selective);
  a.micro_batch_size = 2;
  EXPECT_DOUBLE_EQ(theoretical_memory(a, 0, 50257).activations, 2 * full);  // linear in the micro-batch
}

TEST(TheoreticalMemory, ARunThatCannotFitIsRefusedBeforeAllocating) {
  Arguments a = gpt2_124m();
  a.hidden_size = 1 << 20;  // petabytes of weights
  a.num_attention_heads = 16;
  const std::string error = testing::error_of([&] { check_memory(a, 0, 50257, c10::Device(c10::kCPU), 1); });
  EXPECT_NE(error.find("[memory] this rank needs about "), std::string::npos) << error;
  EXPECT_NE(error.find("free in host memory per rank; raise --tensor-model-parallel-size"), std::string::npos) << error;
  a.ignore_memory_check = true;
  EXPECT_EQ(testing::error_of([&] { check_memory(a, 0, 50257, c10::Device(c10::kCPU), 1); }), "");
  EXPECT_EQ(testing::error_of([&] { check_memory(gpt2_124m(), 0, 50257, c10::Device(c10::kCPU), 1); }), "");
}

}  // namespace
}  // namespace megatron::training
