// The optimizer's view of sharded data parallelism from outside a step: the gather hooks the
// model calls, whole parameters for checkpoints, and the bytes each kind of state holds.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <set>

#include "megatron/optimizer/optimizer.h"

namespace megatron::optimizer {

std::shared_ptr<transformer::ParamGather> MegatronOptimizer::param_gather(const std::string& fsdp_unit) const {
  if (!fsdp_) return nullptr;
  auto it = fsdp_unit_index_.find(fsdp_unit);
  return it == fsdp_unit_index_.end() ? nullptr : fsdp_->hooks(it->second);
}

void MegatronOptimizer::gather_params() {
  if (fsdp_) fsdp_->gather_all();
}

void MegatronOptimizer::release_params() {
  if (fsdp_) fsdp_->release_params();
}

int64_t MegatronOptimizer::fsdp_units_without_hooks() const {
  return fsdp_ ? fsdp_->units_without_hooks() : 0;
}

void MegatronOptimizer::unshard() {
  if (!fsdp_) return;
  fsdp_->gather_all();
  for (auto& p : params_) p.param.mutable_grad() = at::Tensor();
}

int64_t MegatronOptimizer::param_gathers() const {
  return fsdp_ ? fsdp_->gathers() : 0;
}

void MegatronOptimizer::reload_model_params() {
  at::NoGradGuard no_grad;
  for (auto& g : groups_) {
    if (g.shards) {
      g.shards->reload_main();
    } else if (buffers_[g.buffer]->dtype() != at::kFloat) {
      const auto& region = region_of(g);
      g.main.copy_(buffers_[g.buffer]->params_of(region).narrow(0, 0, region.numel));
    }
  }
}

MemoryReport MegatronOptimizer::memory_report() const {
  MemoryReport report;
  std::set<const void*> seen;  // storages counted already
  auto bytes = [&](const at::Tensor& t) -> int64_t {
    if (!t.defined()) return 0;
    const void* key = t.storage().unsafeGetStorageImpl();
    return seen.insert(key).second ? static_cast<int64_t>(t.storage().nbytes()) : 0;
  };
  for (const auto& b : buffers_) report.params += bytes(b->params());
  for (const auto& b : buffers_) report.grads += bytes(b->grads());
  for (const auto& g : groups_)
    if (g.fsdp_unit >= 0) report.grads += bytes(fsdp_->grad_shard(static_cast<size_t>(g.fsdp_unit), g.region));
  for (const auto& g : groups_) report.main_params += bytes(g.main);
  for (const auto& g : groups_)
    report.optimizer_state += bytes(g.exp_avg) + bytes(g.exp_avg_sq) + bytes(g.momentum) + bytes(g.step);
  return report;
}

}  // namespace megatron::optimizer
