// ColumnParallelLinear's backward overlaps its input-gradient collective with the weight-gradient
// GEMM (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication). Checked against the
// composition it replaces (the region mappings + at::linear): bit-identical outputs and
// gradients at TP 1, 2 and 4; with sequence parallelism it holds only the input shard.
#include <gtest/gtest.h>

#include "megatron/memory.h"
#include "megatron/tensor_parallel/layers.h"
#include "megatron/tensor_parallel/mappings.h"
#include "tensor_parallel/tp_test_util.h"

namespace tp = megatron::tensor_parallel;
using megatron::testing::layout;
using megatron::testing::seeded_randn;
using megatron::testing::world_tp_group;

namespace {

constexpr int64_t kIn = 24, kOut = 32, kSeq = 8, kBatch = 3;

struct Grads {
  at::Tensor out, input, weight, bias;
};

// input_tolerance: MPI's nonblocking reduce-scatter (libnbc) adds more than two ranks' partial
// sums in another order than the blocking one, so that one sum may differ in its last bits.
void expect_identical(const Grads& got, const Grads& want, double input_tolerance) {
  EXPECT_TRUE(at::equal(got.out, want.out)) << "output";
  if (input_tolerance == 0) {
    EXPECT_TRUE(at::equal(got.input, want.input)) << "input gradient";
  } else {
    EXPECT_REL_CLOSE(got.input, want.input, input_tolerance);
  }
  EXPECT_TRUE(at::equal(got.weight, want.weight)) << "weight gradient";
  ASSERT_EQ(got.bias.defined(), want.bias.defined());
  if (want.bias.defined()) EXPECT_TRUE(at::equal(got.bias, want.bias)) << "bias gradient";
}

TEST(LinearWithAsyncCommunication, BitIdenticalToTheMappingsAndLinear) {
  auto g = world_tp_group();
  const int n = tp::group_size(g), r = tp::group_rank(g);
  for (bool sequence_parallel : {false, true})
    for (bool bias : {true, false}) {
      if (sequence_parallel && n == 1) continue;  // sequence parallelism needs TP > 1
      SCOPED_TRACE(testing::Message() << "tp=" << n << " sp=" << sequence_parallel << " bias=" << bias);
      tp::ColumnParallelLinear layer(
          tp::ColumnParallelLinearOptions(kIn, kOut).bias(bias).sequence_parallel(sequence_parallel).tp_group(g));
      const auto l = layout(0);
      const at::Tensor w = l.shard(seeded_randn({kOut, kIn}, 20)), b = l.shard(seeded_randn({kOut}, 21));
      {
        at::NoGradGuard no_grad;
        layer->weight.copy_(w);
        if (bias) layer->bias.copy_(b);
      }
      at::Tensor x = seeded_randn({kSeq, kBatch, kIn}, 22);
      if (sequence_parallel) x = x.chunk(n, 0)[r].contiguous();
      const at::Tensor gout = seeded_randn({kSeq, kBatch, kOut / n}, 23 + r);

      at::Tensor x1 = x.clone().requires_grad_();
      at::Tensor y1 = layer(x1);
      y1.backward(gout);
      const Grads overlapped{y1.detach(), x1.grad(), layer->weight.grad(), bias ? layer->bias.grad() : at::Tensor()};

      at::Tensor x2 = x.clone().requires_grad_(), w2 = w.clone().requires_grad_();
      at::Tensor b2 = bias ? b.clone().requires_grad_() : at::Tensor();
      at::Tensor total = sequence_parallel ? tp::gather_from_sequence_parallel_region(x2, g, true)
                                           : tp::copy_to_tensor_model_parallel_region(x2, g);
      at::Tensor y2 = at::linear(total, w2, b2);
      y2.backward(gout);
      expect_identical(overlapped, Grads{y2.detach(), x2.grad(), w2.grad(), bias ? b2.grad() : at::Tensor()},
                       sequence_parallel && n > 2 ? 1e-6 : 0.0);
    }
}

TEST(LinearWithAsyncCommunication, SequenceParallelHoldsOnlyTheInputShard) {
  auto g = world_tp_group();
  const int n = tp::group_size(g), r = tp::group_rank(g);
  if (n == 1) GTEST_SKIP() << "sequence parallelism needs TP > 1";
  tp::ColumnParallelLinear layer(tp::ColumnParallelLinearOptions(kIn, kOut).sequence_parallel(true).tp_group(g));
  at::Tensor x = seeded_randn({kSeq, kBatch, kIn}, 40).chunk(n, 0)[r].contiguous().requires_grad_();
  const int64_t full_input_bytes = x.nbytes() * n;

  // Bytes allocated during forward and still held after it: the output, plus what the graph keeps.
  auto held_after_forward = [&](auto forward) {
    megatron::HostMemoryTracker tracker;
    at::Tensor y = forward();
    return std::make_pair(tracker.allocated_bytes(), static_cast<int64_t>(y.nbytes()));
  };
  auto [held, out_bytes] = held_after_forward([&] { return layer(x); });
  auto [held_ref, ref_out_bytes] = held_after_forward(
      [&] { return at::linear(tp::gather_from_sequence_parallel_region(x, g, true), layer->weight, layer->bias); });
  EXPECT_EQ(held, out_bytes) << "the gathered input was kept";
  EXPECT_EQ(held_ref, ref_out_bytes + full_input_bytes) << "the reference keeps the gathered input";
}

}  // namespace
