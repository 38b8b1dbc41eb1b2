// The optimizer's view of sharded data parallelism from outside a step: the hooks the model
// calls (ZeRO-3's gathers, --overlap-param-gather's waits), whole parameters for checkpoints,
// and the bytes each kind of state holds.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <functional>
#include <set>
#include <utility>
#include <vector>

#include "megatron/optimizer/optimizer.h"

namespace megatron::optimizer {

namespace {

// --overlap-param-gather: a unit's forward waits for the buckets that hold its parameters, then
// runs its fsdp unit's hooks (ZeRO-2's decoder layers), if it has them.
class ParamSyncWait : public transformer::ParamGather {
 public:
  ParamSyncWait(std::vector<std::function<void()>> waits, std::shared_ptr<transformer::ParamGather> unit)
      : waits_(std::move(waits)), unit_(std::move(unit)) {}
  void before_forward() override {
    for (auto& wait : waits_) wait();
    if (unit_) unit_->before_forward();
  }
  void after_forward(const at::Tensor& output) override {
    if (unit_) unit_->after_forward(output);
  }

 private:
  std::vector<std::function<void()>> waits_;
  std::shared_ptr<transformer::ParamGather> unit_;
};

}  // namespace

std::shared_ptr<transformer::ParamGather> MegatronOptimizer::param_gather(const std::string& fsdp_unit) const {
  std::shared_ptr<transformer::ParamGather> unit;
  if (fsdp_) {
    if (auto it = fsdp_unit_index_.find(fsdp_unit); it != fsdp_unit_index_.end()) unit = fsdp_->hooks(it->second);
  }
  if (!config_.overlap_param_gather || !distributed_ || config_.shard_params) return unit;
  // buckets_[k] cuts buffers_[k], one of the buffers outside fsdp units.
  std::vector<std::function<void()>> waits;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    std::vector<size_t> mine;
    for (size_t j = 0; j < buffer_params_[k].size(); ++j)
      if (gather_wait_unit(buffer_params_[k][j]) == fsdp_unit) mine.push_back(j);
    if (!mine.empty()) waits.push_back(buckets_[k]->param_sync_waiter(mine));
  }
  if (waits.empty()) return unit;
  hooked_units_.insert(fsdp_unit);
  return std::make_shared<ParamSyncWait>(std::move(waits), std::move(unit));
}

bool MegatronOptimizer::param_sync_overlapped() const {
  if (!config_.overlap_param_gather || !distributed_ || config_.shard_params || buckets_.empty()) return false;
  for (size_t k = 0; k < buckets_.size(); ++k)
    for (size_t i : buffer_params_[k])
      if (!hooked_units_.count(gather_wait_unit(i))) return false;
  return true;
}

int64_t MegatronOptimizer::param_gather_units_overlapped() const {
  return fsdp_ && config_.overlap_param_gather && !config_.shard_params ? fsdp_->units_gathered_under_forward() : 0;
}

void MegatronOptimizer::finish_param_sync() {
  for (auto& b : buckets_) b->finish_param_sync();
  if (fsdp_) fsdp_->finish_param_sync();
}

int64_t MegatronOptimizer::param_syncs_pending() const {
  int64_t n = fsdp_ ? fsdp_->param_syncs_pending() : 0;
  for (const auto& b : buckets_) n += b->param_syncs_pending();
  return n;
}

void MegatronOptimizer::gather_params() {
  finish_param_sync();
  if (fsdp_) fsdp_->gather_all();
}

void MegatronOptimizer::release_params() {
  if (fsdp_) fsdp_->release_params();
}

int64_t MegatronOptimizer::fsdp_units_without_hooks() const {
  return fsdp_ ? fsdp_->units_without_hooks() : 0;
}

void MegatronOptimizer::unshard() {
  finish_param_sync();
  if (!fsdp_) return;
  fsdp_->gather_all();
  for (auto& p : params_) p.param.mutable_grad() = at::Tensor();
}

int64_t MegatronOptimizer::param_gathers() const {
  return fsdp_ ? fsdp_->gathers() : 0;
}

void MegatronOptimizer::reload_model_params() {
  finish_param_sync();
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
