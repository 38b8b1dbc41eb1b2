// Point-to-point between adjacent pipeline stages (Megatron-LM's p2p_communication): activations
// go forward to the next stage, their gradients come back from it. Every exchange is one batched
// isend/irecv, so a stage can send and receive at once (1F1B's steady state) without deadlock.
// Tensor shapes are fixed by the configuration ([s, b, h]); any other shape is refused.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "megatron/parallel_state.h"

namespace megatron::pipeline_parallel {

struct P2PConfig {
  std::vector<int64_t> tensor_shape;  // [seq_length (/ TP with sequence parallelism), micro_batch, hidden]
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::Device(at::kCPU);
};

class P2PCommunicator {
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

  bool is_first_stage() const { return rank_ == 0; }
  bool is_last_stage() const { return rank_ == size_ - 1; }

 private:
  at::Tensor empty() const;
  void check(const at::Tensor& t, const char* what) const;
  // Sends `send` to `send_to` and receives from `recv_from` (group ranks; -1: none) in one batch.
  at::Tensor exchange(const at::Tensor& send, int send_to, int recv_from);

  comm::ProcessGroup& pp_;
  P2PConfig config_;
  int rank_, size_;
};

}  // namespace megatron::pipeline_parallel
