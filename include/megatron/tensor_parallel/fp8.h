// FP8 GEMMs for the transformer's linear layers without Transformer Engine: tensors are scaled,
// saturated and cast to float8 (e4m3fn, e5m2) and multiplied by at::_scaled_mm, which CUDA runs
// on FP8 tensor cores (sm_89+) and the CPU runs as a dequantised GEMM. Megatron-LM's two
// per-tensor recipes (--fp8-recipe):
// - delayed: each layer keeps an amax history and a scale for its input, weight and output
//   gradient; a GEMM uses the scale computed from earlier amaxes and records its own. Unlike
//   Transformer Engine, which updates after each micro-batch, the update runs once per iteration
//   (reduce_and_update_fp8_state): the iteration's amax is the max over its micro-batches, so
//   every data-parallel layout and micro-batch split computes the same scales.
// - tensorwise: every tensor is scaled by its own current amax; nothing is kept.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"

namespace torch::nn {
class Module;
}

namespace megatron::tensor_parallel {

enum class Fp8Format { kE4M3, kHybrid };  // hybrid: output gradients in e5m2, the rest in e4m3
enum class Fp8Recipe { kDelayed, kTensorwise };
enum class Fp8AmaxComputeAlgo { kMostRecent, kMax };

struct MEGATRON_API Fp8Config {
  Fp8Format format = Fp8Format::kHybrid;
  Fp8Recipe recipe = Fp8Recipe::kDelayed;
  int64_t margin = 0;            // scales leave 2^margin of headroom (delayed)
  int64_t amax_history_len = 1;  // iterations of amax kept (delayed)
  Fp8AmaxComputeAlgo amax_compute_algo = Fp8AmaxComputeAlgo::kMostRecent;
  bool wgrad = true;  // false: the weight-gradient GEMM runs in the model's precision (--no-fp8-wgrad)

  // From Megatron-LM's flag values; an unknown name or a history of 0 throws naming the flag.
  static Fp8Config from_flags(const std::string& format, const std::string& recipe, int64_t margin,
                              int64_t amax_history_len, const std::string& amax_compute_algo, bool wgrad);
};

// The float8 dtype of a GEMM operand: inputs and weights e4m3fn; output gradients e5m2 under
// hybrid, e4m3fn under e4m3.
MEGATRON_API at::ScalarType fp8_forward_dtype();
MEGATRON_API at::ScalarType fp8_backward_dtype(Fp8Format format);
// The largest finite value of a float8 dtype: 448 (e4m3fn), 57344 (e5m2).
MEGATRON_API double fp8_max(at::ScalarType dtype);

// x * scale in fp32, saturated to +-fp8_max(dtype), cast with round-to-nearest-even.
MEGATRON_API at::Tensor fp8_quantize(const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype);
// The tensorwise recipe's scale for a tensor of this amax: fp8_max / amax; 1 for an amax of zero
// or not finite, fp32's largest value where the quotient overflows (Transformer Engine's rule).
MEGATRON_API at::Tensor fp8_current_scale(const at::Tensor& amax, at::ScalarType dtype);

// One linear layer's delayed-scaling state: an amax history [len, 3] (row 0: this iteration's
// amax so far) and a scale [3] for its three quantised tensors.
class MEGATRON_API Fp8Meta {
 public:
  enum Slot : int64_t { kInput = 0, kWeight = 1, kGradOutput = 2, kNumSlots = 3 };
  explicit Fp8Meta(const Fp8Config& config);

  const Fp8Config& config() const { return config_; }
  at::ScalarType dtype(Slot slot) const;
  // `x` in float8 for `slot` and the inverse of the scale used (what _scaled_mm multiplies back).
  // Delayed: the kept scale (1 until the first update, as Transformer Engine's), and (with
  // record_amax) x's amax joins row 0 of the history; tensorwise: x's own scale.
  std::pair<at::Tensor, at::Tensor> quantize(const at::Tensor& x, Slot slot, bool record_amax = true);
  // Delayed: the scales from the history (as Transformer Engine's amax_and_scale_update: the
  // newest amax or the history's max; scale = fp8_max / 2^margin / amax, kept where the amax is
  // zero or not finite), then the history rolls and row 0 restarts at zero.
  void update_scales();

  at::Tensor amax_history;  // [amax_history_len, 3] float32
  at::Tensor scale;         // [3] float32

 private:
  void to_device(const at::Tensor& like);
  Fp8Config config_;
  at::Tensor scaled_max_;  // [3] fp8_max of each slot's dtype / 2^margin, on the scale's device
};

// Mixed into the layers that can run their GEMM in FP8; fp8_meta is null when they do not.
struct MEGATRON_API Fp8Module {
  virtual ~Fp8Module() = default;
  std::shared_ptr<Fp8Meta> fp8_meta;
};

// Y = X W^T + b with X [*, in], W [out, in] quantised by `meta`, through at::_scaled_mm; the
// output in X's dtype. Backward: dX = dY W and (unless the config's wgrad is off) dW = dY^T X in
// FP8 too, dY quantised to fp8_backward_dtype; db = sum of dY in dY's dtype. in and out must be
// multiples of 16 (_scaled_mm's rule); the token count is padded to one. Amaxes are recorded
// only where autograd records (training, and a recomputed forward), not in evaluation.
MEGATRON_API at::Tensor fp8_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                   const std::shared_ptr<Fp8Meta>& meta);

// Every FP8 layer of `module` by its name under it, in module order.
MEGATRON_API std::vector<std::pair<std::string, std::shared_ptr<Fp8Meta>>> named_fp8_metas(torch::nn::Module& module);

// The delayed recipe's step, once per iteration after the last backward: row 0 of every history
// of `chunks` is max-reduced over each of `groups` in turn (Megatron-LM's amax reduction group:
// TP, then DP x CP) in one collective each, and every scale is updated. Nothing for tensorwise.
MEGATRON_API void reduce_and_update_fp8_state(const std::vector<std::shared_ptr<torch::nn::Module>>& chunks,
                                              const std::vector<comm::ProcessGroup*>& groups);

// The delayed recipe's state of one model chunk for a checkpoint: "<layer>.fp8_scale" and
// "<layer>.fp8_amax_history". Loading wants exactly these keys and shapes; `file` names the source.
MEGATRON_API std::map<std::string, at::Tensor> fp8_state_dict(torch::nn::Module& chunk);
MEGATRON_API void load_fp8_state_dict(torch::nn::Module& chunk, const std::map<std::string, at::Tensor>& state,
                                      const std::string& file);

}  // namespace megatron::tensor_parallel
