// DistributedDataParallel: the buffers, their shards, buckets and FSDP units, and the gradient
// reduction; distributed_data_parallel_hooks.cpp has the parameter gathers and the hooks.
#include "megatron/distributed/distributed_data_parallel.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "megatron/distributed/fsdp.h"
#include "megatron/distributed/grad_buckets.h"

namespace megatron::distributed {

namespace {
constexpr const char* kStrategies[] = {"no_shard", "optim", "optim_grads", "optim_grads_params"};
}  // namespace

ShardingStrategy sharding_strategy_from_string(const std::string& name) {
  for (int i = 0; i < 4; ++i)
    if (name == kStrategies[i]) return static_cast<ShardingStrategy>(i);
  TORCH_CHECK(false, "[distributed_data_parallel] unknown data-parallel sharding strategy '", name,
              "'; expected no_shard, optim, optim_grads or optim_grads_params");
}

const char* to_string(ShardingStrategy strategy) {
  return kStrategies[static_cast<int>(strategy)];
}

DistributedDataParallel::DistributedDataParallel(std::vector<ModelParam> params, DistributedDataParallelConfig config,
                                                 std::shared_ptr<comm::ProcessGroup> data_parallel_group,
                                                 std::shared_ptr<comm::ProcessGroup> tensor_parallel_group,
                                                 std::shared_ptr<comm::ProcessGroup> expert_data_parallel_group,
                                                 std::shared_ptr<comm::ProcessGroup> across_instances_group,
                                                 std::shared_ptr<comm::ProcessGroup> expert_across_instances_group)
    : params_(std::move(params)),
      config_(std::move(config)),
      dp_(std::move(data_parallel_group)),
      tp_(std::move(tensor_parallel_group)),
      edp_(expert_data_parallel_group ? std::move(expert_data_parallel_group) : dp_),
      across_instances_(std::move(across_instances_group)),
      expert_across_instances_(expert_across_instances_group ? std::move(expert_across_instances_group)
                                                             : across_instances_) {
  TORCH_CHECK(!params_.empty(), "[distributed_data_parallel] no parameters to wrap");
  TORCH_CHECK(!across_instances_ || across_instances_->size() == 1 ||
                  (config_.use_distributed_optimizer && !config_.shards_grads()),
              "[distributed_data_parallel] distributed optimizer instances need the distributed optimizer "
              "without ZeRO-2/3");
  TORCH_CHECK(!config_.shards_grads() || config_.use_distributed_optimizer, "[distributed_data_parallel] ",
              to_string(config_.data_parallel_sharding_strategy), " needs the distributed optimizer");
  const c10::Device device = params_.front().param.device();
  for (const auto& p : params_) {
    TORCH_CHECK(at::isFloatingType(p.param.scalar_type()), "[distributed_data_parallel] parameter ", p.name,
                " has dtype ", p.param.scalar_type(), "; expected a floating-point type");
    TORCH_CHECK(p.param.device() == device, "[distributed_data_parallel] parameter ", p.name, " is on ",
                p.param.device(), ", the first on ", device, "; the buffers need one device");
  }
  sharded_ = config_.use_distributed_optimizer && dp_ && dp_->size() > 1;
  const bool sharded_grads = sharded_ && config_.shards_grads();
  const int dp_size = dp_ ? dp_->size() : 1, edp_size = edp_ ? edp_->size() : 1;
  // Megatron-LM's expert_gradient_scaling_factor: an expert's gradient already holds every
  // expert-parallel rank's tokens, so its average over the expert-data-parallel ranks is scaled
  // down to the average over all data-parallel ranks.
  expert_grad_scale_ = static_cast<double>(edp_size) / dp_size;
  const bool sharded_params = sharded_grads && config_.shards_params();
  if (sharded_grads) fsdp_ = std::make_unique<FsdpUnits>(dp_, sharded_params, config_.fsdp_prefetch, tp_);
  // One buffer per parameter dtype for the parameters outside FSDP units (all of them without
  // gradient sharding), the experts' after the others' (Megatron-LM's expert_parallel_buffers),
  // then one per unit, in the order the model runs them.
  std::map<std::pair<bool, at::ScalarType>, std::vector<size_t>> by_dtype;
  std::vector<std::string> unit_names;
  std::map<std::string, std::vector<size_t>> by_unit;
  for (size_t i = 0; i < params_.size(); ++i) {
    // A layer's experts are a unit of their own, sharded and reduced over the expert-data-parallel
    // ranks (its other parameters' unit over the data-parallel ones).
    std::string unit = sharded_grads ? params_[i].fsdp_unit : std::string();
    if (!unit.empty() && params_[i].expert_parallel) unit += kExpertUnitSuffix;
    if (unit.empty()) {
      by_dtype[{params_[i].expert_parallel, params_[i].param.scalar_type()}].push_back(i);
    } else {
      if (!by_unit.count(unit)) unit_names.push_back(unit);
      by_unit[unit].push_back(i);
    }
  }
  for (const auto& [key, indices] : by_dtype) add_buffer(indices, /*fsdp_unit=*/"");
  root_buffers_ = buffers_.size();
  if (sharded_params && root_buffers_ > 0) {
    TORCH_CHECK(root_buffers_ == 1,
                "[distributed_data_parallel] optim_grads_params needs the parameters outside the decoder layers "
                "in one dtype, got ",
                root_buffers_);
    fsdp_unit_index_[""] = fsdp_->add_kept_unit(*buffers_[0], shards_of(0));
    buffers_[0]->release_params();  // gathered as the model's forward begins
  }
  for (const auto& unit : unit_names) add_buffer(by_unit[unit], unit);
}

DistributedDataParallel::~DistributedDataParallel() = default;

// One ParamAndGradBuffer over params_[indices] (of one dtype), a region per parameter group; its
// shards (with the distributed optimizer); its gradient buckets (outside FSDP units), or its unit.
void DistributedDataParallel::add_buffer(const std::vector<size_t>& indices, const std::string& fsdp_unit) {
  std::vector<at::Tensor> tensors;
  std::vector<bool> counted, shared;
  std::vector<ParamAndGradBuffer::Initializer> initialize;
  std::map<int, std::vector<size_t>> by_group;  // parameter group -> positions in `indices`
  for (size_t k = 0; k < indices.size(); ++k) {
    const auto& p = params_[indices[k]];
    TORCH_CHECK(p.param.scalar_type() == params_[indices.front()].param.scalar_type(),
                "[distributed_data_parallel] fsdp unit ", fsdp_unit, " mixes dtypes: ", p.name, " is ",
                p.param.scalar_type());
    initialize.push_back(p.initialize);
    tensors.push_back(p.param);
    counted.push_back(!p.counted_elsewhere_in_grad_norm);
    shared.push_back(p.shared_across_pipeline_stages);
    by_group[p.param_group].push_back(k);
  }
  const size_t b = buffers_.size();
  buffer_params_.push_back(indices);
  // An expert's buffer is reduced and sharded over the expert-data-parallel ranks.
  const auto& group = params_[indices.front()].expert_parallel ? edp_ : dp_;
  buffer_group_.push_back(group);
  expert_buffer_.push_back(params_[indices.front()].expert_parallel);
  std::vector<std::vector<size_t>> regions;
  region_groups_.emplace_back();
  for (const auto& [group, members] : by_group) {
    regions.push_back(members);
    region_groups_.back().push_back(group);
  }
  buffers_.push_back(std::make_unique<ParamAndGradBuffer>(tensors, regions, counted, sharded_ ? group->size() : 1,
                                                          std::nullopt, initialize));
  auto& buffer = *buffers_.back();
  // Buckets all-reduce, or with the distributed optimizer reduce each piece to the rank whose
  // shard holds it; under the backward pass with the overlap, after it without (the same
  // collectives, so the two agree bit for bit). An FSDP unit reduce-scatters itself.
  if (group && group->size() > 1 && fsdp_unit.empty()) {
    std::vector<int64_t> shard_numel;
    if (sharded_)
      for (const auto& region : buffer.regions()) shard_numel.push_back(region.padded / group->size());
    buckets_.push_back(std::make_unique<GradBuckets>(buffer, tensors, config_.bucket_size, shard_numel, shared,
                                                     config_.grad_reduce_in_fp32 ? at::kFloat : at::kBFloat16));
    bucket_buffer_.push_back(b);
    if (config_.overlap_grad_reduce) buckets_.back()->enable_overlap();
  }
  shards_.emplace_back();
  if (sharded_)
    for (size_t r = 0; r < buffer.regions().size(); ++r)
      shards_.back().push_back(std::make_unique<ParamShards>(buffer, r, group, /*own_main=*/config_.shards_params()));
  buffer_fsdp_unit_.push_back(-1);
  // Sharded gradients exist whole only within a step (zero_grad_buffer() or the unit's backward
  // allocates them).
  if (fsdp_) buffer.release_grads();
  if (fsdp_unit.empty()) return;
  // Units of one model chunk share the prefix before decoder.layers.
  const std::string chunk = fsdp_unit.substr(0, fsdp_unit.find("decoder.layers."));
  const auto known = fsdp_chunks_.emplace(chunk, static_cast<int>(fsdp_chunks_.size())).first;
  std::vector<bool> sequence_parallel;
  for (size_t i : indices) sequence_parallel.push_back(params_[i].sequence_parallel);
  const size_t unit = fsdp_->add_unit(buffer, shards_of(b), tensors, known->second, sequence_parallel);
  fsdp_unit_index_[fsdp_unit] = unit;
  buffer_fsdp_unit_.back() = static_cast<int64_t>(unit);
  if (config_.shards_params()) buffer.release_params();  // the shards hold them now
}

std::vector<const ParamShards*> DistributedDataParallel::shards_of(size_t b) const {
  std::vector<const ParamShards*> out;
  for (const auto& s : shards_[b]) out.push_back(s.get());
  return out;
}

const ParamShards* DistributedDataParallel::shards(size_t b, size_t r) const {
  return sharded_ ? shards_[b].at(r).get() : nullptr;
}

at::Tensor DistributedDataParallel::reduced_grads(size_t b, size_t r) const {
  if (buffer_fsdp_unit_[b] >= 0) return fsdp_->grad_shard(static_cast<size_t>(buffer_fsdp_unit_[b]), r);
  if (sharded_) return shards_[b][r]->reduced_grads();
  const auto& region = buffers_[b]->regions()[r];
  return buffers_[b]->grads_of(region).narrow(0, 0, region.numel);
}

void DistributedDataParallel::zero_grad_buffer() {
  for (size_t b = 0; b < root_buffers_; ++b) buffers_[b]->zero_grad();
  if (fsdp_) fsdp_->zero_grad();
  grads_synced_ = false;
}

void DistributedDataParallel::start_grad_sync(int64_t accumulations) {
  TORCH_CHECK(accumulations > 0,
              "[distributed_data_parallel] start_grad_sync needs a positive number of backward passes, got ",
              accumulations);
  for (size_t k = 0; k < buckets_.size(); ++k) buckets_[k]->start(buffer_group_[bucket_buffer_[k]], accumulations);
  if (fsdp_) fsdp_->start(accumulations);
}

void DistributedDataParallel::finish_grad_sync() {
  if (grads_synced_) return;
  // An FSDP unit's gradient is reduced from its buffer as its backward ends; it must accumulate
  // in place.
  for (size_t b = 0; b < root_buffers_; ++b) {
    const auto k = std::find(bucket_buffer_.begin(), bucket_buffer_.end(), b) - bucket_buffer_.begin();
    for (size_t i : buffers_[b]->collect_replaced_grads()) {
      TORCH_CHECK(k == static_cast<std::ptrdiff_t>(buckets_.size()) || !buckets_[k]->launched_with(i),
                  "[distributed_data_parallel] the gradient of ", params_[buffer_params_[b][i]].name,
                  " was replaced after its bucket's all-reduce began (--overlap-grad-reduce); accumulate into "
                  "its .grad in place instead");
    }
  }
  for (size_t k = 0; k < buckets_.size(); ++k) buckets_[k]->finish(buffer_group_[bucket_buffer_[k]]);
  average_across_instances();
  if (expert_grad_scale_ != 1.0) {
    at::NoGradGuard no_grad;
    for (size_t b = 0; b < root_buffers_; ++b)
      if (expert_buffer_[b]) buffers_[b]->grads().mul_(expert_grad_scale_);
  }
  if (fsdp_) {
    fsdp_->finish();
    at::NoGradGuard no_grad;
    for (size_t b = root_buffers_; b < buffers_.size(); ++b)
      if (expert_buffer_[b] && expert_grad_scale_ != 1.0)
        for (size_t r = 0; r < buffers_[b]->regions().size(); ++r)
          fsdp_->grad_shard(static_cast<size_t>(buffer_fsdp_unit_[b]), r).mul_(expert_grad_scale_);
  }
  grads_synced_ = true;
}

// --num-distributed-optimizer-instances: each instance reduced the gradients over its own ranks;
// the ranks at the same place in every instance average the parts they own (and the pieces every
// rank keeps whole), so that each instance steps on the whole data-parallel group's gradient.
void DistributedDataParallel::average_across_instances() {
  std::vector<bool> done(root_buffers_, false);
  auto average = [&](size_t b, std::vector<at::Tensor> parts) {
    done[b] = true;
    const auto& across = expert_buffer_[b] ? expert_across_instances_ : across_instances_;
    if (across && across->size() > 1 && !parts.empty()) across->all_reduce_coalesced(parts, comm::ReduceOp::kAvg);
  };
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const size_t b = bucket_buffer_[k];
    std::vector<at::Tensor> mine;
    for (const auto& bucket : buckets_[k]->buckets())
      for (const auto& p : bucket.pieces)
        if (p.owner < 0 || p.owner == buffer_group_[b]->rank())
          mine.push_back(buffers_[b]->grads().narrow(0, p.offset, p.numel));
    average(b, std::move(mine));
  }
  for (size_t b = 0; b < root_buffers_; ++b)  // an instance of one rank: it holds the whole buffer
    if (!done[b]) average(b, {buffers_[b]->grads()});
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp) {
  if (ddp_.no_sync_depth_++ == 0)
    for (auto& b : ddp_.buckets_) b->set_paused(true);
}

DistributedDataParallel::NoSync::~NoSync() {
  if (--ddp_.no_sync_depth_ == 0)
    for (auto& b : ddp_.buckets_) b->set_paused(false);
}

int64_t DistributedDataParallel::grad_bucket_count() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += static_cast<int64_t>(b->buckets().size());
  return n;
}

int64_t DistributedDataParallel::grad_buckets_launched() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += b->launched();
  return n;
}

BufferMemory DistributedDataParallel::memory(std::set<const void*>& seen) const {
  BufferMemory m;
  auto bytes = [&](const at::Tensor& t) -> int64_t {
    if (!t.defined()) return 0;
    const void* key = t.storage().unsafeGetStorageImpl();
    return seen.insert(key).second ? static_cast<int64_t>(t.storage().nbytes()) : 0;
  };
  for (const auto& b : buffers_) m.params += bytes(b->params());
  for (const auto& b : buffers_) m.grads += bytes(b->grads());
  for (size_t b = 0; b < buffers_.size(); ++b)
    if (buffer_fsdp_unit_[b] >= 0)
      for (size_t r = 0; r < buffers_[b]->regions().size(); ++r)
        m.grads += bytes(fsdp_->grad_shard(static_cast<size_t>(buffer_fsdp_unit_[b]), r));
  return m;
}

}  // namespace megatron::distributed
