#include "megatron/tensor_parallel/cross_entropy.h"

#include "build_config.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#if MEGATRON_WITH_CUDA
#include "cross_entropy_cuda.h"
#endif

namespace megatron::tensor_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// t in fp32, without dispatching a conversion when it is fp32 already (one dispatch per call
// counts on a GPU's host side).
at::Tensor as_float(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
}

// Two phases, as fused cross-entropy kernels do: forward keeps the logits and one log-sum-exp per
// token, backward recomputes the softmax from them. Nothing [tokens, vocab]-sized in fp32 is kept
// between the two, and the ranks' statistics (log-sum-exp, target logit, and for label smoothing
// the logit sum) cross the tensor-parallel group in one all-gather instead of three all-reduces.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits_in, const at::Tensor& target, GroupPtr group,
                            double label_smoothing) {
    TORCH_CHECK(label_smoothing >= 0.0 && label_smoothing < 1.0,
                "[vocab_parallel_cross_entropy] label_smoothing must be in [0, 1), got ", label_smoothing);
    const int64_t part = logits_in.size(-1);
    const int64_t vocab = part * group_size(group);
    const int64_t start = part * group_rank(group);

    at::Tensor tgt = target.reshape({-1});
    // Which targets are not on this rank (none without tensor parallelism: no mask then).
    const bool sharded = group_size(group) > 1;
    at::Tensor target_mask = sharded ? (tgt < start).logical_or_(tgt >= start + part) : at::Tensor();
    at::Tensor masked_target = sharded ? (tgt - start).masked_fill_(target_mask, 0) : tgt;
    const double smoothing = label_smoothing > 0.0 ? label_smoothing * vocab / (vocab - 1) : 0.0;

    at::Tensor local;  // [k, n]: this rank's log-sum-exp, target logit (0 off this rank), logit sum
#if MEGATRON_WITH_CUDA
    if (logits_in.is_cuda()) {
      // One kernel reading the logits once in their dtype; -1 marks a target on another rank.
      at::Tensor local_target = sharded ? masked_target.masked_fill(target_mask, -1) : tgt;
      local = detail::cross_entropy_stats_cuda(logits_in.reshape({-1, part}).contiguous(), local_target, smoothing > 0);
      target_mask = at::Tensor();
      masked_target = local_target;
      ctx->saved_data["cuda"] = true;
    }
#endif
    if (!local.defined()) {
      at::Tensor logits = as_float(logits_in.reshape({-1, part}));  // [n, V/tp]
      at::Tensor predicted = logits.gather(1, masked_target.unsqueeze(1)).squeeze(1);
      if (sharded) predicted.masked_fill_(target_mask, 0);
      std::vector<at::Tensor> stats = {at::logsumexp(logits, {-1}), predicted};
      if (smoothing > 0.0) stats.push_back(logits.sum(-1));
      local = at::stack(stats);
    }
    at::Tensor all = sharded ? all_gather_along_dim(local.unsqueeze(0), group, 0) : local.unsqueeze(0);
    at::Tensor log_sum_exp = at::logsumexp(all.select(1, 0), {0});  // over the ranks' vocabulary slices
    at::Tensor loss = log_sum_exp - all.select(1, 1).sum(0);
    if (smoothing > 0.0) {
      // Mean over the full vocabulary of log p: sum_i x_i / K - log(sum exp).
      at::Tensor mean_log_probs = all.select(1, 2).sum(0) / static_cast<double>(vocab) - log_sum_exp;
      loss = (1.0 - smoothing) * loss - smoothing * mean_log_probs;
    }
    ctx->save_for_backward({logits_in, log_sum_exp, target_mask, masked_target});
    ctx->saved_data["smoothing"] = smoothing;
    ctx->saved_data["vocab"] = vocab;
    return loss.view(target.sizes());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& logits_in = saved[0];
    const at::Tensor& log_sum_exp = saved[1];
    const at::Tensor& target_mask = saved[2];
    const at::Tensor& masked_target = saved[3];
    const double smoothing = ctx->saved_data["smoothing"].toDouble();
    const int64_t vocab = ctx->saved_data["vocab"].toInt();
    const int64_t part = logits_in.size(-1);
#if MEGATRON_WITH_CUDA
    if (ctx->saved_data.count("cuda")) {
      at::Tensor grad = detail::cross_entropy_backward_cuda(logits_in.reshape({-1, part}).contiguous(), log_sum_exp,
                                                            masked_target, grad_outputs[0], smoothing, vocab);
      return {grad.view(logits_in.sizes()), at::Tensor(), at::Tensor(), at::Tensor()};
    }
#endif
    // softmax = exp(x - log_sum_exp), then minus (1 - smoothing) at the target and smoothing / K everywhere.
    at::Tensor grad = as_float(logits_in.reshape({-1, part})).sub(log_sum_exp.unsqueeze(1)).exp_();
    const int64_t n = grad.size(0);
    at::Tensor update =
        target_mask.defined()
            ? target_mask.to(at::kFloat).sub_(1.0).mul_(1.0 - smoothing).unsqueeze(1)  // 0 off this rank
            : at::full({n, 1}, smoothing - 1.0, grad.options());
    grad.scatter_add_(1, masked_target.unsqueeze(1), update);
    if (smoothing > 0.0) grad.sub_(smoothing / static_cast<double>(vocab));
    grad.mul_(as_float(grad_outputs[0].reshape({-1, 1})));
    grad = grad.view(logits_in.sizes());
    if (logits_in.scalar_type() != at::kFloat) grad = grad.to(logits_in.scalar_type());
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
