// What a module calls around its forward when its parameters are sharded over the data-parallel
// ranks between uses (ZeRO-3, distributed/fsdp.h): the module stays ignorant of the sharding.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

namespace megatron::transformer {

class MEGATRON_API ParamGather {
 public:
  virtual ~ParamGather() = default;
  // Before the forward reads the parameters: they are whole once this returns.
  virtual void before_forward() = 0;
  // After it: `output` is what the forward returned; its gradient, when it has one, is the signal
  // to gather the parameters again for the backward pass.
  virtual void after_forward(const at::Tensor& output) = 0;
};

}  // namespace megatron::transformer
