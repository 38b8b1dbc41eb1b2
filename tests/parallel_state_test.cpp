// ParallelState: the rank layout against Megatron-LM's documented grouping, and the real groups
// built under mpirun (membership, accessors, and a collective inside each group).
#include "megatron/parallel_state.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "distributed_test.h"
#include "error_of.h"

namespace megatron {
namespace {

using Groups = std::vector<std::vector<int>>;
using testing::error_of;

// Megatron-LM's docstring example: 16 GPUs, TP=2, PP=4 (so DP=2).
TEST(RankLayout, MatchesMegatronDocumentedSixteenGpuExample) {
  auto l = ParallelState::rank_layout(16, 2, 4);
  EXPECT_EQ(l.tensor_model_parallel, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(l.pipeline_model_parallel, (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(l.data_parallel, (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(l.embedding, (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  EXPECT_EQ(l.position_embedding, (Groups{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(l.model_parallel, (Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}}));
}

TEST(RankLayout, EightRankLayouts) {
  auto a = ParallelState::rank_layout(8, 2, 1);
  EXPECT_EQ(a.tensor_model_parallel, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(a.data_parallel, (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(a.pipeline_model_parallel, (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));

  auto b = ParallelState::rank_layout(8, 1, 4);
  EXPECT_EQ(b.data_parallel, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(b.pipeline_model_parallel, (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(b.embedding, (Groups{{0, 6}, {1, 7}}));
  EXPECT_EQ(b.model_parallel, (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));

  auto c = ParallelState::rank_layout(8, 2, 2);
  EXPECT_EQ(c.tensor_model_parallel, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(c.data_parallel, (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(c.pipeline_model_parallel, (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(c.model_parallel, (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));

  auto d = ParallelState::rank_layout(8, 4, 2);
  EXPECT_EQ(d.tensor_model_parallel, (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(d.data_parallel, (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(d.pipeline_model_parallel, (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(d.model_parallel, (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

TEST(RankLayout, ContextParallelSitsBetweenTensorAndData) {
  auto l = ParallelState::rank_layout(8, 2, 1, 2);
  EXPECT_EQ(l.context_parallel, (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(l.data_parallel, (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

// --use-tp-pp-dp-mapping: a pipeline's stages on adjacent ranks, data parallelism outermost.
TEST(RankLayout, TpPpDpMappingPutsThePipelineBeforeData) {
  auto l = ParallelState::rank_layout(8, 2, 2, 1, 1, std::nullopt, /*tp_pp_dp_mapping=*/true);
  EXPECT_EQ(l.tensor_model_parallel, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(l.pipeline_model_parallel, (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(l.data_parallel, (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(l.expert_data_parallel, l.data_parallel);
  auto msg = error_of([] { ParallelState::rank_layout(16, 2, 2, 1, 4, 1, true); });
  EXPECT_NE(
      msg.find("with --use-tp-pp-dp-mapping and pipeline parallelism, expert_tensor_parallel_size (1) x "
               "expert_model_parallel_size (4) must equal tensor_model_parallel_size (2) x context_parallel_size (1)"),
      std::string::npos)
      << msg;
}

TEST(RankLayout, BadLayoutsAreClearErrors) {
  auto msg = error_of([] { ParallelState::rank_layout(8, 3, 1); });
  EXPECT_NE(msg.find("world size (8) is not divisible by tensor_model_parallel_size (3) x "
                     "pipeline_model_parallel_size (1) x context_parallel_size (1) = 3"),
            std::string::npos)
      << msg;
  msg = error_of([] { ParallelState::rank_layout(8, 0, 1); });
  EXPECT_NE(msg.find("must all be at least 1"), std::string::npos) << msg;
  msg = error_of([] { ParallelState::initialize_model_parallel(testing::world(), 1, 1, /*vpp=*/2); });
  EXPECT_NE(msg.find("needs pipeline_model_parallel_size > 1"), std::string::npos) << msg;
}

// Sum of the world ranks in a group, computed through the group itself.
int64_t sum_over(comm::ProcessGroup& group, int world_rank) {
  auto t = at::full({1}, world_rank, at::kLong);
  group.all_reduce(t);
  return t.item<int64_t>();
}

int64_t sum_of(const std::vector<int>& ranks) {
  int64_t s = 0;
  for (int r : ranks) s += r;
  return s;
}

const std::vector<int>& group_of(const Groups& groups, int rank) {
  for (const auto& g : groups)
    if (std::find(g.begin(), g.end(), rank) != g.end()) return g;
  throw std::runtime_error("rank in no group");
}

TEST(ParallelState, EveryValidLayoutOfThisWorld) {
  auto world = testing::world();
  const int n = world->size(), me = world->rank();
  for (int tp : {1, 2, 4, 8}) {
    for (int pp : {1, 2, 4, 8}) {
      if (n % (tp * pp) != 0) continue;
      SCOPED_TRACE("tp " + std::to_string(tp) + " pp " + std::to_string(pp));
      auto ps = ParallelState::initialize_model_parallel(world, tp, pp);
      auto layout = ParallelState::rank_layout(n, tp, pp);
      const auto& tp_ranks = group_of(layout.tensor_model_parallel, me);
      const auto& pp_ranks = group_of(layout.pipeline_model_parallel, me);
      const auto& dp_ranks = group_of(layout.data_parallel, me);
      EXPECT_EQ(ps.get_tensor_model_parallel_group().global_ranks(), tp_ranks);
      EXPECT_EQ(ps.get_pipeline_model_parallel_group().global_ranks(), pp_ranks);
      EXPECT_EQ(ps.get_data_parallel_group().global_ranks(), dp_ranks);
      EXPECT_EQ(ps.get_model_parallel_group().global_ranks(), group_of(layout.model_parallel, me));

      // Megatron's arithmetic for rank order TP-CP-DP-PP.
      EXPECT_EQ(ps.get_tensor_model_parallel_world_size(), tp);
      EXPECT_EQ(ps.get_tensor_model_parallel_rank(), me % tp);
      EXPECT_EQ(ps.get_pipeline_model_parallel_world_size(), pp);
      EXPECT_EQ(ps.get_pipeline_model_parallel_rank(), me / (n / pp));
      EXPECT_EQ(ps.get_data_parallel_world_size(), n / (tp * pp));
      EXPECT_EQ(ps.get_data_parallel_rank(), (me / tp) % (n / (tp * pp)));
      EXPECT_EQ(ps.get_tensor_model_parallel_src_rank(), me - me % tp);
      EXPECT_EQ(ps.get_pipeline_model_parallel_first_rank(), me % (n / pp));
      EXPECT_EQ(ps.get_pipeline_model_parallel_last_rank(), me % (n / pp) + (pp - 1) * (n / pp));
      EXPECT_EQ(ps.get_pipeline_model_parallel_next_rank(), (me + n / pp) % n);
      EXPECT_EQ(ps.get_pipeline_model_parallel_prev_rank(), (me - n / pp + n) % n);
      EXPECT_EQ(ps.is_pipeline_first_stage(), me < n / pp);
      EXPECT_EQ(ps.is_pipeline_last_stage(), me >= n - n / pp);
      const bool in_embedding = pp == 1 || ps.is_pipeline_first_stage() || ps.is_pipeline_last_stage();
      EXPECT_EQ(ps.is_rank_in_embedding_group(), in_embedding);
      EXPECT_EQ(ps.is_rank_in_position_embedding_group(), ps.is_pipeline_first_stage());

      // The communicators are the groups they claim to be.
      EXPECT_EQ(sum_over(ps.get_tensor_model_parallel_group(), me), sum_of(tp_ranks));
      EXPECT_EQ(sum_over(ps.get_pipeline_model_parallel_group(), me), sum_of(pp_ranks));
      EXPECT_EQ(sum_over(ps.get_data_parallel_group(), me), sum_of(dp_ranks));
      if (auto emb = ps.get_embedding_group()) {
        EXPECT_EQ(sum_over(*emb, me), sum_of(group_of(layout.embedding, me)));
      }
    }
  }
}

TEST(ParallelState, ExpertGroupsFoldTheSameRanks) {
  auto world = testing::world();
  const int n = world->size(), me = world->rank();
  for (int tp : {1, 2}) {
    for (int ep : {1, 2, 4, 8}) {
      for (int etp : {1, tp}) {
        if (n % tp != 0 || n % (ep * etp) != 0) continue;
        SCOPED_TRACE("tp " + std::to_string(tp) + " ep " + std::to_string(ep) + " etp " + std::to_string(etp));
        auto ps = ParallelState::initialize_model_parallel(world, tp, 1, std::nullopt, 1, ep, etp);
        auto layout = ParallelState::rank_layout(n, tp, 1, 1, ep, etp);
        const auto& ep_ranks = group_of(layout.expert_model_parallel, me);
        const auto& edp_ranks = group_of(layout.expert_data_parallel, me);
        EXPECT_EQ(ps.get_expert_model_parallel_group().global_ranks(), ep_ranks);
        EXPECT_EQ(ps.get_expert_tensor_parallel_group().global_ranks(), group_of(layout.expert_tensor_parallel, me));
        EXPECT_EQ(ps.get_expert_data_parallel_group().global_ranks(), edp_ranks);
        // Megatron-Core's arithmetic: rank = etp + ETP * (ep + EP * edp) within a stage.
        EXPECT_EQ(ps.get_expert_tensor_parallel_rank(), me % etp);
        EXPECT_EQ(ps.get_expert_model_parallel_rank(), (me / etp) % ep);
        EXPECT_EQ(ps.get_expert_data_parallel_world_size(), n / (etp * ep));
        EXPECT_EQ(ps.get_expert_data_parallel_rank(), me / (etp * ep));
        EXPECT_EQ(sum_over(ps.get_expert_model_parallel_group(), me), sum_of(ep_ranks));
        EXPECT_EQ(sum_over(ps.get_expert_data_parallel_group(), me), sum_of(edp_ranks));
      }
    }
  }
  auto msg = error_of([] { ParallelState::rank_layout(8, 2, 2, 1, 4, 2); });
  EXPECT_NE(msg.find("the 4 ranks of a pipeline stage (tensor x context x data parallel) are not divisible by "
                     "expert_tensor_parallel_size (2) x expert_model_parallel_size (4) = 8"),
            std::string::npos)
      << msg;
}

TEST(ParallelState, VirtualStagesNarrowFirstAndLast) {
  auto world = testing::world();
  if (world->size() < 2) GTEST_SKIP() << "needs 2 ranks for 2 pipeline stages";
  auto ps = ParallelState::initialize_model_parallel(world, 1, 2, /*vpp=*/3);
  EXPECT_EQ(ps.get_virtual_pipeline_model_parallel_world_size(), 3);
  bool first = ps.get_pipeline_model_parallel_rank() == 0;
  EXPECT_EQ(ps.is_pipeline_first_stage(0), first);
  EXPECT_FALSE(ps.is_pipeline_first_stage(1));
  EXPECT_EQ(ps.is_pipeline_last_stage(2), !first);
  EXPECT_FALSE(ps.is_pipeline_last_stage(1));
}

}  // namespace
}  // namespace megatron
