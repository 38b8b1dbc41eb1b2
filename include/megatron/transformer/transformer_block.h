// A stack of transformer layers (Megatron's TransformerBlock) for one pipeline stage, with the
// final norm on the last stage, activation recompute, and set_input_tensor for stages that
// receive their input from the previous stage.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "megatron/transformer/norm.h"
#include "megatron/transformer/transformer_layer.h"

namespace megatron::transformer {

class MEGATRON_API TransformerBlockImpl : public torch::nn::Cloneable<TransformerBlockImpl> {
 public:
  // num_local_layers: layers on this stage (default: config.num_layers), the first of them layer
  // layer_offset of the model; post_process: final norm.
  TransformerBlockImpl(const TransformerConfig& config, bool pre_process = true, bool post_process = true,
                       std::optional<int64_t> num_local_layers = {}, int64_t layer_offset = 0);
  void reset() override;
  // hidden [s, b, h]; ignored (may be undefined) when !pre_process and an input tensor is set.
  at::Tensor forward(const at::Tensor& hidden, const at::Tensor& attention_mask = {},
                     const at::Tensor& rotary_pos_emb = {});
  // The activations a non-first stage receives; consumed by the next forward.
  void set_input_tensor(const at::Tensor& input) { input_tensor_ = input; }

  TransformerConfig config;
  bool pre_process, post_process;
  int64_t num_local_layers;
  int64_t layer_offset;
  torch::nn::ModuleList layers{nullptr};
  Norm final_layernorm{nullptr};

 private:
  at::Tensor input_tensor_;
};
TORCH_MODULE(TransformerBlock);

}  // namespace megatron::transformer
