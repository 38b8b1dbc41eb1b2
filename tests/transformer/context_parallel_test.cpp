// Attention over a sequence split across the world (as the context-parallel group) against the
// whole sequence's causal attention on one rank (ATen's scaled_dot_product_attention): outputs
// and the gradients of q, k and v, for each cp_comm_type, with and without grouped key/value
// heads. Runs under mpirun -np 1, 2 and 4 (the ring's blocks: all-visible, half-visible and
// fully-masked ones, which the ring skips, at every rank).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "megatron/training/gpt_callbacks.h"
#include "megatron/transformer/context_parallel.h"
#include "tensor_parallel/tp_test_util.h"

namespace tf = megatron::transformer;
using megatron::testing::seeded_randn;
using megatron::testing::world;

namespace {

// This rank's chunks, a tensor of its own.
at::Tensor mine(const at::Tensor& whole, int64_t dim) {
  return tf::slice_for_context_parallel_rank(whole, dim, world()->size(), world()->rank()).clone();
}

TEST(ContextParallel, EachRankHoldsChunksIAndTwoNMinusOneMinusI) {
  const int n = 4;
  const at::Tensor seq = at::arange(16).view({1, 16});
  const std::vector<std::vector<int64_t>> want = {{0, 1, 14, 15}, {2, 3, 12, 13}, {4, 5, 10, 11}, {6, 7, 8, 9}};
  for (int r = 0; r < n; ++r) {
    at::Tensor got = tf::slice_for_context_parallel_rank(seq, 1, n, r);
    EXPECT_TRUE(at::equal(got, at::tensor(want[r]).view({1, 4}))) << "rank " << r << ": " << got;
  }
  // The batch: every tensor along the sequence, the attention mask along its query rows.
  megatron::datasets::Batch batch{{"tokens", at::arange(32).view({2, 16})},
                                  {"attention_mask", at::ones({2, 1, 16, 16}, at::kBool)}};
  auto cut = megatron::training::get_batch_on_this_cp_rank(batch, n, 1);
  EXPECT_TRUE(at::equal(cut.at("tokens")[1], at::tensor({18, 19, 28, 29})));
  EXPECT_EQ(cut.at("attention_mask").sizes(), (at::IntArrayRef{2, 1, 4, 16}));
  EXPECT_THROW(tf::slice_for_context_parallel_rank(at::zeros({1, 12}), 1, 4, 0), c10::Error);  // 12 % 8
}

TEST(ContextParallel, EachCommTypeGivesTheWholeSequencesAttentionAndGradients) {
  auto group = world();
  const int n = group->size();
  const int64_t b = 2, np = 12, d = 8, s = 2 * n * 3;       // chunks of 3 tokens
  for (const int64_t ng : {np, static_cast<int64_t>(n)}) {  // multi-head, and n key/value heads (GQA)
    at::Tensor q = seeded_randn({b, np, s, d}, 11), k = seeded_randn({b, ng, s, d}, 12);
    at::Tensor v = seeded_randn({b, ng, s, d}, 13), grad = seeded_randn({b, np, s, d}, 14);
    // The reference: the whole sequence on this rank.
    at::Tensor qw = q.clone().requires_grad_(), kw = k.clone().requires_grad_(), vw = v.clone().requires_grad_();
    at::Tensor whole = at::scaled_dot_product_attention(qw, kw.repeat_interleave(np / ng, 1),
                                                        vw.repeat_interleave(np / ng, 1), {}, 0.0, true);
    whole.backward(grad);
    for (auto type : {tf::CPCommType::kP2P, tf::CPCommType::kAllGather, tf::CPCommType::kA2A}) {
      SCOPED_TRACE(std::string(tf::to_string(type)) + ", " + std::to_string(ng) + " key/value heads, rank " +
                   std::to_string(group->rank()) + " of " + std::to_string(n));
      at::Tensor ql = mine(q, 2).requires_grad_(), kl = mine(k, 2).requires_grad_(), vl = mine(v, 2).requires_grad_();
      at::Tensor out = tf::context_parallel_attention(ql, kl, vl, type, group);
      out.backward(mine(grad, 2));
      EXPECT_REL_CLOSE(out, mine(whole.detach(), 2), 1e-5);
      EXPECT_REL_CLOSE(ql.grad(), mine(qw.grad(), 2), 1e-5);
      EXPECT_REL_CLOSE(kl.grad(), mine(kw.grad(), 2), 1e-5);
      EXPECT_REL_CLOSE(vl.grad(), mine(vw.grad(), 2), 1e-5);
    }
  }
}

TEST(ContextParallel, BadShapesAndTypesAreOneLine) {
  EXPECT_THROW(tf::parse_cp_comm_type("ring"), c10::Error);
  if (world()->size() < 2) return;
  // a2a splits the heads over the group: 3 heads over 2 or more ranks do not split.
  const int64_t s = 2 * world()->size();
  try {
    tf::context_parallel_attention(at::zeros({1, 3, s, 4}), at::zeros({1, 3, s, 4}), at::zeros({1, 3, s, 4}),
                                   tf::CPCommType::kA2A, world());
    if (3 % world()->size() != 0) ADD_FAILURE() << "3 heads split over " << world()->size() << " ranks";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("divisible by the context-parallel size"), std::string::npos)
        << e.what_without_backtrace();
  }
}

}  // namespace
