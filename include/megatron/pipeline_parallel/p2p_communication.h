// Point-to-point between adjacent pipeline stages (Megatron-LM's p2p_communication): activations
// go forward to the next stage, their gradients come back from it. Every exchange is one batched
// isend/irecv, so a stage can send and receive at once (1F1B's steady state) without deadlock.
// Tensor shapes are fixed by the configuration ([s, b, h]); any other shape is refused.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

#include "megatron/parallel_state.h"

namespace megatron::pipeline_parallel {

struct MEGATRON_API P2PConfig {
  std::vector<int64_t> tensor_shape;  // [seq_length (/ TP with sequence parallelism), micro_batch, hidden]
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::Device(at::kCPU);
};

class MEGATRON_API P2PCommunicator {
 public:
  P2PCommunicator(const ParallelState& parallel_state, P2PConfig config);

  // Undefined tensors on the stage that has no such neighbour (first stage: nothing comes
  // forward; last stage: no gradient comes back); sends there are no-ops.
  at::Tensor recv_forward();
  void send_forward(const at::Tensor& output_tensor);
  at::Tensor recv_backward();
  void send_backward(const at::Tensor& input_tensor_grad);
  // Both directions in one batch.
  at::Tensor send_forward_recv_backward(const at::Tensor& output_tensor);
  at::Tensor send_backward_recv_forward(const at::Tensor& input_tensor_grad);

  // The interleaved schedule's exchanges. Here the stages form a ring (the last stage's
  // next is the first), since model chunk v+1 of the first stage follows chunk v of the last;
  // the flags say what to receive, an undefined tensor means nothing to send.
  at::Tensor send_forward_recv_forward(const at::Tensor& output_tensor, bool recv_prev);
  at::Tensor send_backward_recv_backward(const at::Tensor& input_tensor_grad, bool recv_next);
  // Returns (from the previous stage, from the next stage).
  std::pair<at::Tensor, at::Tensor> send_forward_backward_recv_forward_backward(const at::Tensor& output_tensor,
                                                                                const at::Tensor& input_tensor_grad,
                                                                                bool recv_prev, bool recv_next);

  bool is_first_stage() const { return rank_ == 0; }
  bool is_last_stage() const { return rank_ == size_ - 1; }

 private:
  at::Tensor empty() const;
  void check(const at::Tensor& t, const char* what) const;
  // One batch: activations to the next stage / from the previous one first, then gradients to
  // the previous stage / from the next one. Both ends post in this order, so even with two
  // stages (where next and previous are the same peer) each receive matches its send.
  // Returns (from the previous stage, from the next stage).
  std::pair<at::Tensor, at::Tensor> communicate(const at::Tensor& send_next, const at::Tensor& send_prev,
                                                bool recv_prev, bool recv_next);

  comm::ProcessGroup& pp_;
  P2PConfig config_;
  int rank_, size_;
};

}  // namespace megatron::pipeline_parallel
