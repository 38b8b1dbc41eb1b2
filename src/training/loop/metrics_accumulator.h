// Sums of reported metrics over micro-batches, averaged over them and over data-parallel ranks
// (or over their tokens, with --calculate-per-token-loss).
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
  // `weight` (--calculate-per-token-loss: the micro-batch's token count) makes the averages
  // weighted ones, over the tokens of every micro-batch and data-parallel rank.
  void add(const std::map<std::string, at::Tensor>& metrics, const at::Tensor& weight = {}) {
    const at::Tensor w = weight.defined() ? weight.detach().to(at::kDouble).reshape({}) : at::Tensor();
    if (w.defined()) weights_ = weights_.defined() ? weights_ + w : w;
    for (const auto& [key, value] : metrics) {
      at::Tensor v = value.dim() == 0 ? value : value.reshape({});
      v = (v.requires_grad() ? v.detach() : v).to(at::kDouble);
      if (w.defined()) v = v * w.to(v.device());
      at::Tensor& sum = sums_[key];
      sum = sum.defined() ? sum + v : v;  // metrics of one key come from one device
    }
    ++count_;
  }
  // The averages over micro-batches and data-parallel ranks, in key order, on the metrics' device,
  // followed by `extra` (a scalar, averaged likewise) when given; undefined when nothing was added.
  at::Tensor reduce(comm::ProcessGroup& dp, const at::Tensor& extra = {}) const {
    at::Tensor values = pack(extra);
    if (!values.defined()) return {};
    dp.all_reduce(values, op());
    return averaged(values, extra.defined(), dp.size());
  }
  // reduce() in two halves, so that its all-reduce travels while other work runs: launch() starts
  // it (every data-parallel rank at the same point), finish() waits and gives reduce()'s values.
  struct Launched {
    at::Tensor values;
    comm::WorkHandle work;  // reset once waited for
    bool extra = false;
    int64_t ranks = 1;
  };
  Launched launch(comm::ProcessGroup& dp, const at::Tensor& extra = {}) const {
    Launched l{pack(extra), {}, extra.defined(), dp.size()};
    if (l.values.defined()) l.work = dp.all_reduce_async(l.values, op());
    return l;
  }
  at::Tensor finish(Launched& l) const {
    if (!l.values.defined()) return {};
    l.work->wait();
    l.work.reset();
    return averaged(l.values, l.extra, l.ranks);
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
  // What is summed (weighted: the sums, the total weight and extra) or averaged over ranks.
  at::Tensor pack(const at::Tensor& extra) const {
    if (sums_.empty() || count_ == 0) return {};
    const c10::Device device = sums_.begin()->second.device();
    std::vector<at::Tensor> values;
    for (const auto& [key, sum] : sums_)
      values.push_back((sum.device() == device ? sum : sum.to(device)) / (weights_.defined() ? 1.0 : count_));
    if (weights_.defined()) values.push_back(weights_.to(device));
    if (extra.defined()) values.push_back(extra.to(device, at::kDouble).reshape({}));  // a bool flag
    return at::stack(values);
  }
  comm::ReduceOp op() const { return weights_.defined() ? comm::ReduceOp::kSum : comm::ReduceOp::kAvg; }
  // Weighted: the sums over ranks divided by the total weight, extra by the number of ranks.
  at::Tensor averaged(const at::Tensor& reduced, bool extra, int64_t ranks) const {
    if (!weights_.defined()) return reduced;
    const int64_t n = static_cast<int64_t>(sums_.size());
    std::vector<at::Tensor> parts = {reduced.narrow(0, 0, n) / reduced[n]};
    if (extra) parts.push_back(reduced.narrow(0, n + 1, 1) / static_cast<double>(ranks));
    return at::cat(parts);
  }

  std::map<std::string, at::Tensor> sums_;
  at::Tensor weights_;  // the total weight, when weighted
  int64_t count_ = 0;
};

}  // namespace megatron::training::detail
