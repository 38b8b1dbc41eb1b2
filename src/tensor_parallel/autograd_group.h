// A process group (and a Domino handle) carried through an autograd context, for the backward collective of the
// tensor-parallel mappings and layers. Private to src/tensor_parallel.
#pragma once

#include <torch/csrc/autograd/custom_function.h>

#include "megatron/tensor_parallel/domino.h"
#include "megatron/tensor_parallel/mappings.h"

namespace megatron::tensor_parallel::detail {

// Keeps the group alive inside an autograd context (IValue capsules need no registration).
struct GroupHolder : torch::CustomClassHolder {
  explicit GroupHolder(GroupPtr g) : group(std::move(g)) {}
  GroupPtr group;
};

inline void save_group(torch::autograd::AutogradContext* ctx, const GroupPtr& group) {
  ctx->saved_data["group"] = c10::IValue::make_capsule(c10::make_intrusive<GroupHolder>(group));
}

inline GroupPtr load_group(torch::autograd::AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<GroupHolder>(ctx->saved_data["group"].toCapsule())->group;
}

// The same for a Domino handle (domino.h).
struct PendingHolder : torch::CustomClassHolder {
  explicit PendingHolder(PendingPtr p) : pending(std::move(p)) {}
  PendingPtr pending;
};

inline void save_pending(torch::autograd::AutogradContext* ctx, const PendingPtr& pending) {
  ctx->saved_data["pending"] = c10::IValue::make_capsule(c10::make_intrusive<PendingHolder>(pending));
}

inline PendingPtr load_pending(torch::autograd::AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<PendingHolder>(ctx->saved_data["pending"].toCapsule())->pending;
}

}  // namespace megatron::tensor_parallel::detail
