#include "megatron/distributed/param_shards.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace megatron::distributed {

ParamShards::ParamShards(const ParamAndGradBuffer& buffer, size_t region, std::shared_ptr<comm::ProcessGroup> dp,
                         bool own_main)
    : buffer_(buffer), region_(region), dp_(std::move(dp)) {
  TORCH_CHECK(dp_, "[param_shards] needs a data-parallel group");
  const auto& r = buffer_.regions().at(region_);
  TORCH_CHECK(r.padded % dp_->size() == 0, "[param_shards] the region's ", r.padded, " elements do not split over ",
              dp_->size(), " ranks");
  shard_numel_ = r.padded / dp_->size();
  shard_offset_ = dp_->rank() * shard_numel_;
  at::Tensor mine = buffer_.params_of(r).narrow(0, shard_offset_, shard_numel_);
  main_ =
      buffer_.dtype() == at::kFloat && !own_main ? mine : mine.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
}

comm::WorkHandle ParamShards::reduce_scatter_grads_async(at::Tensor& shard) const {
  at::Tensor region = buffer_.grads_of(buffer_.regions()[region_]);
  return dp_->reduce_scatter_async(shard, region, comm::ReduceOp::kAvg);
}

void ParamShards::reload_main() const {
  at::NoGradGuard no_grad;
  main_.copy_(buffer_.params_of(buffer_.regions()[region_]).narrow(0, shard_offset_, shard_numel_));
}

at::Tensor ParamShards::reduced_grads() const {
  return buffer_.grads_of(buffer_.regions()[region_]).narrow(0, shard_offset_, shard_numel_);
}

std::vector<std::pair<int64_t, int64_t>> ParamShards::in_shard(
    const std::vector<std::pair<int64_t, int64_t>>& ranges) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [offset, numel] : ranges) {
    const int64_t begin = std::max(offset, shard_offset_), end = std::min(offset + numel, shard_offset_ + shard_numel_);
    if (begin < end) out.emplace_back(begin - shard_offset_, end - begin);
  }
  return out;
}

std::vector<at::Tensor> ParamShards::norm_grads(const at::Tensor& shard_grad) const {
  std::vector<at::Tensor> out;
  for (const auto& [offset, numel] : in_shard(buffer_.regions()[region_].counted))
    out.push_back(shard_grad.narrow(0, offset, numel));
  return out;
}

void ParamShards::all_gather_params() const {
  at::Tensor sent;
  all_gather_params_async(sent)->wait();
}

void ParamShards::write_main_to_params() const {
  at::NoGradGuard no_grad;
  at::Tensor mine = buffer_.params_of(buffer_.regions()[region_]).narrow(0, shard_offset_, shard_numel_);
  if (mine.data_ptr() != main_.data_ptr()) mine.copy_(main_);  // fp32: main is that part already
}

comm::WorkHandle ParamShards::all_gather_params_async(at::Tensor& sent) const {
  at::NoGradGuard no_grad;
  at::Tensor region = buffer_.params_of(buffer_.regions()[region_]);
  // The shard leaves through its own buffer: MPI refuses an input inside the output.
  sent = main_.to(region.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
  return dp_->all_gather_async(region, sent);
}

at::Tensor ParamShards::gather(const at::Tensor& local) const {
  TORCH_CHECK(local.numel() == shard_numel_, "[param_shards] gather expects a shard of ", shard_numel_,
              " elements, got ", local.numel());
  at::Tensor full = at::empty({shard_numel_ * dp_->size()}, local.options().requires_grad(false));
  dp_->all_gather(full, local.detach().contiguous());
  return full;
}

at::Tensor ParamShards::local_piece(const at::Tensor& flat) const {
  const auto& r = buffer_.regions()[region_];
  TORCH_CHECK(flat.numel() == r.numel, "[param_shards] the group holds ", r.numel, " elements, the state ",
              flat.numel());
  at::Tensor padded = at::zeros({r.padded}, flat.options());
  padded.narrow(0, 0, r.numel).copy_(flat.reshape({-1}));
  return padded.narrow(0, shard_offset_, shard_numel_).clone();
}

}  // namespace megatron::distributed
