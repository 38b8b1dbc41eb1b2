// Domino (a TransformerBlock with config.domino) against its serial reference: the same block
// without Domino run on each half of the micro-batch in turn. Each weight gradient is then a sum
// of the same two terms, so outputs and gradients must be bit-identical, at TP 1, 2 and 4, with the
// inter-layer and the intra-layer schedule. Every TP rank must issue the same collectives in the
// same order, and in backward wait for each input-gradient all-reduce only under the other half's
// compute.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "megatron/tensor_parallel/domino.h"
#include "megatron/transformer/transformer_block.h"
#include "tensor_parallel/tp_test_util.h"

namespace tp = megatron::tensor_parallel;
namespace tf = megatron::transformer;
using megatron::testing::seeded_randn;
using megatron::testing::world_tp_group;

namespace {

constexpr int64_t kSeq = 8, kBatch = 4, kHidden = 32;

tf::TransformerBlock make_block(bool domino, bool intra_layer) {
  auto g = world_tp_group();
  at::manual_seed(5);  // the same weights in every block
  return tf::TransformerBlock(tf::TransformerConfig()
                                  .num_layers(2)
                                  .hidden_size(kHidden)
                                  .num_attention_heads(4)
                                  .hidden_dropout(0)
                                  .attention_dropout(0)
                                  .tensor_model_parallel_size(tp::group_size(g))
                                  .tp_group(g)
                                  .domino(domino)
                                  .domino_intra_layer_overlap(intra_layer),
                              /*pre_process=*/true, /*post_process=*/false);  // Domino rejoins before the final norm
}

struct BlockRun {
  at::Tensor out, input_grad;
  std::vector<at::Tensor> param_grads;
  std::string issued;  // the collectives this rank issued and waited for, in order
  // Backward's operations, by their position in `events` (this rank's issues and waits).
  std::vector<std::string> events;
  size_t backward_from = 0;
};

BlockRun run(bool domino, bool intra_layer) {
  tf::TransformerBlock block = make_block(domino, intra_layer);
  BlockRun r;
  auto g = world_tp_group();
  if (g)
    g->set_issue_observer([&](const std::string& op) {
      r.issued += op + ";";
      r.events.push_back(op);
    });
  at::Tensor x = seeded_randn({kSeq, kBatch, kHidden}, 1).requires_grad_();
  if (domino) {
    r.out = block(x);
  } else {  // the serial reference: one half, then the other
    auto halves = x.chunk(2, 1);
    r.out = at::cat({block(halves[0].contiguous()), block(halves[1].contiguous())}, 1);
  }
  r.backward_from = r.events.size();
  r.out.backward(seeded_randn({kSeq, kBatch, kHidden}, 2));
  if (g) g->set_issue_observer(nullptr);
  r.input_grad = x.grad();
  for (const auto& p : block->parameters()) r.param_grads.push_back(p.grad());
  return r;
}

// Backward's all-reduces, in issue order: where each was issued and where waited for, as
// positions in the event log (the observer numbers operations from 0 in issue order).
std::vector<std::pair<size_t, size_t>> backward_issue_and_wait(const BlockRun& r) {
  std::vector<std::pair<size_t, size_t>> ops;  // indexed by operation number
  for (size_t at = 0; at < r.events.size(); ++at) {
    const std::string& e = r.events[at];
    if (e.rfind("wait ", 0) == 0) {
      const size_t op = std::stoul(e.substr(5));
      if (op < ops.size()) ops[op].second = at;
    } else {
      ops.emplace_back(at, SIZE_MAX);
    }
  }
  std::vector<std::pair<size_t, size_t>> backward;
  for (const auto& op : ops)
    if (op.first >= r.backward_from) backward.push_back(op);
  return backward;
}

TEST(Domino, BitIdenticalToTheHalvesRunOneAfterTheOther) {
  auto g = world_tp_group();
  const BlockRun serial = run(false, false);
  for (bool intra_layer : {false, true}) {
    SCOPED_TRACE(testing::Message() << "tp=" << tp::group_size(g) << " intra_layer=" << intra_layer);
    const BlockRun domino = run(true, intra_layer);
    EXPECT_TRUE(at::equal(domino.out, serial.out)) << "output";
    EXPECT_TRUE(at::equal(domino.input_grad, serial.input_grad)) << "input gradient";
    ASSERT_EQ(domino.param_grads.size(), serial.param_grads.size());
    for (size_t i = 0; i < serial.param_grads.size(); ++i)
      EXPECT_TRUE(at::equal(domino.param_grads[i], serial.param_grads[i])) << "parameter " << i;
    if (!g) continue;
    // Per layer and half: two all-reduces forward, two input-gradient all-reduces backward.
    const auto count = [&](const std::string& s) {
      size_t n = 0;
      for (size_t at = s.find("all_reduce"); at != std::string::npos; at = s.find("all_reduce", at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count(domino.issued), 2u * 2u * 2u * 2u);
    // The same sequence on every rank: its hash's minimum and maximum over the group agree.
    const auto hash = static_cast<int64_t>(std::hash<std::string>{}(domino.issued) >> 1);
    at::Tensor lo = at::full({1}, hash, at::kLong), hi = lo.clone();
    g->all_reduce(lo, megatron::comm::ReduceOp::kMin);
    g->all_reduce(hi, megatron::comm::ReduceOp::kMax);
    EXPECT_EQ(lo.item<int64_t>(), hi.item<int64_t>()) << "rank " << g->rank() << " issued " << domino.issued;
    // Backward: each input-gradient all-reduce is still in flight when the next one (the other
    // half's, or the previous layer's) is issued, so it is waited for only after that half's
    // sub-block has run its backward. Autograd alone (latest node first) would wait for each
    // right after its own weight-gradient GEMM.
    const auto backward = backward_issue_and_wait(domino);
    ASSERT_EQ(backward.size(), 2u * 2u * 2u) << domino.issued;
    for (size_t k = 0; k < backward.size(); ++k) {
      EXPECT_NE(backward[k].second, SIZE_MAX)
          << "rank " << g->rank() << ": backward all-reduce " << k << " never waited for: " << domino.issued;
      if (k + 1 < backward.size())
        EXPECT_GT(backward[k].second, backward[k + 1].first)
            << "rank " << g->rank() << ": backward all-reduce " << k
            << " waited for before the next was issued: " << domino.issued;
    }
  }
}

// A micro-batch that cannot be halved is refused with the flag named.
TEST(Domino, OddMicroBatchIsRefused) {
  tf::TransformerBlock block = make_block(true, false);
  try {
    block(seeded_randn({kSeq, 3, kHidden}, 1));
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("--domino splits each micro-batch in two"),
              std::string::npos)
        << e.what_without_backtrace();
  }
}

}  // namespace
