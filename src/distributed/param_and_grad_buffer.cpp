#include "megatron/distributed/param_and_grad_buffer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>

namespace megatron::distributed {
namespace {

// The storage itself is emptied and refilled, not the tensor replaced: every view of it (the
// parameters, their .grad, tensors autograd saved for backward) sees the new memory. This is
// what FSDP does with storage resizing; the StorageImpl calls work on any device's allocator.
void free_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(c10::DataPtr(nullptr, s->device()));
  s->set_nbytes(0);
}

bool storage_allocated(const at::Tensor& t) {
  return t.storage().nbytes() > 0;
}

void allocate_storage(const at::Tensor& t) {
  if (storage_allocated(t)) return;
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  const size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
  s->set_data_ptr_noswap(s->allocator()->allocate(nbytes));
  s->set_nbytes(nbytes);
}

}  // namespace

ParamAndGradBuffer::ParamAndGradBuffer(const std::vector<at::Tensor>& params,
                                       const std::vector<std::vector<size_t>>& groups, const std::vector<bool>& counted,
                                       int64_t pad_multiple, std::optional<c10::Device> device,
                                       const std::vector<Initializer>& initialize)
    : params_list_(params) {
  TORCH_CHECK(!params.empty() && pad_multiple > 0, "[param_and_grad_buffer] needs parameters and a padding multiple");
  int64_t total = 0;
  for (const auto& group : groups) {
    Region r;
    r.offset = total;
    for (size_t i : group) {
      r.members.push_back({i, r.numel});
      if (counted.at(i)) {  // one range for neighbours that both count
        if (!r.counted.empty() && r.counted.back().first + r.counted.back().second == r.numel)
          r.counted.back().second += params[i].numel();
        else
          r.counted.emplace_back(r.numel, params[i].numel());
      }
      r.numel += params[i].numel();
    }
    r.padded = (r.numel + pad_multiple - 1) / pad_multiple * pad_multiple;
    total += r.padded;
    regions_.push_back(std::move(r));
  }
  const auto& first = params.front();
  const c10::Device where = device.value_or(first.device());
  for (const auto& p : params) {
    TORCH_CHECK(p.scalar_type() == first.scalar_type() && p.device() == where,
                "[param_and_grad_buffer] parameters of one buffer share a dtype and a device: ", p.scalar_type(),
                " on ", p.device(), " next to ", first.scalar_type(), " on ", where);
  }
  params_ = at::zeros({total}, first.options().device(where).requires_grad(false));
  grads_ = at::zeros({total}, first.options().device(where).dtype(at::kFloat).requires_grad(false));
  grad_views_.resize(params.size());
  at::NoGradGuard no_grad;
  for (const auto& r : regions_) {
    for (const auto& m : r.members) {
      at::Tensor p = params[m.index];
      at::Tensor view = params_.narrow(0, r.offset + m.offset, p.numel()).view(p.sizes());
      if (p.numel() > 0 && !storage_allocated(p)) {  // tensor_parallel::DeferredParameterInit's
        TORCH_CHECK(m.index < initialize.size() && initialize[m.index], "[param_and_grad_buffer] parameter ", m.index,
                    " has no memory (deferred initialisation) but no initializer");
        initialize[m.index](view);
      } else {
        view.copy_(p);
      }
      p.set_data(view);  // the same parameter (modules hold it), now stored in the buffer
      grad_views_[m.index] = grads_.narrow(0, r.offset + m.offset, p.numel()).view(p.sizes());
    }
  }
  zero_grad();
}

void ParamAndGradBuffer::release_grads() {
  free_storage(grads_);
}

void ParamAndGradBuffer::allocate_grads() {
  if (storage_allocated(grads_)) return;
  allocate_storage(grads_);
  grads_.zero_();
}

bool ParamAndGradBuffer::grads_allocated() const {
  return storage_allocated(grads_);
}

void ParamAndGradBuffer::release_params() {
  free_storage(params_);
}

void ParamAndGradBuffer::allocate_params() {
  allocate_storage(params_);
}

bool ParamAndGradBuffer::params_allocated() const {
  return storage_allocated(params_);
}

void ParamAndGradBuffer::zero_grad() {
  allocate_grads();
  for (size_t i = 0; i < params_list_.size(); ++i) {
    at::Tensor& grad = params_list_[i].mutable_grad();
    if (!grad.defined() || !grad.is_same(grad_views_[i])) grad = grad_views_[i];
  }
  grads_.zero_();
}

std::vector<size_t> ParamAndGradBuffer::collect_replaced_grads() {
  at::NoGradGuard no_grad;
  std::vector<size_t> replaced;
  for (size_t i = 0; i < params_list_.size(); ++i) {
    at::Tensor& grad = params_list_[i].mutable_grad();
    if (grad.defined() && grad.is_same(grad_views_[i])) continue;
    replaced.push_back(i);
    if (grad.defined())
      grad_views_[i].copy_(grad);
    else
      grad_views_[i].zero_();
    grad = grad_views_[i];
  }
  return replaced;
}

}  // namespace megatron::distributed
