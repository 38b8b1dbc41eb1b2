// FP8 scaling state and the per-iteration amax reduction (fp8.h); the GEMM is fp8_linear.cpp's.
#include "megatron/tensor_parallel/fp8.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>

#include <cmath>
#include <limits>
#include <set>

namespace megatron::tensor_parallel {

Fp8Config Fp8Config::from_flags(const std::string& format, const std::string& recipe, int64_t margin,
                                int64_t amax_history_len, const std::string& amax_compute_algo, bool wgrad) {
  Fp8Config c;
  TORCH_CHECK(format == "e4m3" || format == "hybrid", "[fp8] --fp8-format must be e4m3 or hybrid, got '", format, "'");
  c.format = format == "e4m3" ? Fp8Format::kE4M3 : Fp8Format::kHybrid;
  TORCH_CHECK(recipe == "delayed" || recipe == "tensorwise",
              "[fp8] --fp8-recipe must be delayed or tensorwise (per-tensor scaling with at::_scaled_mm), got '",
              recipe, "'");
  c.recipe = recipe == "delayed" ? Fp8Recipe::kDelayed : Fp8Recipe::kTensorwise;
  TORCH_CHECK(amax_history_len >= 1, "[fp8] --fp8-amax-history-len must be >= 1, got ", amax_history_len);
  TORCH_CHECK(amax_compute_algo == "most_recent" || amax_compute_algo == "max",
              "[fp8] --fp8-amax-compute-algo must be most_recent or max, got '", amax_compute_algo, "'");
  c.margin = margin;
  c.amax_history_len = amax_history_len;
  c.amax_compute_algo = amax_compute_algo == "max" ? Fp8AmaxComputeAlgo::kMax : Fp8AmaxComputeAlgo::kMostRecent;
  c.wgrad = wgrad;
  return c;
}

at::ScalarType fp8_forward_dtype() {
  return at::kFloat8_e4m3fn;
}

at::ScalarType fp8_backward_dtype(Fp8Format format) {
  return format == Fp8Format::kHybrid ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn;
}

double fp8_max(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat8_e4m3fn: return 448.0;
    case at::kFloat8_e5m2: return 57344.0;
    default: TORCH_CHECK(false, "[fp8] not a float8 dtype: ", dtype);
  }
}

at::Tensor fp8_quantize(const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype) {
  // In fp32: a bf16 product would round twice. Saturated: e4m3fn has no infinity and casts
  // overflow to NaN.
  const double m = fp8_max(dtype);
  return (x.to(at::kFloat) * scale).clamp_(-m, m).to(dtype);
}

at::Tensor fp8_current_scale(const at::Tensor& amax, at::ScalarType dtype) {
  at::Tensor a = amax.to(at::kFloat);
  at::Tensor scale = at::full_like(a, fp8_max(dtype)) / a;
  scale = at::where(at::isinf(scale), std::numeric_limits<float>::max(), scale);
  return at::where(at::isfinite(a).logical_and_(a > 0), scale, 1.0f);
}

Fp8Meta::Fp8Meta(const Fp8Config& config) : config_(config) {
  amax_history = at::zeros({config.amax_history_len, kNumSlots}, at::kFloat);
  scale = at::ones({kNumSlots}, at::kFloat);
  const double headroom = std::pow(2.0, -static_cast<double>(config.margin));
  scaled_max_ = at::tensor({fp8_max(dtype(kInput)), fp8_max(dtype(kWeight)), fp8_max(dtype(kGradOutput))}, at::kFloat)
                    .mul_(headroom);
}

at::ScalarType Fp8Meta::dtype(Slot slot) const {
  return slot == kGradOutput ? fp8_backward_dtype(config_.format) : fp8_forward_dtype();
}

void Fp8Meta::to_device(const at::Tensor& like) {
  // The state follows the activations to their device the first time it is used there.
  if (scale.device() == like.device()) return;
  amax_history = amax_history.to(like.device());
  scale = scale.to(like.device());
  scaled_max_ = scaled_max_.to(like.device());
}

std::pair<at::Tensor, at::Tensor> Fp8Meta::quantize(const at::Tensor& x, Slot slot, bool record_amax) {
  const at::ScalarType dt = dtype(slot);
  const bool delayed = config_.recipe == Fp8Recipe::kDelayed;
  at::Tensor amax;
  if (!delayed || record_amax)
    amax = x.numel() ? x.abs().amax().to(at::kFloat) : at::zeros({}, x.options().dtype(at::kFloat));
  if (delayed) to_device(x);
  if (delayed && record_amax) {
    at::Tensor newest = amax_history[0][slot];
    newest.copy_(at::maximum(newest, amax));
  }
  const at::Tensor s = delayed ? scale[slot] : fp8_current_scale(amax, dt);
  return {fp8_quantize(x, s, dt), s.reciprocal()};
}

void Fp8Meta::update_scales() {
  if (config_.recipe != Fp8Recipe::kDelayed) return;
  at::NoGradGuard no_grad;
  const at::Tensor amax =
      config_.amax_compute_algo == Fp8AmaxComputeAlgo::kMax ? std::get<0>(amax_history.max(0)) : amax_history[0];
  at::Tensor fresh = scaled_max_ / amax;
  fresh = at::where(at::isinf(fresh), std::numeric_limits<float>::max(), fresh);
  scale.copy_(at::where(at::isfinite(amax).logical_and_(amax > 0), fresh, scale));
  if (amax_history.size(0) > 1) amax_history.copy_(at::roll(amax_history, -1, 0));
  amax_history[0].zero_();
}

std::vector<std::pair<std::string, std::shared_ptr<Fp8Meta>>> named_fp8_metas(torch::nn::Module& module) {
  std::vector<std::pair<std::string, std::shared_ptr<Fp8Meta>>> out;
  for (const auto& item : module.named_modules()) {
    auto* m = dynamic_cast<Fp8Module*>(item.value().get());
    if (m && m->fp8_meta) out.emplace_back(item.key(), m->fp8_meta);
  }
  return out;
}

void reduce_and_update_fp8_state(const std::vector<std::shared_ptr<torch::nn::Module>>& chunks,
                                 const std::vector<comm::ProcessGroup*>& groups) {
  std::vector<std::shared_ptr<Fp8Meta>> metas;
  for (const auto& chunk : chunks)
    for (auto& [name, meta] : named_fp8_metas(*chunk))
      if (meta->config().recipe == Fp8Recipe::kDelayed) metas.push_back(meta);
  if (metas.empty()) return;
  at::NoGradGuard no_grad;
  // One buffer for every layer's newest amaxes: one small collective per group.
  std::vector<at::Tensor> rows;
  for (const auto& m : metas) rows.push_back(m->amax_history[0]);
  at::Tensor all = at::cat(rows);
  for (comm::ProcessGroup* g : groups)
    if (g && g->size() > 1) g->all_reduce(all, comm::ReduceOp::kMax);
  const auto parts = all.split(Fp8Meta::kNumSlots);
  for (size_t i = 0; i < metas.size(); ++i) {
    metas[i]->amax_history[0].copy_(parts[i]);
    metas[i]->update_scales();
  }
}

std::map<std::string, at::Tensor> fp8_state_dict(torch::nn::Module& chunk) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, meta] : named_fp8_metas(chunk)) {
    if (meta->config().recipe != Fp8Recipe::kDelayed) continue;
    out[name + ".fp8_scale"] = meta->scale.detach().cpu();
    out[name + ".fp8_amax_history"] = meta->amax_history.detach().cpu();
  }
  return out;
}

void load_fp8_state_dict(torch::nn::Module& chunk, const std::map<std::string, at::Tensor>& state,
                         const std::string& file) {
  const auto metas = named_fp8_metas(chunk);
  std::set<std::string> expected;
  for (const auto& [name, meta] : metas)
    if (meta->config().recipe == Fp8Recipe::kDelayed)
      expected.insert({name + ".fp8_scale", name + ".fp8_amax_history"});
  for (const auto& [key, tensor] : state)
    TORCH_CHECK(expected.count(key), "[checkpointing] ", file, ": FP8 state '", key,
                "' has no FP8 layer here (was it saved with another --fp8-recipe or model?)");
  at::NoGradGuard no_grad;
  for (const auto& [name, meta] : metas) {
    if (meta->config().recipe != Fp8Recipe::kDelayed) continue;
    const std::pair<const char*, at::Tensor*> targets[] = {{".fp8_scale", &meta->scale},
                                                           {".fp8_amax_history", &meta->amax_history}};
    for (const auto& [suffix, target] : targets) {
      auto it = state.find(name + suffix);
      TORCH_CHECK(it != state.end(), "[checkpointing] ", file, " has no FP8 state '", name, suffix,
                  "' (saved from another model or with FP8 on other layers)");
      TORCH_CHECK(it->second.sizes() == target->sizes() && it->second.scalar_type() == at::kFloat, "[checkpointing] ",
                  file, ": FP8 state '", name, suffix, "' is ", it->second.scalar_type(), it->second.sizes(),
                  ", this run keeps float", target->sizes(), " (another --fp8-amax-history-len?)");
      target->copy_(it->second);
    }
  }
}

}  // namespace megatron::tensor_parallel
