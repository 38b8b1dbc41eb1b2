#include "megatron/tensor_parallel/cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace megatron::tensor_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void all_reduce_(at::Tensor& t, const GroupPtr& g, comm::ReduceOp op) {
  if (group_size(g) > 1) g->all_reduce(t, op);
}

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits_in, const at::Tensor& target, GroupPtr group,
                            double label_smoothing) {
    const int64_t part = logits_in.size(-1);
    const int64_t vocab = part * group_size(group);
    const int64_t start = part * group_rank(group);

    at::Tensor logits_2d = logits_in.to(at::kFloat).reshape({-1, part});  // [n, V/tp]
    at::Tensor tgt = target.reshape({-1});
    at::Tensor logits_max = std::get<0>(logits_2d.max(-1)).contiguous();
    all_reduce_(logits_max, group, comm::ReduceOp::kMax);
    at::Tensor logits = logits_2d - logits_max.unsqueeze(-1);  // new buffer; the input is kept

    at::Tensor target_mask = (tgt < start).logical_or_(tgt >= start + part);  // not on this rank
    at::Tensor masked_target = (tgt - start).masked_fill_(target_mask, 0);
    at::Tensor predicted = logits.gather(1, masked_target.unsqueeze(1)).squeeze(1);
    predicted.masked_fill_(target_mask, 0.0);
    predicted = predicted.contiguous();
    all_reduce_(predicted, group, comm::ReduceOp::kSum);

    at::Tensor exp_logits = logits.exp_();
    at::Tensor sum_exp = exp_logits.sum(-1);
    all_reduce_(sum_exp, group, comm::ReduceOp::kSum);
    at::Tensor log_sum_exp = sum_exp.log();
    at::Tensor loss = log_sum_exp - predicted;
    at::Tensor softmax = exp_logits.div_(sum_exp.unsqueeze(-1));

    double smoothing = 0.0;
    if (label_smoothing > 0.0) {
      TORCH_CHECK(label_smoothing < 1.0,
                  "[vocab_parallel_cross_entropy] label_smoothing must be in "
                  "[0, 1), got ",
                  label_smoothing);
      smoothing = label_smoothing * vocab / (vocab - 1);
      // mean over the FULL vocabulary of log p = sum_i (x_i - max) / K - log(sum exp).
      at::Tensor sum_shifted = (logits_2d.sum(-1) - logits_max * static_cast<double>(part)).contiguous();
      all_reduce_(sum_shifted, group, comm::ReduceOp::kSum);
      at::Tensor mean_log_probs = sum_shifted / static_cast<double>(vocab) - log_sum_exp;
      loss = (1.0 - smoothing) * loss - smoothing * mean_log_probs;
    }
    ctx->save_for_backward({softmax, target_mask, masked_target});
    ctx->saved_data["smoothing"] = smoothing;
    ctx->saved_data["vocab"] = vocab;
    ctx->saved_data["in_dtype"] = logits_in.scalar_type();
    ctx->saved_data["in_shape"] = logits_in.sizes().vec();
    return loss.view(target.sizes());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    // The saved softmax [n, V/tp] becomes the gradient in place (as in Megatron): this backward
    // can run once per forward.
    at::Tensor grad = saved[0];
    const at::Tensor& target_mask = saved[1];
    const at::Tensor& masked_target = saved[2];
    const double smoothing = ctx->saved_data["smoothing"].toDouble();
    const int64_t vocab = ctx->saved_data["vocab"].toInt();
    at::Tensor update = (1.0 - target_mask.to(at::kFloat)) * (1.0 - smoothing);
    grad.scatter_add_(1, masked_target.unsqueeze(1), -update.unsqueeze(1));
    if (smoothing > 0.0) grad.sub_(smoothing / static_cast<double>(vocab));
    grad.mul_(grad_outputs[0].reshape({-1, 1}).to(at::kFloat));
    auto shape = ctx->saved_data["in_shape"].toIntVector();
    grad = grad.view(shape).to(ctx->saved_data["in_dtype"].toScalarType());
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& vocab_parallel_logits, const at::Tensor& target,
                                        const GroupPtr& group, double label_smoothing) {
  TORCH_CHECK(vocab_parallel_logits.dim() == target.dim() + 1 &&
                  vocab_parallel_logits.sizes().slice(0, target.dim()) == target.sizes(),
              "[vocab_parallel_cross_entropy] logits ", vocab_parallel_logits.sizes(), " must be target's shape ",
              target.sizes(), " plus a vocabulary dim");
  return VocabParallelCrossEntropy::apply(vocab_parallel_logits, target, group, label_smoothing);
}

}  // namespace megatron::tensor_parallel
