// torch_dist's names (torch_dist.h): a parameter's global name to megatron-core's stacked key and
// back; and convert_checkpoint's side: a folder read whole, every stacked tensor cut back into its
// layers' (and experts') tensors, and a FullCheckpoint written as one folder whose every tensor is
// one chunk, which any layout reads.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "megatron/models/common/language_module.h"
#include "megatron/training/checkpoint_files.h"
#include "megatron/training/checkpoint_layout.h"
#include "training/checkpointing/checkpoint_dicts.h"
#include "training/checkpointing/paths.h"
#include "training/checkpointing/torch_dist.h"

namespace megatron::training::detail {
namespace {

// The local experts' part of a layer's name ("mlp.experts.local_experts."), whose number is a stacked axis.
constexpr const char* kStackedExperts = models::common::kLocalExpertsPart + 1;

// Calls put(global name, tensor) for each layer (and expert) of a stacked tensor.
template <typename Put>
void unstack(const std::string& key, const at::Tensor& t, Put&& put) {
  const size_t axes = stacked_axes(key);
  TORCH_CHECK(t.dim() >= static_cast<int64_t>(axes), "[convert_checkpoint] '", key, "' has ", t.dim(),
              " dimensions, its key says ", axes, " of them are stacked layers and experts");
  if (axes == 0) return put(key, t);
  for (int64_t l = 0; l < t.size(0); ++l) {
    if (axes == 1) {
      put(unstacked_name(key, {l}), t[l]);
      continue;
    }
    for (int64_t e = 0; e < t.size(1); ++e) put(unstacked_name(key, {l, e}), t[l][e]);
  }
}

}  // namespace

StackedName stacked_name(const std::string& global, const std::set<std::string>& globals, const Arguments& args) {
  const std::string layers = models::common::kLayersPart;
  StackedName out{global, {}, {}};
  if (global.rfind(layers, 0) != 0) return out;
  const size_t dot = global.find('.', layers.size());
  const int64_t layer = std::stoll(global.substr(layers.size(), dot - layers.size()));
  const bool dense = globals.count(layers + std::to_string(layer) + ".mlp.linear_fc1.weight") > 0;
  std::string rest = fused_layer_name(global.substr(dot + 1), dense);
  out.index.push_back(layer);
  out.counts.push_back(args.num_layers);
  if (const size_t e = rest.find(kStackedExperts); e != std::string::npos) {
    const size_t start = e + std::strlen(kStackedExperts), end = rest.find('.', start);
    out.index.push_back(std::stoll(rest.substr(start, end - start)));
    out.counts.push_back(args.num_experts.value_or(0));
    rest.erase(start, end + 1 - start);
  }
  out.key = layers + rest;
  return out;
}

size_t stacked_axes(const std::string& key) {
  if (key.rfind(models::common::kLayersPart, 0) != 0) return 0;
  return key.find(kStackedExperts) != std::string::npos ? 2 : 1;
}

std::string unstacked_name(const std::string& key, const std::vector<int64_t>& index) {
  if (index.empty()) return key;
  const std::string layers = models::common::kLayersPart;
  std::string rest = key.substr(layers.size());
  if (const size_t e = rest.find(kStackedExperts); e != std::string::npos && index.size() > 1)
    rest.insert(e + std::strlen(kStackedExperts), std::to_string(index[1]) + ".");
  return local_layer_name(layers + std::to_string(index[0]) + "." + rest);
}

FullCheckpoint read_torch_dist_full(const std::string& iter_dir, std::optional<int64_t> iteration) {
  const DcpMetadata md = read_dcp_metadata(iter_dir);
  const bool optimizer = holds_optimizer_state(md);
  std::optional<at::Tensor> step;
  const RankCheckpoint c = read_torch_dist_common(iter_dir, md, optimizer, &step);
  auto whole = [&](const std::string& key) {
    const auto& size = md.tensors.at(key).size;
    return read_dcp_box(iter_dir, md, key, std::vector<int64_t>(size.size(), 0), size);
  };
  FullCheckpoint f;
  f.a = c.args;
  f.iteration = iteration;
  for (const auto& [key, t] : md.tensors)
    if (key.rfind("optimizer.", 0) != 0)
      unstack(key, whole(key), [&](const std::string& n, at::Tensor x) { f.model[n] = x; });
  if (optimizer && c.optimizer) {
    auto states = std::vector<std::pair<std::string, std::string>>(std::begin(kTorchDistOptimizerStates),
                                                                   std::end(kTorchDistOptimizerStates));
    states.emplace_back("main_param", kDistributedMainParamName);
    for (const auto& [ours, theirs] : states) {
      const std::string prefix = "optimizer.state." + theirs + ".";
      for (const auto& [key, t] : md.tensors)
        if (key.rfind(prefix, 0) == 0)
          unstack(key.substr(prefix.size()), whole(key), [&, kind = ours](const std::string& n, at::Tensor x) {
            // The distributed optimizer's copy of an fp32 parameter is the parameter.
            const auto m = f.model.find(n);
            if (kind != "main_param" || m == f.model.end() || m->second.scalar_type() != at::kFloat)
              f.optim[n][kind] = x;
          });
    }
    if (step)
      for (auto& [name, state] : f.optim) state["step"] = *step;
    f.grad_scaler = c.optimizer->grad_scaler;
    f.scheduler = c.optimizer->scheduler;
    f.lr = c.optimizer->lr;
    f.decoupled_lr = c.optimizer->decoupled_lr;
  }
  f.optimizer_unread = c.optimizer_unread;
  if (optimizer && c.optimizer && is_dp_reshardable(md))
    f.optimizer_unread = "[convert_checkpoint] " + iter_dir +
                         " holds Megatron-LM's distributed-optimizer state in its 'dp_reshardable' layout, which a "
                         "resume at its TP and PP sizes reads and convert_checkpoint does not";
  auto embedding = f.model.find("embedding.word_embeddings.weight");
  f.padded_vocab = embedding != f.model.end() ? embedding->second.size(0) : c.padded_vocab_size;
  f.true_vocab = c.true_vocab_size > 0 ? c.true_vocab_size : c.args.vocab_size.value_or(f.padded_vocab);
  f.consumed_train = c.consumed_train_samples;
  f.consumed_valid = c.consumed_valid_samples;
  return f;
}

void write_torch_dist_full(const FullCheckpoint& f, const Arguments& a, const std::string& save) {
  namespace fs = std::filesystem;
  std::set<std::string> globals;
  for (const auto& [name, t] : f.model) globals.insert(name);
  struct Stack {
    std::vector<int64_t> counts;
    std::map<std::vector<int64_t>, at::Tensor> parts;  // by index on the stacked axes
  };
  std::map<std::string, Stack> stacks;
  auto add = [&](const std::string& prefix, const std::string& name, const at::Tensor& t) {
    auto s = stacked_name(name, globals, a);
    Stack& stack = stacks[prefix + s.key];
    stack.counts = s.counts;
    stack.parts[s.index] = t;
  };
  for (const auto& [name, t] : f.model) add("", name, t);
  std::optional<at::Tensor> step;
  for (const auto& [name, state] : f.optim) {
    for (const auto& [kind, t] : state) {
      if (kind == "step") {
        step = t;
        continue;
      }
      const std::string theirs = torch_dist_state_name(kind, a.use_distributed_optimizer);
      TORCH_CHECK(!theirs.empty(), "[convert_checkpoint] optimizer state '", kind, "' of ", name,
                  " has no torch_dist name");
      add("optimizer.state." + theirs + ".", name, t);
    }
    if (a.use_distributed_optimizer && !state.empty() && !state.count("main_param"))
      add(std::string("optimizer.state.") + kDistributedMainParamName + ".", name, f.model.at(name));
  }
  std::vector<DcpItem> items;
  for (auto& [key, stack] : stacks) {
    const at::Tensor first = stack.parts.begin()->second;
    std::vector<int64_t> shape = stack.counts;
    for (int64_t s : first.sizes()) shape.push_back(s);
    at::Tensor whole = first;
    if (!stack.counts.empty()) {
      TORCH_CHECK(static_cast<int64_t>(stack.parts.size()) == dcp_volume(stack.counts), "[convert_checkpoint] '", key,
                  "' has ", stack.parts.size(), " of the ", dcp_volume(stack.counts),
                  " layers (and experts) it stacks");
      whole = at::empty(shape, first.options());
      for (const auto& [index, t] : stack.parts) {
        at::Tensor slot = whole;
        for (int64_t i : index) slot = slot[i];
        slot.copy_(t);
      }
    }
    items.push_back({key, shape, std::vector<int64_t>(shape.size(), 0), whole, {}});
  }

  const std::string final_dir = join(save, iteration_dir_name(f.iteration)), staging = final_dir + ".tmp";
  fs::create_directories(save);
  remove_tree(staging);
  fs::create_directories(staging);
  const DcpMetadata md = write_dcp_file(staging, "__0_0.distcp", items);
  RankCheckpoint c;
  c.args = a;
  c.padded_vocab_size = f.padded_vocab;
  c.true_vocab_size = f.true_vocab;
  c.iteration = f.iteration.value_or(0);
  c.model.emplace_back();
  if (!f.optim.empty())
    c.optimizer = RankCheckpoint::OptimizerState{false, {}, f.lr, f.decoupled_lr, f.grad_scaler, f.scheduler};
  c.consumed_train_samples = f.consumed_train;
  c.consumed_valid_samples = f.consumed_valid;
  write_torch_dist_global(staging, md, c, step);
  publish_checkpoint(save, f.iteration);
}

}  // namespace megatron::training::detail
