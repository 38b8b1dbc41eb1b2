#include "megatron/pipeline_parallel/p2p_communication.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace megatron::pipeline_parallel {

P2PCommunicator::P2PCommunicator(const ParallelState& ps, P2PConfig config)
    : pp_(ps.get_pipeline_model_parallel_group()), config_(std::move(config)),
      rank_(pp_.rank()), size_(pp_.size()) {
  TORCH_CHECK(!config_.tensor_shape.empty(), "[p2p_communication] tensor_shape is required");
}

at::Tensor P2PCommunicator::empty() const {
  return at::empty(config_.tensor_shape, at::TensorOptions().dtype(config_.dtype).device(config_.device));
}

void P2PCommunicator::check(const at::Tensor& t, const char* what) const {
  TORCH_CHECK(t.defined(), "[p2p_communication] ", what, " on pipeline stage ", rank_, ": undefined tensor");
  TORCH_CHECK(t.sizes() == at::IntArrayRef(config_.tensor_shape), "[p2p_communication] ", what,
              " on pipeline stage ", rank_, ": expected shape ", at::IntArrayRef(config_.tensor_shape),
              " ([s, b, h] from the configuration), got ", t.sizes(),
              "; every micro-batch must have the configured sequence length and micro-batch size");
  TORCH_CHECK(t.scalar_type() == config_.dtype, "[p2p_communication] ", what, " on pipeline stage ", rank_,
              ": expected dtype ", config_.dtype, ", got ", t.scalar_type());
}

at::Tensor P2PCommunicator::exchange(const at::Tensor& send, int send_to, int recv_from) {
  std::vector<comm::P2POp> ops;
  at::Tensor received;
  if (send_to >= 0) ops.push_back({comm::P2POp::kSend, send.contiguous(), send_to});
  if (recv_from >= 0) {
    received = empty();
    ops.push_back({comm::P2POp::kRecv, received, recv_from});
  }
  if (!ops.empty()) pp_.batch_isend_irecv(ops)->wait();
  return received;
}

at::Tensor P2PCommunicator::recv_forward() { return exchange({}, -1, is_first_stage() ? -1 : rank_ - 1); }

void P2PCommunicator::send_forward(const at::Tensor& output_tensor) {
  if (is_last_stage()) return;
  check(output_tensor, "send_forward");
  exchange(output_tensor, rank_ + 1, -1);
}

at::Tensor P2PCommunicator::recv_backward() { return exchange({}, -1, is_last_stage() ? -1 : rank_ + 1); }

void P2PCommunicator::send_backward(const at::Tensor& input_tensor_grad) {
  if (is_first_stage()) return;
  check(input_tensor_grad, "send_backward");
  exchange(input_tensor_grad, rank_ - 1, -1);
}

at::Tensor P2PCommunicator::send_forward_recv_backward(const at::Tensor& output_tensor) {
  if (is_last_stage()) return {};
  check(output_tensor, "send_forward_recv_backward");
  return exchange(output_tensor, rank_ + 1, rank_ + 1);
}

at::Tensor P2PCommunicator::send_backward_recv_forward(const at::Tensor& input_tensor_grad) {
  if (is_first_stage()) return {};
  check(input_tensor_grad, "send_backward_recv_forward");
  return exchange(input_tensor_grad, rank_ - 1, rank_ - 1);
}

}  // namespace megatron::pipeline_parallel
