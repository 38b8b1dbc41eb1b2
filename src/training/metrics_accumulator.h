// Sums of reported metrics over micro-batches, averaged over them and over data-parallel ranks.
// The sums stay on the metrics' device; the train loop reads them back with the optimizer's
// results, once per iteration.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/readback.h"

namespace megatron::training::detail {

class MetricsAccumulator {
 public:
  void add(const std::map<std::string, at::Tensor>& metrics) {
    for (const auto& [key, value] : metrics) {
      at::Tensor v = value.dim() == 0 ? value : value.reshape({});
      v = (v.requires_grad() ? v.detach() : v).to(at::kDouble);
      at::Tensor& sum = sums_[key];
      sum = sum.defined() ? sum + v : v;  // metrics of one key come from one device
    }
    ++count_;
  }
  // The averages over micro-batches and data-parallel ranks, in key order, on the metrics' device,
  // followed by `extra` (a scalar, averaged likewise) when given; undefined when nothing was added.
  at::Tensor reduce(comm::ProcessGroup& dp, const at::Tensor& extra = {}) const {
    if (sums_.empty() || count_ == 0) return {};
    const c10::Device device = sums_.begin()->second.device();
    std::vector<at::Tensor> values;
    for (const auto& [key, sum] : sums_)
      values.push_back((sum.device() == device ? sum : sum.to(device)) / static_cast<double>(count_));
    if (extra.defined()) values.push_back(extra.to(device, at::kDouble).reshape({}));  // a bool flag
    at::Tensor out = at::stack(values);
    dp.all_reduce(out, comm::ReduceOp::kAvg);
    return out;
  }
  // reduce()'s values, read back, by key.
  std::map<std::string, double> unpack(const at::Tensor& host_values) const {
    std::map<std::string, double> out;
    const double* v = host_values.data_ptr<double>();
    int64_t i = 0;
    for (const auto& [key, sum] : sums_) out[key] = v[i++];
    return out;
  }
  std::map<std::string, double> average(comm::ProcessGroup& dp) const {
    at::Tensor values = reduce(dp);
    return values.defined() ? unpack(read_to_host(values).contiguous()) : std::map<std::string, double>{};
  }

 private:
  std::map<std::string, at::Tensor> sums_;
  int64_t count_ = 0;
};

}  // namespace megatron::training::detail
