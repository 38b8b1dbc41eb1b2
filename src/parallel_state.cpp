#include "megatron/parallel_state.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>

namespace megatron {
namespace {

// A rank's coordinates in Megatron's order: rank = tp + TP * (cp + CP * (dp + DP * pp)), or with
// dp_last (--use-tp-pp-dp-mapping) rank = tp + TP * (cp + CP * (pp + PP * dp)).
struct Grid {
  int tp, cp, dp, pp;
  bool dp_last = false;
  int rank(int t, int c, int d, int p) const { return t + tp * (c + cp * (dp_last ? p + pp * d : d + dp * p)); }
  void coords(int r, int& t, int& c, int& d, int& p) const {
    t = r % tp;
    c = (r / tp) % cp;
    const int rest = r / (tp * cp);
    d = dp_last ? rest / pp : rest % dp;
    p = dp_last ? rest % pp : rest / dp;
  }
};

// Groups of one kind: for every rank, the ranks that differ from it only in the coordinates
// `vary` says; listed in order of their lowest rank.
template <typename Members>
std::vector<std::vector<int>> groups_of(int world_size, Members members) {
  std::vector<std::vector<int>> groups;
  std::vector<bool> placed(world_size, false);
  for (int r = 0; r < world_size; ++r) {
    if (placed[r]) continue;
    auto group = members(r);
    for (int m : group) placed[m] = true;
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string group_name(const char* kind, const std::vector<int>& ranks) {
  std::ostringstream out;
  out << kind << "[";
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? "," : "") << ranks[i];
  out << "]";
  return out.str();
}

}  // namespace

ParallelState::Layout ParallelState::rank_layout(int world_size, int tp, int pp, int cp, int ep,
                                                 std::optional<int> etp_given, bool tp_pp_dp_mapping) {
  TORCH_CHECK(tp >= 1 && pp >= 1 && cp >= 1, "[parallel_state] tensor_model_parallel_size (", tp,
              "), pipeline_model_parallel_size (", pp, ") and context_parallel_size (", cp, ") must all be at least 1");
  TORCH_CHECK(world_size % (tp * pp * cp) == 0, "[parallel_state] world size (", world_size,
              ") is not divisible by tensor_model_parallel_size (", tp, ") x pipeline_model_parallel_size (", pp,
              ") x context_parallel_size (", cp, ") = ", tp * pp * cp);
  const Grid g{tp, cp, world_size / (tp * pp * cp), pp, tp_pp_dp_mapping};
  const int etp = etp_given.value_or(tp);
  TORCH_CHECK(ep >= 1 && etp >= 1, "[parallel_state] expert_model_parallel_size (", ep,
              ") and expert_tensor_parallel_size (", etp, ") must be at least 1");
  const int stage = world_size / pp;  // ranks of one pipeline stage
  TORCH_CHECK(stage % (etp * ep) == 0, "[parallel_state] the ", stage,
              " ranks of a pipeline stage (tensor x context x data parallel) are not divisible by "
              "expert_tensor_parallel_size (",
              etp, ") x expert_model_parallel_size (", ep, ") = ", etp * ep);
  // Megatron-Core's check: the experts' folding must keep the dense pipeline groups, which with
  // the pipeline before data parallelism needs the same stride below it.
  TORCH_CHECK(!tp_pp_dp_mapping || pp == 1 || etp * ep == tp * cp,
              "[parallel_state] with --use-tp-pp-dp-mapping and pipeline parallelism, expert_tensor_parallel_size (",
              etp, ") x expert_model_parallel_size (", ep, ") must equal tensor_model_parallel_size (", tp,
              ") x context_parallel_size (", cp, ") so that the experts keep the pipeline groups");

  Layout layout;
  auto along = [&](bool vt, bool vc, bool vd, bool vp) {
    return groups_of(world_size, [&](int r) {
      int t, c, d, p;
      g.coords(r, t, c, d, p);
      std::vector<int> members;
      for (int pi = vp ? 0 : p; pi < (vp ? g.pp : p + 1); ++pi)
        for (int di = vd ? 0 : d; di < (vd ? g.dp : d + 1); ++di)
          for (int ci = vc ? 0 : c; ci < (vc ? g.cp : c + 1); ++ci)
            for (int ti = vt ? 0 : t; ti < (vt ? g.tp : t + 1); ++ti) members.push_back(g.rank(ti, ci, di, pi));
      return members;
    });
  };
  layout.tensor_model_parallel = along(true, false, false, false);
  layout.context_parallel = along(false, true, false, false);
  layout.data_parallel = along(false, false, true, false);
  layout.data_parallel_with_context_parallel = along(false, true, true, false);
  layout.pipeline_model_parallel = along(false, false, false, true);
  layout.model_parallel = along(true, false, false, true);
  // Experts: rank = etp + ETP * (ep + EP * (edp + EDP * pp)) (or, dp last, ETP * (ep + EP * (pp +
  // PP * edp))), the same ranks, pipeline stages unchanged (Megatron-Core's expert RankGenerator,
  // order tp-ep-dp-pp or tp-ep-pp-dp).
  const int edp = stage / (etp * ep);
  const Grid experts{etp, ep, edp, pp, tp_pp_dp_mapping};  // the expert grid: ep in cp's place
  auto expert_along = [&](bool vt, bool ve, bool vd) {
    return groups_of(world_size, [&](int r) {
      int e_t, e_e, e_d, p;
      experts.coords(r, e_t, e_e, e_d, p);
      std::vector<int> members;
      for (int di = vd ? 0 : e_d; di < (vd ? edp : e_d + 1); ++di)
        for (int ei = ve ? 0 : e_e; ei < (ve ? ep : e_e + 1); ++ei)
          for (int ti = vt ? 0 : e_t; ti < (vt ? etp : e_t + 1); ++ti) members.push_back(experts.rank(ti, ei, di, p));
      return members;
    });
  };
  layout.expert_tensor_parallel = expert_along(true, false, false);
  layout.expert_model_parallel = expert_along(false, true, false);
  layout.expert_tensor_and_model_parallel = expert_along(true, true, false);
  layout.expert_data_parallel = expert_along(false, false, true);
  for (const auto& ranks : layout.pipeline_model_parallel) {
    // Tied embeddings live on the first and last stage; positions only on the first.
    layout.embedding.push_back(ranks.size() > 1 ? std::vector<int>{ranks.front(), ranks.back()} : ranks);
    layout.position_embedding.push_back({ranks.front()});
  }
  return layout;
}

ParallelState ParallelState::initialize_model_parallel(std::shared_ptr<comm::ProcessGroup> world, int tp, int pp,
                                                       std::optional<int> vpp, int cp, int ep, std::optional<int> etp,
                                                       bool tp_pp_dp_mapping,
                                                       const std::vector<int>& hierarchical_context_parallel_sizes) {
  TORCH_CHECK(world, "[parallel_state] initialize_model_parallel needs the world group");
  TORCH_CHECK(!vpp || *vpp >= 1, "[parallel_state] virtual_pipeline_model_parallel_size (", *vpp,
              ") must be at least 1");
  TORCH_CHECK(!vpp || *vpp == 1 || pp > 1, "[parallel_state] virtual_pipeline_model_parallel_size (", *vpp,
              ") needs pipeline_model_parallel_size > 1, got ", pp);
  Layout layout = rank_layout(world->size(), tp, pp, cp, ep, etp, tp_pp_dp_mapping);

  ParallelState state;
  state.world_ = world;
  state.vpp_size_ = vpp;
  // Every rank walks every group (new_group involves only the members), so group creation
  // happens in one order everywhere.
  auto mine = [&](const std::vector<std::vector<int>>& groups, const char* kind) {
    std::shared_ptr<comm::ProcessGroup> found;
    for (const auto& ranks : groups) {
      auto group = world->new_group(ranks, group_name(kind, ranks));
      if (group) found = group;
    }
    return found;
  };
  state.tp_ = mine(layout.tensor_model_parallel, "tp");
  state.cp_ = mine(layout.context_parallel, "cp");
  state.dp_ = mine(layout.data_parallel, "dp");
  // Without context parallelism the same ranks: the group is shared, not made twice.
  state.dp_cp_ = cp == 1 ? state.dp_ : mine(layout.data_parallel_with_context_parallel, "dp_cp");
  state.pp_ = mine(layout.pipeline_model_parallel, "pp");
  state.mp_ = mine(layout.model_parallel, "mp");
  state.embedding_ = mine(layout.embedding, "embedding");
  state.position_embedding_ = mine(layout.position_embedding, "position_embedding");
  state.ep_ = mine(layout.expert_model_parallel, "ep");
  state.etp_ = mine(layout.expert_tensor_parallel, "etp");
  state.etp_ep_ = mine(layout.expert_tensor_and_model_parallel, "etp_ep");
  state.edp_ = mine(layout.expert_data_parallel, "edp");
  TORCH_INTERNAL_ASSERT(state.tp_ && state.cp_ && state.dp_ && state.dp_cp_ && state.pp_ && state.mp_ && state.ep_ &&
                        state.etp_ && state.etp_ep_ && state.edp_);
  const auto& sizes = hierarchical_context_parallel_sizes;
  int product = 1;
  for (int s : sizes) product *= s;
  TORCH_CHECK(sizes.empty() || product == cp, "[parallel_state] hierarchical_context_parallel_sizes multiply to ",
              product, ", not the context-parallel size ", cp);
  // Level l cuts the CP ranks (lower * s * upper) into groups of s ranks lower apart, as
  // Megatron-Core's create_hierarchical_groups; every CP rank walks every group of the level.
  int lower = 1;
  for (int s : sizes) {
    std::shared_ptr<comm::ProcessGroup> found;
    for (int first = 0; first < cp; ++first) {
      if ((first / lower) % s != 0) continue;  // not the first rank of a group
      std::vector<int> ranks;
      for (int j = 0; j < s; ++j) ranks.push_back(first + j * lower);
      if (auto g =
              state.cp_->new_group(ranks, "hierarchical cp level " + std::to_string(state.hierarchical_cp_.size())))
        found = g;
    }
    state.hierarchical_cp_.push_back(found);
    lower *= s;
  }
  return state;
}

int ParallelState::get_pipeline_model_parallel_next_rank() const {
  return pp_->global_rank((pp_->rank() + 1) % pp_->size());
}

int ParallelState::get_pipeline_model_parallel_prev_rank() const {
  return pp_->global_rank((pp_->rank() - 1 + pp_->size()) % pp_->size());
}

bool ParallelState::is_pipeline_first_stage(std::optional<int> virtual_rank) const {
  if (virtual_rank && vpp_size_ && *virtual_rank != 0) return false;
  return pp_->rank() == 0;
}

bool ParallelState::is_pipeline_last_stage(std::optional<int> virtual_rank) const {
  if (virtual_rank && vpp_size_ && *virtual_rank != *vpp_size_ - 1) return false;
  return pp_->rank() == pp_->size() - 1;
}

}  // namespace megatron
