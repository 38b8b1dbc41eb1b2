#include "megatron/pipeline_parallel/p2p_communication.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace megatron::pipeline_parallel {

P2PCommunicator::P2PCommunicator(const ParallelState& ps, P2PConfig config)
    : pp_(ps.get_pipeline_model_parallel_group()), config_(std::move(config)), rank_(pp_.rank()), size_(pp_.size()) {
  TORCH_CHECK(!config_.tensor_shape.empty(), "[p2p_communication] tensor_shape is required");
}

at::Tensor P2PCommunicator::empty() const {
  return at::empty(config_.tensor_shape, at::TensorOptions().dtype(config_.dtype).device(config_.device));
}

void P2PCommunicator::check(const at::Tensor& t, const char* what) const {
  TORCH_CHECK(t.defined(), "[p2p_communication] ", what, " on pipeline stage ", rank_, ": undefined tensor");
  TORCH_CHECK(t.sizes() == at::IntArrayRef(config_.tensor_shape), "[p2p_communication] ", what, " on pipeline stage ",
              rank_, ": expected shape ", at::IntArrayRef(config_.tensor_shape),
              " ([s, b, h] from the configuration), got ", t.sizes(),
              "; every micro-batch must have the configured sequence length and micro-batch size");
  TORCH_CHECK(t.scalar_type() == config_.dtype, "[p2p_communication] ", what, " on pipeline stage ", rank_,
              ": expected dtype ", config_.dtype, ", got ", t.scalar_type());
}

std::pair<at::Tensor, at::Tensor> P2PCommunicator::communicate(const at::Tensor& send_next, const at::Tensor& send_prev,
                                                               bool recv_prev, bool recv_next) {
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  std::vector<comm::P2POp> ops;
  at::Tensor from_prev, from_next;
  if (send_next.defined()) ops.push_back({comm::P2POp::kSend, send_next.contiguous(), next});
  if (recv_prev) {
    from_prev = empty();
    ops.push_back({comm::P2POp::kRecv, from_prev, prev});
  }
  if (send_prev.defined()) ops.push_back({comm::P2POp::kSend, send_prev.contiguous(), prev});
  if (recv_next) {
    from_next = empty();
    ops.push_back({comm::P2POp::kRecv, from_next, next});
  }
  if (!ops.empty()) pp_.batch_isend_irecv(ops)->wait();
  return {from_prev, from_next};
}

at::Tensor P2PCommunicator::recv_forward() {
  if (is_first_stage()) return {};
  return communicate({}, {}, true, false).first;
}

void P2PCommunicator::send_forward(const at::Tensor& output_tensor) {
  if (is_last_stage()) return;
  check(output_tensor, "send_forward");
  communicate(output_tensor, {}, false, false);
}

at::Tensor P2PCommunicator::recv_backward() {
  if (is_last_stage()) return {};
  return communicate({}, {}, false, true).second;
}

void P2PCommunicator::send_backward(const at::Tensor& input_tensor_grad) {
  if (is_first_stage()) return;
  check(input_tensor_grad, "send_backward");
  communicate({}, input_tensor_grad, false, false);
}

at::Tensor P2PCommunicator::send_forward_recv_backward(const at::Tensor& output_tensor) {
  if (is_last_stage()) return {};
  check(output_tensor, "send_forward_recv_backward");
  return communicate(output_tensor, {}, false, true).second;
}

at::Tensor P2PCommunicator::send_backward_recv_forward(const at::Tensor& input_tensor_grad) {
  if (is_first_stage()) return {};
  check(input_tensor_grad, "send_backward_recv_forward");
  return communicate({}, input_tensor_grad, true, false).first;
}

at::Tensor P2PCommunicator::send_forward_recv_forward(const at::Tensor& output_tensor, bool recv_prev) {
  if (output_tensor.defined()) check(output_tensor, "send_forward_recv_forward");
  return communicate(output_tensor, {}, recv_prev, false).first;
}

at::Tensor P2PCommunicator::send_backward_recv_backward(const at::Tensor& input_tensor_grad, bool recv_next) {
  if (input_tensor_grad.defined()) check(input_tensor_grad, "send_backward_recv_backward");
  return communicate({}, input_tensor_grad, false, recv_next).second;
}

std::pair<at::Tensor, at::Tensor> P2PCommunicator::send_forward_backward_recv_forward_backward(
    const at::Tensor& output_tensor, const at::Tensor& input_tensor_grad, bool recv_prev, bool recv_next) {
  if (output_tensor.defined()) check(output_tensor, "send_forward_backward_recv_forward_backward");
  if (input_tensor_grad.defined()) check(input_tensor_grad, "send_forward_backward_recv_forward_backward");
  return communicate(output_tensor, input_tensor_grad, recv_prev, recv_next);
}

}  // namespace megatron::pipeline_parallel
