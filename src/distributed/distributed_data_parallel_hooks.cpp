// DistributedDataParallel's parameter side: the hooks the model calls around its forward (ZeRO-3's
// gathers, --overlap-param-gather's waits), the gather of the updated shards after a step, and
// whole parameters for what reads them outside a forward.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <functional>
#include <utility>
#include <vector>

#include "megatron/distributed/distributed_data_parallel.h"
#include "megatron/distributed/fsdp.h"
#include "megatron/distributed/grad_buckets.h"

namespace megatron::distributed {
namespace {

// --overlap-param-gather: a unit's forward waits for the buckets that hold its parameters, then
// runs its FSDP unit's hooks (ZeRO-2's decoder layers), if it has them.
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

// An MoE layer's two FSDP units (its experts', over the expert-data-parallel ranks, and the
// rest), gathered and released around the layer's forward together.
class UnitPair : public transformer::ParamGather {
 public:
  UnitPair(std::shared_ptr<transformer::ParamGather> first, std::shared_ptr<transformer::ParamGather> second)
      : first_(std::move(first)), second_(std::move(second)) {}
  void before_forward() override {
    first_->before_forward();
    second_->before_forward();
  }
  void after_forward(const at::Tensor& output) override {
    first_->after_forward(output);
    second_->after_forward(output);
  }

 private:
  std::shared_ptr<transformer::ParamGather> first_, second_;
};

}  // namespace

std::shared_ptr<transformer::ParamGather> DistributedDataParallel::param_gather(const std::string& unit_name) const {
  std::shared_ptr<transformer::ParamGather> unit;
  if (fsdp_) {
    if (auto it = fsdp_unit_index_.find(unit_name); it != fsdp_unit_index_.end()) unit = fsdp_->hooks(it->second);
    if (auto it = fsdp_unit_index_.find(unit_name + kExpertUnitSuffix); it != fsdp_unit_index_.end())
      unit = unit ? std::make_shared<UnitPair>(unit, fsdp_->hooks(it->second)) : fsdp_->hooks(it->second);
  }
  if (!config_.overlap_param_gather || !sharded_ || config_.shards_params()) return unit;
  // buckets_[k] cuts buffers_[bucket_buffer_[k]], one of the buffers outside FSDP units.
  std::vector<std::function<void()>> waits;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    std::vector<size_t> mine;
    const auto& in_buffer = buffer_params_[bucket_buffer_[k]];
    for (size_t j = 0; j < in_buffer.size(); ++j)
      if (gather_wait_unit(in_buffer[j]) == unit_name) mine.push_back(j);
    if (!mine.empty()) waits.push_back(buckets_[k]->param_sync_waiter(mine));
  }
  if (waits.empty()) return unit;
  hooked_units_.insert(unit_name);
  return std::make_shared<ParamSyncWait>(std::move(waits), std::move(unit));
}

bool DistributedDataParallel::param_sync_overlapped() const {
  if (!config_.overlap_param_gather || !sharded_ || config_.shards_params() || buckets_.empty()) return false;
  for (size_t k = 0; k < buckets_.size(); ++k)
    for (size_t i : buffer_params_[bucket_buffer_[k]])
      if (!hooked_units_.count(gather_wait_unit(i))) return false;
  return true;
}

int64_t DistributedDataParallel::param_gather_units_overlapped() const {
  return fsdp_ && config_.overlap_param_gather && !config_.shards_params() ? fsdp_->units_gathered_under_forward() : 0;
}

// Without ZeRO-2/3, each shard is written into its part of the parameters and gathered (by bucket
// broadcasts under the next forward when overlapped); under ZeRO-2 only the gradient shards stay,
// and a unit whose module waits for its parameters gets them under the next forward; under ZeRO-3
// the parameters are released too, gathered when next used.
void DistributedDataParallel::start_param_sync() {
  if (!sharded_) return;
  at::NoGradGuard no_grad;
  const bool overlapped = param_sync_overlapped();
  if (fsdp_)
    for (size_t b = 0; b < root_buffers_; ++b) buffers_[b]->release_grads();
  if (fsdp_ && config_.shards_params()) {
    fsdp_->release_params();
    return;
  }
  const bool units_overlapped = fsdp_ && config_.overlap_param_gather;
  for (size_t b = 0; b < buffers_.size(); ++b) {
    const int64_t unit = buffer_fsdp_unit_[b];
    const bool unit_overlapped = units_overlapped && unit >= 0 && fsdp_->hooked(static_cast<size_t>(unit));
    for (const auto& shard : shards_[b]) {
      if ((overlapped && unit < 0) || unit_overlapped)
        shard->write_main_to_params();  // gathered below
      else
        shard->all_gather_params();
    }
  }
  if (overlapped)
    for (size_t k = 0; k < buckets_.size(); ++k) buckets_[k]->start_param_sync(buffer_group_[bucket_buffer_[k]]);
  if (units_overlapped) fsdp_->start_param_sync();
}

void DistributedDataParallel::finish_param_sync() {
  for (auto& b : buckets_) b->finish_param_sync();
  if (fsdp_) fsdp_->finish_param_sync();
}

int64_t DistributedDataParallel::param_syncs_pending() const {
  int64_t n = fsdp_ ? fsdp_->param_syncs_pending() : 0;
  for (const auto& b : buckets_) n += b->param_syncs_pending();
  return n;
}

void DistributedDataParallel::gather_params() {
  finish_param_sync();
  if (fsdp_) fsdp_->gather_all();
}

void DistributedDataParallel::release_params() {
  if (fsdp_) fsdp_->release_params();
}

int64_t DistributedDataParallel::fsdp_units_without_hooks() const {
  return fsdp_ ? fsdp_->units_without_hooks() : 0;
}

void DistributedDataParallel::unshard() {
  finish_param_sync();
  if (!fsdp_) return;
  fsdp_->gather_all();
  for (auto& p : params_) p.param.mutable_grad() = at::Tensor();
}

int64_t DistributedDataParallel::param_gathers() const {
  return fsdp_ ? fsdp_->gathers() : 0;
}

}  // namespace megatron::distributed
