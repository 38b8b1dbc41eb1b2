#include "megatron/optimizer/distrib_optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

namespace megatron::optimizer {
namespace {

// The parameters (or gradients) as one flat fp32 buffer, zero-padded to `padded` elements.
at::Tensor flatten(const std::vector<at::Tensor>& tensors, int64_t padded) {
  std::vector<at::Tensor> flat;
  int64_t numel = 0;
  for (const auto& t : tensors) {
    flat.push_back(t.detach().reshape({-1}).to(at::kFloat));
    numel += t.numel();
  }
  if (padded > numel) flat.push_back(at::zeros({padded - numel}, flat.front().options()));
  return at::cat(flat);
}

}  // namespace

ParamShards::ParamShards(std::vector<at::Tensor> params, const std::vector<bool>& duplicate,
                         std::shared_ptr<comm::ProcessGroup> dp)
    : params_(std::move(params)), dp_(std::move(dp)) {
  TORCH_CHECK(!params_.empty() && dp_, "[distrib_optimizer] needs parameters and a data-parallel group");
  for (const auto& p : params_) numel_ += p.numel();
  const int64_t ranks = dp_->size();
  shard_numel_ = (numel_ + ranks - 1) / ranks;
  const int64_t begin = dp_->rank() * shard_numel_;
  shard_ = flatten(params_, shard_numel_ * ranks).narrow(0, begin, shard_numel_).clone().set_requires_grad(true);

  std::vector<at::Tensor> masks;
  for (size_t i = 0; i < params_.size(); ++i)
    masks.push_back(at::full({params_[i].numel()}, duplicate[i] ? 0.0f : 1.0f, shard_.options().requires_grad(false)));
  norm_mask_ = flatten(masks, shard_numel_ * ranks).narrow(0, begin, shard_numel_).clone();
}

void ParamShards::reduce_scatter_grads() {
  std::vector<at::Tensor> grads;
  for (const auto& p : params_) grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  at::Tensor flat = flatten(grads, shard_numel_ * dp_->size());
  at::Tensor mine = at::empty({shard_numel_}, flat.options());
  dp_->reduce_scatter(mine, flat, comm::ReduceOp::kAvg);
  shard_.mutable_grad() = mine;
}

double ParamShards::grad_sum_of_squares() const {
  return (shard_.grad().to(at::kDouble).pow(2) * norm_mask_).sum().item<double>();
}

void ParamShards::all_gather_params() {
  at::Tensor full = at::empty({shard_numel_ * dp_->size()}, shard_.options().requires_grad(false));
  dp_->all_gather(full, shard_.detach());
  at::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : params_) {
    p.copy_(full.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

at::Tensor ParamShards::gather(const at::Tensor& local) const {
  TORCH_CHECK(local.numel() == shard_numel_, "[distrib_optimizer] gather expects a shard of ", shard_numel_,
              " elements, got ", local.numel());
  at::Tensor full = at::empty({shard_numel_ * dp_->size()}, local.options().requires_grad(false));
  dp_->all_gather(full, local.detach().contiguous());
  return full;
}

at::Tensor ParamShards::local_piece(const at::Tensor& flat) const {
  TORCH_CHECK(flat.numel() == numel_, "[distrib_optimizer] the group holds ", numel_, " elements, the state ",
              flat.numel());
  return flatten({flat}, shard_numel_ * dp_->size()).narrow(0, dp_->rank() * shard_numel_, shard_numel_).clone();
}

}  // namespace megatron::optimizer
