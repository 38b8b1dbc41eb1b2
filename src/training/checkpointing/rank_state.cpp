#include "training/checkpointing/rank_state.h"

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>

#include "megatron/datasets/blended_dataset.h"
#include "megatron/datasets/indexed_dataset.h"
#include "megatron/models/common/language_module.h"
#include "megatron/optimizer/optimizer.h"
#include "megatron/optimizer/param_scheduler.h"
#include "megatron/tensor_parallel/fp8.h"
#include "megatron/tensor_parallel/random.h"
#include "training/arguments/data_blends.h"
#include "training/loop/initialize.h"

namespace megatron::training::detail {
namespace {

at::Generator default_generator(c10::Device device) {
  return at::globalContext().defaultGenerator(device);
}

}  // namespace

using TensorMap = RankCheckpoint::TensorMap;

TensorMap module_state(torch::nn::Module& m) {
  if (auto* lm = dynamic_cast<models::common::LanguageModule*>(&m)) return lm->state_dict();
  TensorMap out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().detach();
  for (const auto& b : m.named_buffers()) out[b.key()] = b.value();
  return out;
}

void load_module_state(torch::nn::Module& m, const TensorMap& state) {
  if (auto* lm = dynamic_cast<models::common::LanguageModule*>(&m)) {
    lm->load_state_dict(state, /*strict=*/true);
    return;
  }
  at::NoGradGuard no_grad;
  auto copy = [&](const std::string& name, at::Tensor t) {
    auto it = state.find(name);
    TORCH_CHECK(it != state.end(), "[checkpointing] missing key '", name, "'");
    TORCH_CHECK(it->second.sizes() == t.sizes(), "[checkpointing] '", name, "' has shape ", it->second.sizes(),
                ", the model ", t.sizes());
    t.copy_(it->second);
  };
  for (const auto& p : m.named_parameters()) copy(p.key(), p.value());
  for (const auto& b : m.named_buffers()) copy(b.key(), b.value());
}

bool load_fp8_state(const std::vector<std::shared_ptr<torch::nn::Module>>& model, const TensorMap& fp8_state,
                    const std::string& file) {
  if (fp8_state.empty()) return false;
  for (size_t v = 0; v < model.size(); ++v) {
    const std::string prefix = model_chunk_prefix(v, model.size());
    TensorMap mine;
    for (const auto& [key, t] : fp8_state)
      if (prefix.empty() || key.compare(0, prefix.size(), prefix) == 0) mine[key.substr(prefix.size())] = t;
    tensor_parallel::load_fp8_state_dict(*model[v], mine, file);
  }
  return true;
}

RankCheckpoint::RngState rng_state(const TrainingState& state, uint64_t host_seed) {
  RankCheckpoint::RngState r;
  r.host_seed = host_seed;
  {
    auto gen = default_generator(c10::Device(c10::kCPU));
    std::lock_guard<std::mutex> lock(gen.mutex());
    r.torch_rng_state = gen.get_state();
  }
  if (state.device.is_cuda()) {
    auto gen = default_generator(state.device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    r.cuda_rng_state = gen.get_state();
  }
  if (state.rng_tracker) r.rng_tracker_states = state.rng_tracker->get_states();
  return r;
}

void set_rng_state(const RankCheckpoint::RngState& r, TrainingState& state, const std::string& file) {
  {
    auto gen = default_generator(c10::Device(c10::kCPU));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(r.torch_rng_state);
  }
  if (state.device.is_cuda()) {
    TORCH_CHECK(r.cuda_rng_state.defined(), "[checkpointing] ", file, ": rng_state has no 'cuda_rng_state'");
    auto gen = default_generator(state.device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(r.cuda_rng_state);
  }
  if (state.rng_tracker) {
    auto saved = r.rng_tracker_states;
    for (auto& [k, v] : saved) v = v.clone();
    state.rng_tracker->set_states(saved);
  }
}

RankCheckpoint rank_checkpoint(const Arguments& args, const ParallelState& ps, const TrainingState& state,
                               std::map<std::string, TensorMap> param_state) {
  RankCheckpoint c;
  c.args = args;
  c.padded_vocab_size = state.padded_vocab_size;
  c.true_vocab_size = state.vocab_size;
  c.iteration = state.iteration;
  for (const auto& m : *state.model) c.model.push_back(module_state(*m));
  if (!args.no_save_optim) {
    c.optimizer = RankCheckpoint::OptimizerState{};
    auto& o = *c.optimizer;
    o.distributed = state.optimizer->is_distributed();
    o.param_state = std::move(param_state);
    o.lr = state.optimizer->lr();
    o.decoupled_lr = state.optimizer->decoupled_lr();
    if (auto* scaler = state.optimizer->grad_scaler()) {
      const auto s = scaler->state();
      o.grad_scaler = RankCheckpoint::GradScalerState{s.scale, s.growth_tracker, s.hysteresis_tracker};
    }
    o.scheduler = state.scheduler->state_dict();
  }
  if (!args.no_save_rng) c.rng_state = std::vector<RankCheckpoint::RngState>{rng_state(state, stage_seed(args, ps))};
  c.consumed_train_samples = state.consumed_train_samples;
  c.consumed_valid_samples = state.consumed_valid_samples;
  c.data_fingerprint = data_fingerprint(args);
  for (size_t v = 0; v < state.model->size(); ++v)
    for (auto& [name, t] : tensor_parallel::fp8_state_dict(*(*state.model)[v]))
      c.fp8_state[model_chunk_prefix(v, state.model->size()) + name] = t;
  return c;
}

namespace {

void write_blend(std::ostream& s, const datasets::DataBlend& blend) {
  for (size_t i = 0; i < blend.prefixes.size(); ++i) {
    const std::string& prefix = blend.prefixes[i];
    std::error_code missing;
    const auto idx = std::filesystem::file_size(datasets::idx_path(prefix), missing);
    const auto bin = std::filesystem::file_size(datasets::bin_path(prefix), missing);
    s << (i ? ", " : "") << (blend.weights.empty() ? "" : std::to_string(blend.weights[i]) + " x ")
      << std::filesystem::path(prefix).filename().string() << " (" << idx << " + " << bin << " bytes)";
  }
}

}  // namespace

std::string data_fingerprint(const Arguments& a) {
  std::ostringstream s;
  if (a.mock_data) s << "mock data, vocabulary " << a.vocab_size.value_or(0);
  const auto blends = detail::data_blends_from_args(a);
  if (blends.blend) write_blend(s, *blends.blend);
  const char* const names[3] = {"train", "valid", "test"};
  for (int i = 0, written = 0; i < 3; ++i) {
    if (!blends.per_split[i]) continue;
    s << (written++ ? "; " : "") << names[i] << ": ";
    write_blend(s, *blends.per_split[i]);
  }
  s << ", split " << a.split << ", sequence length " << a.seq_length << ", seed " << a.seed;
  return s.str();
}

void copy_to_host(RankCheckpoint& c) {
  // Storage by storage, the views rebuilt on the copies: tensors that shared one (parameters in
  // their flat buffer) still do, so the files are the plain save's, byte for byte.
  std::map<const void*, c10::Storage> copies;
  auto copy = [&](at::Tensor& t) {
    if (!t.defined()) return;
    if (t.storage().data() == nullptr) {  // empty: nothing to share
      t = at::empty(t.sizes(), t.options().device(at::kCPU));
      return;
    }
    const c10::Storage& storage = t.storage();
    auto [it, fresh] = copies.try_emplace(storage.data());
    if (fresh) {
      const auto bytes = static_cast<int64_t>(storage.nbytes());
      const auto byte_options = t.options().dtype(at::kByte);
      at::Tensor host = at::empty({bytes}, byte_options.device(at::kCPU).pinned_memory(t.is_cuda()));
      host.copy_(at::empty({0}, byte_options).set_(storage, 0, {bytes}, {1}));
      it->second = host.storage();
    }
    t = at::empty({0}, t.options().device(at::kCPU)).set_(it->second, t.storage_offset(), t.sizes(), t.strides());
  };
  auto copy_all = [&](RankCheckpoint::TensorMap& m) {
    for (auto& [name, t] : m) copy(t);
  };
  for (auto& m : c.model) copy_all(m);
  copy_all(c.fp8_state);
  if (c.optimizer)
    for (auto& [name, m] : c.optimizer->param_state) copy_all(m);
  if (c.rng_state) {
    for (auto& r : *c.rng_state) {
      copy(r.torch_rng_state);
      copy(r.cuda_rng_state);
      copy_all(r.rng_tracker_states);
    }
  }
}

}  // namespace megatron::training::detail
