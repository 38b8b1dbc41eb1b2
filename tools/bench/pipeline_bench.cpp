// Pipeline bubble: the fraction of a schedule's time a stage waits, measured on every stage and
// averaged, next to the theory in the same run: (p-1)/(m+p-1) for 1F1B and (p-1)/(v*m+p-1) for
// the interleaved schedule with v chunks per stage. Two kinds of stage:
//  - timed: each chunk's forward takes --forward-ms and its backward twice that (sleeping),
//    so the schedule alone is measured, however many cores the ranks share;
//  - gpt: GPT layers on real data, which also reports each stage's peak host memory.
// Launch: mpirun -np P build/bin/pipeline_bench   (P stages)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/nn/module.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

#include "megatron/comm/process_group.h"
#include "megatron/datasets/blended_dataset.h"
#include "megatron/datasets/data_iterator.h"
#include "megatron/logging.h"
#include "megatron/memory.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/pipeline_parallel/schedules.h"

using namespace megatron;
namespace pp = megatron::pipeline_parallel;

namespace {

struct Settings {
  std::vector<int64_t> microbatches = {4, 8, 16};
  double forward_ms = 10;
  int64_t layers_per_chunk = 1, hidden = 256, seq = 128, micro_batch = 2, iters = 3;
  int64_t vocab = 1024;
};

// forward sleeps ms, backward 2 ms: a stage whose compute time is known exactly.
struct Sleep : torch::autograd::Function<Sleep> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            double ms) {
    ctx->saved_data["ms"] = ms;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
    return x + w;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(2 * ctx->saved_data["ms"].toDouble()));
    return {g[0], g[0].sum().reshape({1}), at::Tensor()};
  }
};

struct TimedStage : torch::nn::Module, transformer::MegatronModule {
  TimedStage(std::vector<int64_t> shape, double ms) : shape(std::move(shape)), ms(ms) {
    w = register_parameter("w", at::zeros({1}));
  }
  void set_input_tensor(const at::Tensor& input) override { in = input; }
  at::Tensor forward() { return Sleep::apply(in.defined() ? in : at::zeros(shape), w, ms); }
  std::vector<int64_t> shape;
  double ms;
  at::Tensor w, in;
};

std::pair<at::Tensor, pp::LossFunc> timed_forward_step(datasets::BatchIterator&, torch::nn::Module& m) {
  at::Tensor out = dynamic_cast<TimedStage&>(m).forward();
  return {out, [](const at::Tensor& o) {
            at::Tensor loss = o.mean();
            return std::make_pair(loss, std::map<std::string, at::Tensor>{{"loss", loss.detach()}});
          }};
}

std::pair<at::Tensor, pp::LossFunc> gpt_forward_step(datasets::BatchIterator& it, torch::nn::Module& m) {
  auto batch = it.next();
  TORCH_CHECK(batch, "pipeline_bench: out of samples");
  at::Tensor out =
      dynamic_cast<models::gpt::GPTModelImpl&>(m).forward(batch->at("tokens"), {}, {}, batch->at("labels"));
  at::Tensor mask = batch->at("loss_mask");
  return {out, [mask](const at::Tensor& o) {
            at::Tensor loss = (o * mask).sum() / mask.sum();
            return std::make_pair(loss, std::map<std::string, at::Tensor>{{"lm loss", loss.detach()}});
          }};
}

struct Measured {
  double bubble = 0;          // mean over stages
  int64_t peak_inflight = 0;  // max over stages
  double peak_mib = 0;        // max over stages
  double iteration_ms = 0;    // mean over stages
};

Measured run(const ParallelState& ps, const std::string& kind, int64_t chunks, int64_t m, const Settings& s) {
  const int64_t stages = ps.get_pipeline_model_parallel_world_size();
  std::vector<std::shared_ptr<torch::nn::Module>> modules;
  std::vector<std::unique_ptr<datasets::DataIterator>> iterators;
  datasets::GPTDatasetConfig data;
  data.sequence_length = s.seq;
  auto mock = datasets::build_mock_gpt_datasets(s.vocab, s.vocab - 1, {m * s.micro_batch * (s.iters + 1), 0, 0}, data);
  transformer::TransformerConfig config(s.layers_per_chunk * stages * chunks, s.hidden, 8);
  config.hidden_dropout(0).attention_dropout(0);
  for (int64_t v = 0; v < chunks; ++v) {
    std::optional<int> vr = chunks > 1 ? std::optional<int>(static_cast<int>(v)) : std::nullopt;
    if (kind == "timed")
      modules.push_back(
          std::make_shared<TimedStage>(std::vector<int64_t>{s.seq, s.micro_batch, s.hidden}, s.forward_ms / chunks));
    else
      modules.push_back(
          models::gpt::GPTModel(models::gpt::gpt_model_options_for_rank(ps, config, s.vocab, s.seq, vr)).ptr());
    datasets::BatchOptions batch;
    batch.sequence_length = s.seq;
    iterators.push_back(std::make_unique<datasets::DataIterator>(
        mock[0], std::make_unique<datasets::MegatronPretrainingSampler>(mock[0]->size(), 0, s.micro_batch, 0, 1), batch,
        0));
  }
  std::vector<torch::nn::Module*> model;
  std::vector<datasets::BatchIterator*> its;
  for (size_t i = 0; i < modules.size(); ++i) {
    model.push_back(modules[i].get());
    its.push_back(iterators[i].get());
  }
  pp::ScheduleOptions o;
  o.num_microbatches = m;
  o.seq_length = s.seq;
  o.micro_batch_size = s.micro_batch;
  o.hidden_size = s.hidden;
  auto forward_backward = pp::get_forward_backward_func(ps);
  auto step = kind == "timed" ? pp::ForwardStepFunc(timed_forward_step) : pp::ForwardStepFunc(gpt_forward_step);
  forward_backward(step, its, model, o);  // first run: gradients allocated, caches warm
  HostMemoryTracker tracker;
  double compute = 0, total = 0;
  int64_t inflight = 0;
  for (int64_t i = 0; i < s.iters; ++i) {
    ps.get_world_group().barrier();
    auto r = forward_backward(step, its, model, o);
    compute += r.compute_ms;
    total += r.total_ms;
    inflight = std::max(inflight, r.peak_inflight_microbatches);
  }
  auto values = at::tensor(
      {1.0 - compute / total, static_cast<double>(inflight), tracker.peak_bytes() / 1048576.0, total / s.iters},
      at::kDouble);
  auto sum = values.clone(), max = values.clone();
  ps.get_world_group().all_reduce(sum, comm::ReduceOp::kSum);
  ps.get_world_group().all_reduce(max, comm::ReduceOp::kMax);
  return {sum[0].item<double>() / stages, static_cast<int64_t>(max[1].item<double>()), max[2].item<double>(),
          sum[3].item<double>() / stages};
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"pipeline bubble of 1F1B and interleaved 1F1B, measured against theory"};
  app.add_option("--microbatches", s.microbatches, "numbers of micro-batches to run, e.g. 4,8,16")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--forward-ms", s.forward_ms, "timed stages: forward ms of a whole stage")->capture_default_str();
  app.add_option("--layers-per-chunk", s.layers_per_chunk, "gpt stages: layers per model chunk")->capture_default_str();
  app.add_option("--hidden-size", s.hidden, "gpt stages: hidden size")->capture_default_str();
  app.add_option("--seq-length", s.seq, "sequence length")->capture_default_str();
  app.add_option("--micro-batch-size", s.micro_batch, "micro-batch size")->capture_default_str();
  app.add_option("--iters", s.iters, "measured iterations per point")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    at::set_num_threads(1);  // one core per stage, as one GPU per stage
    auto env = comm::LauncherEnv::from_environment();
    init_logging({env.rank, env.world_size, "warn"});
    auto world = comm::init_distributed(comm::LauncherEnv::from_environment());
    const int p = world->size();
    TORCH_CHECK(p > 1, "pipeline_bench: launch with mpirun -np P, P > 1 stages");
    const bool root = world->rank() == 0;
    if (root) {
      std::printf(
          "# %d pipeline stages, %u cores on this machine; timed stages: forward %.0f ms, backward %.0f ms "
          "per stage and micro-batch\n",
          p, std::thread::hardware_concurrency(), s.forward_ms, 2 * s.forward_ms);
      std::printf("%-6s %-12s %4s %9s %9s %7s %9s %9s %9s\n", "stage", "schedule", "m", "measured", "theory", "ratio",
                  "in-flight", "peak MiB", "ms/iter");
    }
    for (const std::string kind : {"timed", "gpt"}) {
      for (int64_t chunks : {1, 2}) {
        auto ps =
            ParallelState::initialize_model_parallel(world, 1, p, chunks > 1 ? std::optional<int>(2) : std::nullopt);
        for (int64_t m : s.microbatches) {
          if (chunks > 1 && m % p != 0) continue;
          Measured r = run(ps, kind, chunks, m, s);
          const double theory = (p - 1.0) / (chunks * m + p - 1.0);
          if (root)
            std::printf("%-6s %-12s %4lld %9.3f %9.3f %7.2f %9lld %9s %9.1f\n", kind.c_str(),
                        chunks > 1 ? "interleaved" : "1F1B", static_cast<long long>(m), r.bubble, theory,
                        r.bubble / theory, static_cast<long long>(r.peak_inflight),
                        kind == "gpt" ? std::to_string(static_cast<int64_t>(r.peak_mib + 0.5)).c_str() : "-",
                        r.iteration_ms);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_bench: %s\n", e.what());
    comm::abort_job(1);
    return 1;
  }
  return 0;
}
