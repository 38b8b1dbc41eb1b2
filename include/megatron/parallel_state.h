// ParallelState: this rank's place in the TP x CP x DP x PP grid and the process groups that go
// with it, in Megatron-LM's rank order (TP ranks contiguous, then CP, then DP, then PP; or PP
// before DP with --use-tp-pp-dp-mapping, so that a pipeline's stages share a node). MoE
// layers' experts see the same ranks folded another way (Megatron-Core's decoupled expert
// groups): ETP x EP x expert-DP x PP, expert TP ranks contiguous, then EP, then expert DP.
// Built once from the world group and passed to whatever needs it; it holds no global state.
#pragma once

#include "megatron/export.h"

#include <memory>
#include <optional>
#include <vector>

#include "megatron/comm/process_group.h"

namespace megatron {

class MEGATRON_API ParallelState {
 public:
  // Splits world into groups. world size must equal tp * cp * dp * pp for some dp >= 1, and
  // tp * cp * dp be divisible by etp * ep (etp defaults to tp, as in Megatron-Core).
  // hierarchical_context_parallel_sizes (product cp): the context-parallel group's levels for
  // cp_comm_type a2a+p2p, the first of consecutive CP ranks. Collective over world: every rank
  // calls it with the same arguments.
  static ParallelState initialize_model_parallel(std::shared_ptr<comm::ProcessGroup> world,
                                                 int tensor_model_parallel_size = 1,
                                                 int pipeline_model_parallel_size = 1,
                                                 std::optional<int> virtual_pipeline_model_parallel_size = std::nullopt,
                                                 int context_parallel_size = 1, int expert_model_parallel_size = 1,
                                                 std::optional<int> expert_tensor_parallel_size = std::nullopt,
                                                 bool tp_pp_dp_mapping = false,
                                                 const std::vector<int>& hierarchical_context_parallel_sizes = {});

  // The rank lists of every group of each kind, for a world of world_size ranks (pure function;
  // what initialize_model_parallel builds its groups from).
  struct Layout {
    std::vector<std::vector<int>> tensor_model_parallel, pipeline_model_parallel, data_parallel, context_parallel,
        model_parallel, embedding, position_embedding;
    // Data x context parallel: the ranks that hold the same parameters (gradients reduce over it).
    std::vector<std::vector<int>> data_parallel_with_context_parallel;
    // The experts' folding of the same ranks.
    std::vector<std::vector<int>> expert_model_parallel, expert_tensor_parallel, expert_tensor_and_model_parallel,
        expert_data_parallel;
  };
  static Layout rank_layout(int world_size, int tensor_model_parallel_size, int pipeline_model_parallel_size,
                            int context_parallel_size = 1, int expert_model_parallel_size = 1,
                            std::optional<int> expert_tensor_parallel_size = std::nullopt,
                            bool tp_pp_dp_mapping = false);

  // Groups this rank belongs to. The embedding group holds the first and last pipeline stage
  // of this rank's pipeline; ranks on other stages get nullptr, as do ranks outside the
  // position-embedding group (first stage).
  comm::ProcessGroup& get_world_group() const { return *world_; }
  comm::ProcessGroup& get_tensor_model_parallel_group() const { return *tp_; }
  comm::ProcessGroup& get_pipeline_model_parallel_group() const { return *pp_; }
  // with_context_parallel (Megatron's name): the data-parallel ranks of every context-parallel
  // rank, the ranks that hold the same parameters; without: those that read other samples.
  comm::ProcessGroup& get_data_parallel_group(bool with_context_parallel = false) const {
    return *data_parallel_group_ptr(with_context_parallel);
  }
  comm::ProcessGroup& get_context_parallel_group() const { return *cp_; }
  comm::ProcessGroup& get_model_parallel_group() const { return *mp_; }
  std::shared_ptr<comm::ProcessGroup> get_embedding_group() const { return embedding_; }
  std::shared_ptr<comm::ProcessGroup> get_position_embedding_group() const { return position_embedding_; }
  std::shared_ptr<comm::ProcessGroup> tensor_model_parallel_group_ptr() const { return tp_; }
  std::shared_ptr<comm::ProcessGroup> data_parallel_group_ptr(bool with_context_parallel = false) const {
    return with_context_parallel ? dp_cp_ : dp_;
  }
  std::shared_ptr<comm::ProcessGroup> context_parallel_group_ptr() const { return cp_; }
  // One group per level of hierarchical_context_parallel_sizes (empty without), Megatron-Core's
  // get_hierarchical_context_parallel_groups: level 0 consecutive CP ranks, each next level the
  // ranks at the same place in the level below's groups.
  const std::vector<std::shared_ptr<comm::ProcessGroup>>& get_hierarchical_context_parallel_groups() const {
    return hierarchical_cp_;
  }
  std::shared_ptr<comm::ProcessGroup> model_parallel_group_ptr() const { return mp_; }
  std::shared_ptr<comm::ProcessGroup> pipeline_model_parallel_group_ptr() const { return pp_; }
  // Expert groups: EP spreads the experts, expert TP splits each one, expert DP holds replicas of
  // the same experts (its gradients are reduced over it, as dense ones are over DP x CP).
  comm::ProcessGroup& get_expert_model_parallel_group() const { return *ep_; }
  comm::ProcessGroup& get_expert_tensor_parallel_group() const { return *etp_; }
  comm::ProcessGroup& get_expert_tensor_and_model_parallel_group() const { return *etp_ep_; }
  comm::ProcessGroup& get_expert_data_parallel_group() const { return *edp_; }
  std::shared_ptr<comm::ProcessGroup> expert_model_parallel_group_ptr() const { return ep_; }
  std::shared_ptr<comm::ProcessGroup> expert_data_parallel_group_ptr() const { return edp_; }
  std::shared_ptr<comm::ProcessGroup> expert_tensor_parallel_group_ptr() const { return etp_; }
  std::shared_ptr<comm::ProcessGroup> expert_tensor_and_model_parallel_group_ptr() const { return etp_ep_; }

  int get_world_size() const { return world_->size(); }
  int get_rank() const { return world_->rank(); }
  int get_tensor_model_parallel_world_size() const { return tp_->size(); }
  int get_tensor_model_parallel_rank() const { return tp_->rank(); }
  int get_pipeline_model_parallel_world_size() const { return pp_->size(); }
  int get_pipeline_model_parallel_rank() const { return pp_->rank(); }
  int get_data_parallel_world_size(bool with_context_parallel = false) const {
    return get_data_parallel_group(with_context_parallel).size();
  }
  int get_data_parallel_rank(bool with_context_parallel = false) const {
    return get_data_parallel_group(with_context_parallel).rank();
  }
  int get_context_parallel_world_size() const { return cp_->size(); }
  int get_context_parallel_rank() const { return cp_->rank(); }
  int get_expert_model_parallel_world_size() const { return ep_->size(); }
  int get_expert_model_parallel_rank() const { return ep_->rank(); }
  int get_expert_tensor_parallel_world_size() const { return etp_->size(); }
  int get_expert_tensor_parallel_rank() const { return etp_->rank(); }
  int get_expert_data_parallel_world_size() const { return edp_->size(); }
  int get_expert_data_parallel_rank() const { return edp_->rank(); }
  std::optional<int> get_virtual_pipeline_model_parallel_world_size() const { return vpp_size_; }

  // World ranks of the first member of this rank's TP / DP group (Megatron's "src" ranks).
  int get_tensor_model_parallel_src_rank() const { return tp_->global_rank(0); }
  int get_data_parallel_src_rank() const { return dp_->global_rank(0); }
  // World ranks along this rank's pipeline.
  int get_pipeline_model_parallel_first_rank() const { return pp_->global_rank(0); }
  int get_pipeline_model_parallel_last_rank() const { return pp_->global_rank(pp_->size() - 1); }
  int get_pipeline_model_parallel_next_rank() const;  // wraps around, like Megatron-LM
  int get_pipeline_model_parallel_prev_rank() const;

  // Stage tests. With virtual stages, the first stage is also virtual rank 0 and the last stage
  // also virtual rank vpp-1; pass the model chunk's virtual rank to take it into account.
  bool is_pipeline_first_stage(std::optional<int> virtual_rank = std::nullopt) const;
  bool is_pipeline_last_stage(std::optional<int> virtual_rank = std::nullopt) const;
  bool is_rank_in_embedding_group() const { return embedding_ != nullptr; }
  bool is_rank_in_position_embedding_group() const { return position_embedding_ != nullptr; }

 private:
  ParallelState() = default;
  std::shared_ptr<comm::ProcessGroup> world_, tp_, pp_, dp_, cp_, dp_cp_, mp_, embedding_, position_embedding_;
  std::shared_ptr<comm::ProcessGroup> ep_, etp_, etp_ep_, edp_;
  std::vector<std::shared_ptr<comm::ProcessGroup>> hierarchical_cp_;
  std::optional<int> vpp_size_;
};

}  // namespace megatron
