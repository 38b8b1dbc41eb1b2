// MegatronModule (megatron/core/transformer/module.py): what a pipeline schedule needs from a
// model chunk besides forward, namely taking its input activations from the previous stage.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace megatron::transformer {

class MEGATRON_API MegatronModule {
 public:
  virtual ~MegatronModule() = default;
  // The activations received from the previous pipeline stage, used by the next forward()
  // instead of an embedding (undefined on the first stage).
  virtual void set_input_tensor(const at::Tensor& input) = 0;
  // The gradient the MoE layers' auxiliary losses enter the backward with, as the main loss's
  // (Megatron-Core's MoEAuxLossAutoScaler.set_loss_scale); nothing without MoE layers.
  virtual void set_moe_aux_loss_scale(const at::Tensor& scale) {}
  virtual bool has_moe_layers() const { return false; }
  // What the MoE layers recorded for the log since the last call (MoEAuxLossState::take).
  virtual std::map<std::string, at::Tensor> take_moe_aux_losses() { return {}; }
};

}  // namespace megatron::transformer
