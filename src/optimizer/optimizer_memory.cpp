// The optimizer's main parameters from outside a step: reloaded from the model after a
// checkpoint wrote into it, and the bytes each kind of state holds.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <set>

#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/optimizer/optimizer.h"

namespace megatron::optimizer {

void MegatronOptimizer::reload_model_params() {
  ddp_.finish_param_sync();
  at::NoGradGuard no_grad;
  for (auto& g : groups_) {
    const auto& buffer = ddp_.buffer(g.buffer);
    if (g.shards) {
      g.shards->reload_main();
    } else if (buffer.dtype() != at::kFloat) {
      const auto& region = buffer.regions()[g.region];
      g.main.copy_(buffer.params_of(region).narrow(0, 0, region.numel));
    }
  }
}

MemoryReport MegatronOptimizer::memory_report() const {
  std::set<const void*> seen;  // storages counted already: fp32 main parameters can be the model's
  const auto buffers = ddp_.memory(seen);
  MemoryReport report;
  report.params = buffers.params;
  report.grads = buffers.grads;
  auto bytes = [&](const at::Tensor& t) -> int64_t {
    if (!t.defined()) return 0;
    const void* key = t.storage().unsafeGetStorageImpl();
    return seen.insert(key).second ? static_cast<int64_t>(t.storage().nbytes()) : 0;
  };
  for (const auto& g : groups_) report.main_params += bytes(g.main);
  for (const auto& g : groups_)
    report.optimizer_state += bytes(g.exp_avg) + bytes(g.exp_avg_sq) + bytes(g.momentum) + bytes(g.step);
  return report;
}

}  // namespace megatron::optimizer
