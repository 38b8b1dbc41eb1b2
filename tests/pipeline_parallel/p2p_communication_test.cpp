// Pipeline p2p under mpirun, with every rank one stage: activations travel forward and
// gradients backward through every stage, the steady-state exchanges (send one way, receive the
// other at once) do not deadlock, and a tensor of another shape is refused.
#include "megatron/pipeline_parallel/p2p_communication.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "distributed_test.h"
#include "error_of.h"

namespace megatron::pipeline_parallel {
namespace {

const std::vector<int64_t> kShape = {4, 2, 3};  // [s, b, h]

ParallelState pipeline_of_world() {
  return ParallelState::initialize_model_parallel(testing::world(), 1, testing::world()->size());
}

TEST(P2PCommunication, ForwardThenBackwardThroughEveryStage) {
  auto ps = pipeline_of_world();
  P2PCommunicator p2p(ps, {kShape});
  const int stage = ps.get_pipeline_model_parallel_rank(), stages = ps.get_pipeline_model_parallel_world_size();

  // Forward: each stage adds (stage + 1); the last holds 1 + 2 + ... + stages.
  at::Tensor input = p2p.recv_forward();
  EXPECT_EQ(input.defined(), stage > 0);
  at::Tensor output = (input.defined() ? input : at::zeros(kShape)) + (stage + 1);
  p2p.send_forward(output);
  if (stage == stages - 1) EXPECT_TRUE(at::equal(output, at::full(kShape, stages * (stages + 1) / 2.0f)));

  // Backward: each stage multiplies the incoming gradient by 2; the first holds 2^(stages - 1).
  at::Tensor grad = p2p.recv_backward();
  EXPECT_EQ(grad.defined(), stage < stages - 1);
  at::Tensor input_grad = (grad.defined() ? grad * 2 : at::ones(kShape));
  p2p.send_backward(input_grad);
  if (stage == 0) EXPECT_TRUE(at::equal(input_grad, at::full(kShape, std::pow(2.0f, stages - 1))));
}

TEST(P2PCommunication, SteadyStateExchangesDoNotDeadlock) {
  auto ps = pipeline_of_world();
  P2PCommunicator p2p(ps, {kShape});
  const int stage = ps.get_pipeline_model_parallel_rank();
  // Warm-up: one activation travels down the pipe. Then three 1F1B-style rounds: each stage sends
  // its activation forward while receiving a gradient from the next stage, and sends a gradient
  // back while receiving the previous stage's activation, each pair in one batch.
  at::Tensor out = at::full(kShape, 10.0f * stage);
  at::Tensor first = p2p.recv_forward();
  if (stage > 0) EXPECT_TRUE(at::equal(first, at::full(kShape, 10.0f * (stage - 1))));
  p2p.send_forward(out);
  for (int round = 0; round < 3; ++round) {
    if (!p2p.is_last_stage()) {
      at::Tensor grad = p2p.send_forward_recv_backward(out);
      // The next stage sends back (its stage number + round) as the gradient.
      EXPECT_TRUE(at::equal(grad, at::full(kShape, static_cast<float>(stage + 1 + round))));
    }
    if (!p2p.is_first_stage()) {
      at::Tensor next_in = p2p.send_backward_recv_forward(at::full(kShape, static_cast<float>(stage + round)));
      EXPECT_TRUE(at::equal(next_in, at::full(kShape, 10.0f * (stage - 1))));
    }
  }
}

TEST(P2PCommunication, OtherShapesAreRefused) {
  auto ps = pipeline_of_world();
  P2PCommunicator p2p(ps, {kShape});
  if (p2p.is_last_stage()) return;  // sends from the last stage are no-ops
  auto msg = testing::error_of([&] { p2p.send_forward(at::zeros({5, 2, 3})); });
  EXPECT_NE(msg.find("expected shape [4, 2, 3] ([s, b, h] from the configuration), got [5, 2, 3]"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace megatron::pipeline_parallel
