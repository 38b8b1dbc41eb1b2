// Sums of reported metrics over micro-batches, averaged over them and over data-parallel ranks.
// The sums stay on the metrics' device and cross to the host once per iteration, not once per
// micro-batch.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"

namespace megatron::training::detail {

class MetricsAccumulator {
 public:
  void add(const std::map<std::string, at::Tensor>& metrics) {
    for (const auto& [key, value] : metrics) {
      at::Tensor v = value.detach().to(at::kDouble).reshape({});
      at::Tensor& sum = sums_[key];
      sum = sum.defined() ? sum + v.to(sum.device()) : v;
    }
    ++count_;
  }
  std::map<std::string, double> average(comm::ProcessGroup& dp) {
    std::map<std::string, double> out;
    if (sums_.empty() || count_ == 0) return out;
    std::vector<at::Tensor> sums;
    const c10::Device device = sums_.begin()->second.device();
    for (const auto& [key, sum] : sums_) sums.push_back(sum.to(device));
    at::Tensor values = (at::stack(sums) / static_cast<double>(count_)).to(at::kCPU);
    dp.all_reduce(values, comm::ReduceOp::kAvg);
    const double* v = values.data_ptr<double>();
    int64_t i = 0;
    for (const auto& [key, sum] : sums_) out[key] = v[i++];
    return out;
  }

 private:
  std::map<std::string, at::Tensor> sums_;
  int64_t count_ = 0;
};

}  // namespace megatron::training::detail
