#include "megatron/distributed/finalize_model_grads.h"

#include <torch/nn/module.h>

#include "megatron/models/common/language_module.h"
#include "megatron/transformer/moe/router.h"

namespace megatron::distributed {

void finalize_model_grads(const std::vector<std::shared_ptr<torch::nn::Module>>& model, DistributedDataParallel& ddp,
                          const ParallelState& ps) {
  ddp.finish_grad_sync();
  for (const auto& chunk : model) {
    auto* lm = dynamic_cast<models::common::LanguageModule*>(chunk.get());
    if (!lm) continue;
    lm->allreduce_sequence_parallel_grads();
    if (ps.get_pipeline_model_parallel_world_size() > 1 && (lm->pre_process() || lm->post_process()))
      lm->allreduce_word_embedding_grads(ps.get_embedding_group());
  }
  transformer::update_router_expert_bias(
      model, {&ps.get_tensor_model_parallel_group(), &ps.get_data_parallel_group(/*with_context_parallel=*/true)});
}

}  // namespace megatron::distributed
