// Tensor-parallel layers at TP = world size against the same layer at TP = 1 on the same full
// weights: outputs, input gradients and weight gradients. Runs under mpirun -np 1, 2 and 4.
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include "megatron/tensor_parallel/cross_entropy.h"
#include "megatron/tensor_parallel/layers.h"
#include "megatron/tensor_parallel/mappings.h"
#include "megatron/tensor_parallel/random.h"
#include "tensor_parallel/tp_test_util.h"

namespace tp = megatron::tensor_parallel;
using megatron::testing::gather_shards;
using megatron::testing::layout;
using megatron::testing::seeded_randn;
using megatron::testing::world;
using megatron::testing::world_tp_group;

namespace {

constexpr double kTol = 1e-5;

void set_param(at::Tensor& p, const at::Tensor& value) {
  at::NoGradGuard g;
  p.copy_(value);
}

// Runs forward + backward of `f` on a leaf copy of x with output gradient gout; returns
// (output, input grad).
template <typename F>
std::pair<at::Tensor, at::Tensor> fwd_bwd(F f, const at::Tensor& x, const at::Tensor& gout) {
  at::Tensor leaf = x.clone().requires_grad_(x.is_floating_point());
  at::Tensor out = f(leaf);
  out.backward(gout);
  return {out.detach(), leaf.is_floating_point() ? leaf.grad() : at::Tensor()};
}

TEST(Mappings, ForwardAndBackward) {
  auto g = world_tp_group();
  const int n = tp::group_size(g), r = tp::group_rank(g);
  at::Tensor x = seeded_randn({4, 3, 8}, 1) + r;  // differs per rank
  at::Tensor gout = seeded_randn({4, 3, 8}, 2) * (r + 1);

  // copy: identity forward, all-reduce backward.
  auto [y, gx] = fwd_bwd([&](const at::Tensor& t) { return tp::copy_to_tensor_model_parallel_region(t, g); }, x, gout);
  EXPECT_TRUE(at::equal(y, x));
  at::Tensor gsum = seeded_randn({4, 3, 8}, 2) * (n * (n + 1) / 2);
  EXPECT_REL_CLOSE(gx, gsum, kTol);

  // reduce: all-reduce forward, identity backward.
  std::tie(y, gx) =
      fwd_bwd([&](const at::Tensor& t) { return tp::reduce_from_tensor_model_parallel_region(t, g); }, x, gout);
  EXPECT_REL_CLOSE(y, seeded_randn({4, 3, 8}, 1) * n + n * (n - 1) / 2, kTol);
  EXPECT_TRUE(at::equal(gx, gout));

  // scatter / gather along the last dim and the sequence dim are inverses of each other.
  at::Tensor full = seeded_randn({8, 2, 16}, 3);
  at::Tensor full_g = seeded_randn({8, 2, 16}, 4);
  std::tie(y, gx) = fwd_bwd([&](const at::Tensor& t) { return tp::scatter_to_tensor_model_parallel_region(t, g); },
                            full, full_g.chunk(n, -1)[r]);
  EXPECT_TRUE(at::equal(y, full.chunk(n, -1)[r]));
  EXPECT_TRUE(at::equal(gx, at::cat(full_g.chunk(n, -1), -1)));  // gathered slices of each rank

  std::tie(y, gx) = fwd_bwd([&](const at::Tensor& t) { return tp::gather_from_tensor_model_parallel_region(t, g); },
                            full.chunk(n, -1)[r], full_g);
  EXPECT_TRUE(at::equal(y, full));
  EXPECT_TRUE(at::equal(gx, full_g.chunk(n, -1)[r]));

  std::tie(y, gx) = fwd_bwd([&](const at::Tensor& t) { return tp::scatter_to_sequence_parallel_region(t, g); }, full,
                            full_g.chunk(n, 0)[r]);
  EXPECT_TRUE(at::equal(y, full.chunk(n, 0)[r]));
  EXPECT_TRUE(at::equal(gx, full_g));

  // gather along s: backward reduce-scatters the (per-rank different) output grads.
  at::Tensor gout_r = full_g * (r + 1);
  std::tie(y, gx) = fwd_bwd([&](const at::Tensor& t) { return tp::gather_from_sequence_parallel_region(t, g, true); },
                            full.chunk(n, 0)[r], gout_r);
  EXPECT_TRUE(at::equal(y, full));
  EXPECT_REL_CLOSE(gx, (full_g * (n * (n + 1) / 2)).chunk(n, 0)[r], kTol);

  // reduce-scatter along s: backward all-gathers.
  std::tie(y, gx) = fwd_bwd([&](const at::Tensor& t) { return tp::reduce_scatter_to_sequence_parallel_region(t, g); },
                            full * (r + 1), full_g.chunk(n, 0)[r]);
  EXPECT_REL_CLOSE(y, (full * (n * (n + 1) / 2)).chunk(n, 0)[r], kTol);
  EXPECT_TRUE(at::equal(gx, full_g));
}

// Expert parallelism's exchange: rank r sends r + j + 1 rows to rank j, each row naming its
// source, destination and position; the gradient of each received row comes back to its origin.
TEST(Mappings, AllToAllSendsUnevenRunsOfRowsAndTheirGradientsBack) {
  auto g = world_tp_group();
  const int n = tp::group_size(g), r = tp::group_rank(g);
  auto rows = [](int from, int to) {
    const int64_t count = from + to + 1;
    return (at::arange(count, at::kFloat) + 1000 * from + 10 * to).unsqueeze(1).repeat({1, 3});
  };
  std::vector<at::Tensor> sent, expected;
  std::vector<int64_t> input_splits, output_splits;
  for (int j = 0; j < n; ++j) {
    sent.push_back(rows(r, j));
    expected.push_back(rows(j, r));
    input_splits.push_back(r + j + 1);
    output_splits.push_back(j + r + 1);
  }
  const at::Tensor x = at::cat(sent);
  // d/dy of sum(y * y) is 2y: each origin row gets twice its own value back.
  auto [y, gx] = fwd_bwd([&](const at::Tensor& t) { return tp::all_to_all(g, t, output_splits, input_splits); }, x,
                         at::cat(expected) * 2);
  EXPECT_TRUE(at::equal(y, at::cat(expected)));
  EXPECT_TRUE(at::equal(gx, x * 2));
}

TEST(ShardLayout, ShardUnshardRoundTrip) {
  at::Tensor full = at::arange(48, at::kFloat).view({8, 6});
  for (int size : {1, 2, 4}) {
    for (int64_t chunks : {1, 2}) {
      std::vector<at::Tensor> shards;
      for (int r = 0; r < size; ++r) shards.push_back(tp::ShardLayout{0, chunks, r, size}.shard(full));
      EXPECT_TRUE(at::equal(tp::ShardLayout{0, chunks, 0, size}.unshard(shards), full));
    }
  }
  // gated layout: rank 0 of 2 holds rows 0-1 of the gate half and rows 4-5 of the up half.
  at::Tensor s = tp::ShardLayout{0, 2, 0, 2}.shard(full);
  EXPECT_TRUE(at::equal(s, at::cat({full.slice(0, 0, 2), full.slice(0, 4, 6)})));
}

TEST(ShardedInit, FullTensorIndependentOfLayout) {
  tp::ParamInit init{tp::ParamInit::kNormal, 0.02, tp::ShardLayout{0, 1, 0, 1}};
  at::Tensor full = tp::init_full_tensor(init, {8, 4}, 42, "decoder.layers.0.mlp.linear_fc1.weight");
  EXPECT_NEAR(full.std().item<double>(), 0.02, 0.01);
  at::Tensor again = tp::init_full_tensor(init, {8, 4}, 42, "decoder.layers.0.mlp.linear_fc1.weight");
  EXPECT_TRUE(at::equal(full, again));
  at::Tensor other = tp::init_full_tensor(init, {8, 4}, 42, "decoder.layers.1.mlp.linear_fc1.weight");
  EXPECT_FALSE(at::equal(full, other));
  for (int r = 0; r < 2; ++r) {
    at::Tensor shard = at::empty({4, 4});
    tp::ParamInit sharded = init;
    sharded.layout = tp::ShardLayout{0, 1, r, 2};
    tp::init_sharded_param(shard, sharded, 42, "decoder.layers.0.mlp.linear_fc1.weight");
    EXPECT_TRUE(at::equal(shard, full.chunk(2, 0)[r]));
  }
}

// Standalone layers draw the full weight from the default generator and keep their shard, so
// the same seed gives the same full weight at any TP size.
TEST(ShardedInit, StandaloneLayersIndependentOfLayout) {
  auto g = world_tp_group();
  at::manual_seed(5);
  tp::ColumnParallelLinear col_full(tp::ColumnParallelLinearOptions(8, 16).num_chunks(2));
  tp::RowParallelLinear row_full(16, 8);
  tp::VocabParallelEmbedding emb_full(32, 8);
  at::manual_seed(5);
  tp::ColumnParallelLinear col(tp::ColumnParallelLinearOptions(8, 16).num_chunks(2).tp_group(g));
  tp::RowParallelLinear row(tp::RowParallelLinearOptions(16, 8).tp_group(g));
  tp::VocabParallelEmbedding emb(tp::VocabParallelEmbeddingOptions(32, 8).tp_group(g));
  EXPECT_TRUE(at::equal(gather_shards(col->weight, layout(0, 2), g), col_full->weight));
  EXPECT_TRUE(at::equal(gather_shards(row->weight, layout(1), g), row_full->weight));
  EXPECT_TRUE(at::equal(gather_shards(emb->weight, layout(0), g), emb_full->weight));
  EXPECT_NEAR(col_full->weight.std().item<double>(), 0.02, 0.006);
  EXPECT_FALSE(at::equal(col_full->weight.narrow(1, 0, 8), row_full->weight.narrow(0, 0, 8).t()));
}

void check_column(bool gather_output, bool bias, int64_t chunks, bool sequence_parallel) {
  SCOPED_TRACE(testing::Message() << "gather_output=" << gather_output << " bias=" << bias << " chunks=" << chunks
                                  << " sp=" << sequence_parallel);
  auto g = world_tp_group();
  const int n = tp::group_size(g), r = tp::group_rank(g);
  const int64_t in = 12, out = 16, s = 8, b = 2;
  tp::ColumnParallelLinear full(tp::ColumnParallelLinearOptions(in, out).bias(bias).gather_output(true));
  tp::ColumnParallelLinear par(tp::ColumnParallelLinearOptions(in, out)
                                   .bias(bias)
                                   .gather_output(gather_output)
                                   .num_chunks(chunks)
                                   .sequence_parallel(sequence_parallel)
                                   .tp_group(g));
  at::Tensor w = seeded_randn({out, in}, 10), bvec = seeded_randn({out}, 11);
  auto l = layout(0, chunks);
  set_param(full->weight, w);
  set_param(par->weight, l.shard(w));
  if (bias) {
    set_param(full->bias, bvec);
    set_param(par->bias, l.shard(bvec));
  }
  at::Tensor x = seeded_randn({s, b, in}, 12), gout = seeded_randn({s, b, out}, 13);
  auto [y_ref, gx_ref] = fwd_bwd([&](const at::Tensor& t) { return full(t); }, x, gout);

  at::Tensor x_par = sequence_parallel ? x.chunk(n, 0)[r] : x;
  // Without gather_output each rank sees its own columns (in the layout's order).
  at::Tensor gout_par = gather_output ? gout : l.shard(gout.movedim(-1, 0)).movedim(0, -1);
  auto [y, gx] = fwd_bwd([&](const at::Tensor& t) { return par(t); }, x_par, gout_par);
  at::Tensor y_full = gather_output ? y : gather_shards(y.movedim(-1, 0), l, g).movedim(0, -1);
  EXPECT_REL_CLOSE(y_full, y_ref, kTol);
  // With sequence parallelism the input grad is reduce-scattered: this rank's slice of s.
  EXPECT_REL_CLOSE(gx, sequence_parallel ? gx_ref.chunk(n, 0)[r] : gx_ref, kTol);
  EXPECT_REL_CLOSE(gather_shards(par->weight.grad(), l, g), full->weight.grad(), kTol);
  if (bias) EXPECT_REL_CLOSE(gather_shards(par->bias.grad(), l, g), full->bias.grad(), kTol);
}

TEST(ColumnParallelLinear, MatchesSingleRank) {
  for (bool gather : {true, false})
    for (bool bias : {true, false}) check_column(gather, bias, 1, false);
  check_column(false, true, 2, false);  // gated fc1 layout
  check_column(false, true, 1, true);   // sequence parallel
}

void check_row(bool input_is_parallel, bool bias, bool sequence_parallel) {
  SCOPED_TRACE(testing::Message() << "input_is_parallel=" << input_is_parallel << " bias=" << bias
                                  << " sp=" << sequence_parallel);
  auto g = world_tp_group();
  const int n = tp::group_size(g), r = tp::group_rank(g);
  const int64_t in = 16, out = 12, s = 8, b = 2;
  tp::RowParallelLinear full(tp::RowParallelLinearOptions(in, out).bias(bias));
  tp::RowParallelLinear par(tp::RowParallelLinearOptions(in, out)
                                .bias(bias)
                                .input_is_parallel(input_is_parallel)
                                .sequence_parallel(sequence_parallel)
                                .tp_group(g));
  at::Tensor w = seeded_randn({out, in}, 20), bvec = seeded_randn({out}, 21);
  auto l = layout(1);
  set_param(full->weight, w);
  set_param(par->weight, l.shard(w));
  if (bias) {
    set_param(full->bias, bvec);
    set_param(par->bias, bvec);
  }
  at::Tensor x = seeded_randn({s, b, in}, 22), gout = seeded_randn({s, b, out}, 23);
  auto [y_ref, gx_ref] = fwd_bwd([&](const at::Tensor& t) { return full(t); }, x, gout);
  at::Tensor x_par = input_is_parallel ? x.chunk(n, -1)[r] : x;
  at::Tensor gout_par = sequence_parallel ? gout.chunk(n, 0)[r] : gout;
  auto [y, gx] = fwd_bwd([&](const at::Tensor& t) { return par(t); }, x_par, gout_par);
  EXPECT_REL_CLOSE(y, sequence_parallel ? y_ref.chunk(n, 0)[r] : y_ref, kTol);
  EXPECT_REL_CLOSE(gx, input_is_parallel ? gx_ref.chunk(n, -1)[r] : gx_ref, kTol);
  EXPECT_REL_CLOSE(gather_shards(par->weight.grad(), l, g), full->weight.grad(), kTol);
  if (bias) {
    at::Tensor gb = par->bias.grad();
    if (sequence_parallel) {  // each rank saw its slice of s: the full grad is the sum
      gb = gb.clone();
      if (g) g->all_reduce(gb);
    }
    EXPECT_REL_CLOSE(gb, full->bias.grad(), kTol);
  }
}

TEST(RowParallelLinear, MatchesSingleRank) {
  for (bool parallel_in : {true, false})
    for (bool bias : {true, false}) check_row(parallel_in, bias, false);
  check_row(true, true, true);
}

TEST(VocabParallelEmbedding, MatchesSingleRank) {
  auto g = world_tp_group();
  const int64_t vocab = 32, h = 6;
  tp::VocabParallelEmbedding full(vocab, h);
  tp::VocabParallelEmbedding par(tp::VocabParallelEmbeddingOptions(vocab, h).tp_group(g));
  at::Tensor w = seeded_randn({vocab, h}, 30);
  auto l = layout(0);
  set_param(full->weight, w);
  set_param(par->weight, l.shard(w));
  at::Tensor ids = at::arange(40, at::kLong).view({4, 10}).remainder(vocab).flip(1);
  at::Tensor gout = seeded_randn({4, 10, h}, 31);
  at::Tensor y_ref = full(ids);
  y_ref.backward(gout);
  at::Tensor y = par(ids);
  y.backward(gout);
  EXPECT_REL_CLOSE(y, y_ref, kTol);
  EXPECT_REL_CLOSE(gather_shards(par->weight.grad(), l, g), full->weight.grad(), kTol);
}

// Label-smoothed cross entropy written out densely: (1 - a) * nll + a * mean over wrong classes.
at::Tensor dense_cross_entropy(const at::Tensor& logits, const at::Tensor& target, double a) {
  at::Tensor logp = logits.log_softmax(-1);
  at::Tensor nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1);
  if (a == 0.0) return nll;
  const int64_t k = logits.size(-1);
  at::Tensor others = (-logp.sum(-1) - nll) / (k - 1);
  return (1 - a) * nll + a * others;
}

TEST(VocabParallelCrossEntropy, MatchesDenseReference) {
  auto g = world_tp_group();
  const int n = tp::group_size(g), r = tp::group_rank(g);
  const int64_t s = 5, b = 3, vocab = 16;
  at::Tensor logits = seeded_randn({s, b, vocab}, 40) * 10 + 50;  // large offset: stability
  at::Tensor target = at::arange(s * b, at::kLong).mul(7).remainder(vocab).view({s, b});
  at::Tensor gout = seeded_randn({s, b}, 41);
  for (double a : {0.0, 0.1}) {
    SCOPED_TRACE(a);
    auto [loss_ref, g_ref] =
        fwd_bwd([&](const at::Tensor& t) { return dense_cross_entropy(t, target, a); }, logits, gout);
    auto [loss, gl] = fwd_bwd([&](const at::Tensor& t) { return tp::vocab_parallel_cross_entropy(t, target, g, a); },
                              logits.chunk(n, -1)[r], gout);
    EXPECT_REL_CLOSE(loss, loss_ref, kTol);
    EXPECT_REL_CLOSE(gl, g_ref.chunk(n, -1)[r], kTol);
  }
  // Without smoothing it is at::cross_entropy.
  at::Tensor ce = at::cross_entropy_loss(logits.view({-1, vocab}), target.view({-1}), {}, at::Reduction::None);
  EXPECT_REL_CLOSE(tp::vocab_parallel_cross_entropy(logits.chunk(n, -1)[r], target, g).view({-1}), ce, kTol);
}

// At a GPT-sized vocabulary slice the loss and the logit gradient stay within 1e-6 (relative) of
// at::cross_entropy on the full logits; bf16 logits give a bf16 gradient equal to the fp32 one
// on the same (rounded) values up to bf16 rounding.
TEST(VocabParallelCrossEntropy, MatchesAtenCrossEntropyTightlyAndKeepsTheInputDtype) {
  auto g = world_tp_group();
  const int n = tp::group_size(g), r = tp::group_rank(g);
  const int64_t tokens = 6, vocab = 1024;
  at::Tensor logits = seeded_randn({tokens, vocab}, 42) * 4;
  at::Tensor target = at::arange(tokens, at::kLong).mul(171).remainder(vocab);
  at::Tensor gout = seeded_randn({tokens}, 43);
  auto [loss_ref, g_ref] = fwd_bwd(
      [&](const at::Tensor& t) { return at::cross_entropy_loss(t, target, {}, at::Reduction::None); }, logits, gout);
  auto [loss, gl] = fwd_bwd([&](const at::Tensor& t) { return tp::vocab_parallel_cross_entropy(t, target, g); },
                            logits.chunk(n, -1)[r], gout);
  EXPECT_REL_CLOSE(loss, loss_ref, 1e-6);
  EXPECT_REL_CLOSE(gl, g_ref.chunk(n, -1)[r], 1e-6);

  at::Tensor half = logits.to(at::kBFloat16);
  auto [loss_h, gl_h] = fwd_bwd([&](const at::Tensor& t) { return tp::vocab_parallel_cross_entropy(t, target, g); },
                                half.chunk(n, -1)[r], gout);
  auto [loss_f, gl_f] = fwd_bwd([&](const at::Tensor& t) { return tp::vocab_parallel_cross_entropy(t, target, g); },
                                half.to(at::kFloat).chunk(n, -1)[r], gout);
  EXPECT_EQ(loss_h.scalar_type(), at::kFloat);
  EXPECT_EQ(gl_h.scalar_type(), at::kBFloat16);
  EXPECT_REL_CLOSE(loss_h, loss_f, 1e-6);  // computed in fp32 from the same values
  EXPECT_REL_CLOSE(gl_h.to(at::kFloat), gl_f, 1e-2);
}

TEST(RngTracker, ModelParallelStreamDiffersPerRankDefaultDoesNot) {
  auto g = world_tp_group();
  const int n = tp::group_size(g), r = tp::group_rank(g);
  auto tracker = tp::model_parallel_manual_seed(1234, r);
  at::Tensor x = at::ones({64});
  at::Tensor outside = tp::dropout(x, 0.5, true);
  at::Tensor inside;
  tracker->fork([&] { inside = tp::dropout(x, 0.5, true); });
  at::Tensor all_out = tp::all_gather_along_dim(outside.unsqueeze(0), g, 0);
  at::Tensor all_in = tp::all_gather_along_dim(inside.unsqueeze(0), g, 0);
  for (int i = 1; i < n; ++i) {
    EXPECT_TRUE(at::equal(all_out[i], all_out[0])) << "default-stream dropout differs on rank " << i;
    EXPECT_FALSE(at::equal(all_in[i], all_in[0])) << "model-parallel dropout equal on rank " << i;
  }
  // The tracker's stream is the default generator seeded with seed + 2718 + rank.
  auto t2 = tp::model_parallel_manual_seed(1234, r);
  at::Tensor a, b2;
  t2->fork([&] { a = at::rand({8}); });
  at::manual_seed(1234 + 2718 + r);
  b2 = at::rand({8});
  EXPECT_TRUE(at::equal(a, b2));
  EXPECT_THROW(t2->add(tp::kModelParallelRngTrackerName, 7), c10::Error);
}

TEST(Checkpoint, SameGradsAndDropoutMasks) {
  at::Tensor w = seeded_randn({8, 8}, 50).requires_grad_(true);
  at::Tensor x = seeded_randn({4, 8}, 51);
  auto fn = [&w](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{tp::dropout(at::tanh(at::matmul(in[0], w)), 0.3, true)};
  };
  at::manual_seed(7);
  at::Tensor x1 = x.clone().requires_grad_(true);
  fn({x1})[0].sum().backward();
  at::Tensor gw = w.grad().clone(), gx = x1.grad().clone();
  w.mutable_grad().reset();
  at::manual_seed(7);
  at::Tensor x2 = x.clone().requires_grad_(true);
  auto out = tp::checkpoint(fn, {x2}, nullptr, at::kCPU);
  at::rand({3});  // advance the generator between forward and backward
  out[0].sum().backward();
  EXPECT_TRUE(at::equal(w.grad(), gw));
  EXPECT_TRUE(at::equal(x2.grad(), gx));
}

}  // namespace
