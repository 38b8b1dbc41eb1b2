// Megatron-LM's ParamAndGradBuffer: the parameters of one dtype that an optimizer updates, in
// two flat buffers. The parameters' storage is a view of `params`, and their .grad a view of the
// fp32 `grads` (Megatron-LM's main_grad, into which autograd accumulates the micro-batches).
// Each parameter group (weight decay, none) is one contiguous region, padded to a multiple of
// `pad_multiple` (the data-parallel size, so that ZeRO-1 splits it evenly), its parameters in the
// order given, which is the same on every rank of a tensor-parallel group (so that a ZeRO-1
// shard holds the same parameters on each, and sums over that group stay element-wise). Zeroing, the data-parallel
// average, the norm and the update then take one operation per region instead of one per parameter.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace megatron::distributed {

class MEGATRON_API ParamAndGradBuffer {
 public:
  struct Member {
    size_t index;    // into the constructor's params
    int64_t offset;  // of its first element, from the start of its region
  };
  struct Region {
    int64_t offset = 0;  // in the buffer
    int64_t numel = 0;   // parameter elements; then padding up to `padded`
    int64_t padded = 0;
    // The ranges (offset from the region's start, numel) that count in the gradient norm here.
    std::vector<std::pair<int64_t, int64_t>> counted;
    std::vector<Member> members;
  };

  // params: of one dtype, on one device; groups: the indices of each region's parameters;
  // counted[i]: parameter i counts in the norm on this rank. The parameters keep their values
  // and become views of the buffer, on `device` (default: theirs). A parameter without memory
  // (tensor_parallel::DeferredParameterInit) gets its value from initialize[i] instead, which
  // writes it into its view.
  using Initializer = std::function<void(at::Tensor&)>;
  ParamAndGradBuffer(const std::vector<at::Tensor>& params, const std::vector<std::vector<size_t>>& groups,
                     const std::vector<bool>& counted, int64_t pad_multiple,
                     std::optional<c10::Device> device = std::nullopt, const std::vector<Initializer>& initialize = {});

  at::ScalarType dtype() const { return params_.scalar_type(); }
  const std::vector<Region>& regions() const { return regions_; }
  at::Tensor params_of(const Region& r) const { return params_.narrow(0, r.offset, r.padded); }
  at::Tensor grads_of(const Region& r) const { return grads_.narrow(0, r.offset, r.padded); }
  at::Tensor grads() const { return grads_; }
  at::Tensor params() const { return params_; }

  // Zeroes the gradients, pointing each parameter's .grad at its view again first (callers may
  // have replaced it).
  void zero_grad();
  // Copies a .grad that something replaced since zero_grad() into its view, so that the buffer
  // holds every gradient. Returns the indices of the parameters whose .grad it copied.
  std::vector<size_t> collect_replaced_grads();

  // Sharded data parallelism (ZeRO-2/3) frees the memory of the whole gradients or parameters
  // between uses. The views stay (modules and autograd hold them) and must not be read while
  // released; allocating again gives their storage back uninitialised (gradients: zeroed).
  void release_grads();
  void allocate_grads();  // zeroed; no-op while allocated
  bool grads_allocated() const;
  void release_params();
  void allocate_params();  // uninitialised; no-op while allocated
  bool params_allocated() const;

 private:
  std::vector<at::Tensor> params_list_;
  at::Tensor params_, grads_;
  std::vector<Region> regions_;
  std::vector<at::Tensor> grad_views_;  // by params index
};

}  // namespace megatron::distributed
