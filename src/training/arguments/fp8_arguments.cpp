#include "training/arguments/fp8_arguments.h"

#include <c10/util/Exception.h>

#include "megatron/transformer/transformer_config.h"

namespace megatron::training::detail {

#define FP8_CHECK(cond, ...) TORCH_CHECK(cond, "[arguments] ", __VA_ARGS__)

void validate_fp8(const Arguments& a) {
  if (a.fp8_format.empty()) return;
  FP8_CHECK(a.fp8_recipe == "delayed" || a.fp8_recipe == "tensorwise", "--fp8-recipe ", a.fp8_recipe,
            " is not implemented (block-scaled FP8 needs Transformer Engine's kernels); use delayed or tensorwise");
  FP8_CHECK(a.fp8_amax_history_len >= 1, "--fp8-amax-history-len must be >= 1, got ", a.fp8_amax_history_len);
  const std::string sizes =
      transformer::fp8_gemm_size_problem(a.hidden_size, a.num_attention_heads, a.num_query_groups,
                                         a.kv_channels.value_or(a.hidden_size / a.num_attention_heads),
                                         a.ffn_hidden_size.value_or(4 * a.hidden_size), a.tensor_model_parallel_size);
  FP8_CHECK(sizes.empty(), sizes);
  FP8_CHECK(!a.domino, "--fp8-format with --domino is not implemented; drop one");
  const int64_t per_stage = a.num_layers / a.pipeline_model_parallel_size;
  const std::pair<const char*, int64_t> counts[] = {{"--num-layers-at-start-in-bf16", a.num_layers_at_start_in_bf16},
                                                    {"--num-layers-at-end-in-bf16", a.num_layers_at_end_in_bf16}};
  for (const auto& [flag, n] : counts)
    FP8_CHECK(!a.first_last_layers_bf16 || (n >= 0 && n <= per_stage), flag, " (", n,
              ") must be between 0 and the layers per pipeline stage (", per_stage, ")");
}

}  // namespace megatron::training::detail
