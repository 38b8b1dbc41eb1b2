// pretrain() with pretrain_gpt's callbacks on the first n ranks of the test's world, which is
// how the multi-rank training tests run several layouts in one mpirun job. Ranks outside the
// subgroup return at once with member = false. Layout is the one description of a parallel
// layout those tests share.
#pragma once

#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "distributed_test.h"
#include "megatron/training/gpt_callbacks.h"
#include "megatron/training/training.h"

namespace megatron::testing {

struct SubgroupRun {
  bool member = false;
  training::TrainingResult result;
  std::shared_ptr<comm::ProcessGroup> group;
  std::vector<std::shared_ptr<torch::nn::Module>> built;   // the model chunks pretrain() built
  std::vector<std::map<std::string, at::Tensor>> initial;  // their parameters as built (copies)
};

// A parallel layout: what it sets in the arguments, how many ranks it takes, its name.
struct Layout {
  int tp = 1, pp = 1, dp = 1;
  std::optional<int64_t> layers_per_virtual_stage;
  bool sequence_parallel = false, distributed_optimizer = false;

  int ranks() const { return tp * pp * dp; }
  std::string name() const {
    return "tp" + std::to_string(tp) + "_pp" + std::to_string(pp) + "_dp" + std::to_string(dp) +
           (layers_per_virtual_stage ? "_vp" + std::to_string(*layers_per_virtual_stage) : "") +
           (sequence_parallel ? "_sp" : "") + (distributed_optimizer ? "_distopt" : "");
  }
  void apply(training::Arguments& a) const {
    a.tensor_model_parallel_size = tp;
    a.pipeline_model_parallel_size = pp;
    a.num_layers_per_virtual_pipeline_stage = layers_per_virtual_stage;
    a.sequence_parallel = sequence_parallel;
    a.use_distributed_optimizer = distributed_optimizer;
  }
};

inline SubgroupRun pretrain_on_first_ranks(training::Arguments a, int n, const std::string& name) {
  static int runs = 0;  // group names must be unique in the job
  std::vector<int> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  SubgroupRun run;
  run.group = world()->new_group(ranks, name + "_" + std::to_string(++runs));
  if (!run.group) return run;
  run.member = true;
  a.validate(n);
  auto callbacks = training::gpt_callbacks(training::build_tokenizer(a));
  auto built = std::make_shared<std::vector<std::shared_ptr<torch::nn::Module>>>();
  auto initial = std::make_shared<std::vector<std::map<std::string, at::Tensor>>>();
  auto builder = [callbacks, built, initial](const training::TrainingContext& ctx, bool pre, bool post) {
    auto m = callbacks.model_builder(ctx, pre, post);
    built->push_back(m);
    auto& copy = initial->emplace_back();
    for (const auto& p : m->named_parameters()) copy[p.key()] = p.value().detach().clone();
    return m;
  };
  run.result = training::pretrain(a, builder, callbacks.dataset_builder, callbacks.forward_step, run.group);
  run.built = *built;
  run.initial = *initial;
  return run;
}

// pretrain() in layout l on the first l.ranks() ranks of the world.
inline SubgroupRun pretrain_layout(training::Arguments a, const Layout& l, const std::string& prefix) {
  l.apply(a);
  return pretrain_on_first_ranks(a, l.ranks(), prefix + "_" + l.name());
}

}  // namespace megatron::testing
