#include "training/loop/replica_check.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <sstream>
#include <string>

#include "megatron/logging.h"
#include "megatron/models/common/language_module.h"
#include "megatron/training/checkpoint_schema.h"
#include "megatron/training/fault_injection.h"
#include "training/loop/rank_lines.h"

namespace megatron::training::detail {
namespace {

// FNV-1a over the parameter's bytes, as stored: a copy that differs in one bit differs here.
// (Megatron-LM hashes with SHA-1; the hashes are only compared within one run, so any stable
// hash of the bytes does, and this one needs no library.)
int64_t replica_hash(const at::Tensor& t) {
  const at::Tensor host = t.detach().to(at::kCPU).contiguous();
  const auto* bytes = static_cast<const unsigned char*>(host.data_ptr());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0, n = host.nbytes(); i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return static_cast<int64_t>(h);
}

struct ReplicaCopies {
  comm::ProcessGroup* group;
  const char* kind;
  std::vector<std::string> names;
  std::vector<int64_t> hashes;
};

// The first parameter whose copies differ, with who holds which; "" when they all agree.
std::string first_difference(const ReplicaCopies& c, int64_t iteration) {
  const int n = c.group->size();
  const auto count = static_cast<int64_t>(c.hashes.size());
  if (n == 1 || count == 0) return "";  // every rank of a group has the same parameters
  log(LogLevel::kDebug, "[training] comparing " + std::to_string(count) + " parameter hashes over " +
                            std::to_string(n) + " " + c.kind + " ranks");
  const auto differs = first_differing_column(*c.group, c.hashes);
  if (!differs) return "";
  std::ostringstream msg;
  msg << "[training] parameter " << c.names[differs->column] << " differs between its " << c.kind
      << " copies at iteration " << iteration << ": rank " << c.group->global_rank(0) << " holds one copy, rank";
  std::vector<int> other;
  for (int r = 1; r < n; ++r)
    if (differs->by_rank[r] != differs->by_rank[0]) other.push_back(c.group->global_rank(r));
  msg << (other.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < other.size(); ++i) msg << (i ? ", " : "") << other[i];
  msg << " another (" << other.size() << " of " << n - 1
      << " others); a silent memory or network fault, or a bug that let the replicas drift apart";
  return msg.str();
}

}  // namespace

void check_param_hashes_across_replicas(const std::vector<std::shared_ptr<torch::nn::Module>>& chunks,
                                        const ParallelState& ps, bool tensor_parallel_copies, int64_t iteration) {
  ReplicaCopies dp{&ps.get_data_parallel_group(/*with_context_parallel=*/true), "data-parallel", {}, {}};
  ReplicaCopies edp{&ps.get_expert_data_parallel_group(), "expert-data-parallel", {}, {}};
  ReplicaCopies tp{&ps.get_tensor_model_parallel_group(), "tensor-parallel", {}, {}};
  const int rank = ps.get_rank();
  // The fault this check exists for, made on one rank: its copy of a replicated parameter (one
  // every group holds a copy of, as a norm's weight) changed in place.
  bool corrupt = fault_requested("replica_check:change_a_parameter", rank);
  for (size_t chunk = 0; chunk < chunks.size(); ++chunk) {
    const auto* lm = dynamic_cast<const models::common::LanguageModule*>(chunks[chunk].get());
    if (!lm) continue;
    for (const auto& p : lm->sharded_parameters()) {
      if (p.buffer) continue;
      const std::string name = model_chunk_prefix(chunk, chunks.size()) + p.name;
      if (corrupt && !p.expert_parallel && !p.init.layout.is_sharded()) {
        std::fprintf(stderr, "[fault injection] rank %d changes its copy of %s\n", rank, name.c_str());
        at::NoGradGuard no_grad;
        p.param.view(-1)[0].add_(1);
        corrupt = false;
      }
      const int64_t h = replica_hash(p.param);
      ReplicaCopies& replicas = p.expert_parallel ? edp : dp;
      replicas.names.push_back(name);
      replicas.hashes.push_back(h);
      if (tensor_parallel_copies && !p.expert_parallel && !p.init.layout.is_sharded()) {
        tp.names.push_back(name);
        tp.hashes.push_back(h);
      }
    }
  }
  // Every rank of a group has the same parameter list (the same stage and layout), so the
  // gathered hashes line up; the groups are checked in one order everywhere.
  std::string found;  // every group compares (a collective each), the first difference is named
  for (const ReplicaCopies* c : {&dp, &edp, &tp}) {
    if (c == &tp && !tensor_parallel_copies) continue;
    std::string differs = first_difference(*c, iteration);
    if (found.empty()) found = std::move(differs);
  }
  // Only the groups that hold the differing copies see it: all ranks stop together, not hang.
  auto any = at::full({1}, found.empty() ? 0.0 : 1.0, at::kDouble);
  ps.get_world_group().all_reduce(any, comm::ReduceOp::kMax);
  TORCH_CHECK(any.item<double>() == 0, found.empty()
                                           ? "[training] parameter copies differ on other ranks at iteration " +
                                                 std::to_string(iteration) + " (their error names them)"
                                           : found);
  log_rank_0(LogLevel::kInfo, ">>> Weight hashes match after " + std::to_string(iteration) + " iterations...");
}

}  // namespace megatron::training::detail
