// Forward + backward of a GPT-2-124M-shaped GPTModel (12 layers, hidden 768, 12 heads, vocab
// 50257 -> 50304, seq 256, micro-batch 1, fp32, CPU by default), next to the plain PyTorch
// reference (tests/python/gpt_reference.py via tools/bench/gpt_bench_reference.py) measured in
// the same run on the same shape and thread count, in alternating rounds. Prints the median and
// minimum ms/step of both, their ratios, and the page faults per step of each. The model runs with
// the CPU allocator cache that pretrain() installs (--no-allocator-cache: without it).
//   gpt_bench [--rounds 3] [--steps 3] [--warmup 1] [--layers 12 --hidden 768 --heads 12 --seq 256
//             --batch 1] [--threads N] [--python PATH] [--no-reference] [--no-allocator-cache]
#include <ATen/Parallel.h>
#include <torch/nn/module.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "megatron/memory.h"
#include "megatron/models/gpt/gpt_model.h"

#ifndef MEGATRON_SOURCE_DIR
#define MEGATRON_SOURCE_DIR "."
#endif

namespace tr = megatron::transformer;
using megatron::models::gpt::GPTModel;
using megatron::models::gpt::GPTModelOptions;

namespace {

int64_t minor_page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct ReferenceRun {
  std::vector<double> ms;
  std::vector<double> faults;
};

ReferenceRun run_reference(const std::string& python, const std::map<std::string, std::string>& a,
                           int64_t padded_vocab) {
  std::string cmd = python + " " + MEGATRON_SOURCE_DIR "/tools/bench/gpt_bench_reference.py";
  for (const char* k : {"layers", "hidden", "heads", "seq", "batch", "steps", "warmup", "threads"})
    cmd += std::string(" --") + k + " " + a.at(k);
  cmd += " --vocab " + std::to_string(padded_vocab) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  TORCH_CHECK(pipe, "[gpt_bench] cannot run ", cmd);
  char line[4096];
  ReferenceRun run;
  std::string output;
  while (fgets(line, sizeof(line), pipe)) {
    output += line;
    double ms = -1, faults = -1;
    if (std::sscanf(line, "ms/step %lf faults %lf", &ms, &faults) == 2) {
      run.ms.push_back(ms);
      run.faults.push_back(faults);
    }
  }
  const int rc = pclose(pipe);
  TORCH_CHECK(rc == 0 && !run.ms.empty(), "[gpt_bench] the Python reference failed (", cmd, "):\n", output);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::map<std::string, std::string> a{{"rounds", "3"},   {"steps", "3"},
                                         {"warmup", "1"},   {"layers", "12"},
                                         {"hidden", "768"}, {"heads", "12"},
                                         {"seq", "256"},    {"batch", "1"},
                                         {"threads", "0"},  {"python", MEGATRON_SOURCE_DIR "/.venv/bin/python"}};
    bool reference = true, allocator_cache = true;
    for (int i = 1; i < argc; ++i) {
      std::string key = argv[i];
      if (key == "--no-reference" || key == "--no-allocator-cache") {
        (key == "--no-reference" ? reference : allocator_cache) = false;
        continue;
      }
      TORCH_CHECK(key.rfind("--", 0) == 0 && a.count(key.substr(2)) && i + 1 < argc,
                  "[gpt_bench] unknown option or missing value: ", key);
      a[key.substr(2)] = argv[++i];
    }
    auto i64 = [&](const char* k) { return std::stoll(a.at(k)); };
    if (i64("threads") > 0) at::set_num_threads(static_cast<int>(i64("threads")));
    a["threads"] = std::to_string(at::get_num_threads());
    if (allocator_cache) megatron::enable_cpu_allocator_cache();

    auto cfg =
        tr::TransformerConfig(i64("layers"), i64("hidden"), i64("heads")).hidden_dropout(0.0).attention_dropout(0.0);
    GPTModel model(GPTModelOptions(cfg, 50257, 1024));
    model->train();
    const int64_t b = i64("batch"), s = i64("seq");
    at::manual_seed(0);
    at::Tensor ids = at::randint(50257, {b, s + 1}, at::kLong);
    at::Tensor x = ids.narrow(1, 0, s).contiguous(), y = ids.narrow(1, 1, s).contiguous();

    // Rounds alternate between the reference (a child process) and this model, so that load
    // from other processes on the machine falls on both alike.
    std::vector<double> times, ref_times, faults, ref_faults;
    const int64_t warmup = i64("warmup"), steps = i64("steps");
    for (int64_t round = 0; round < i64("rounds"); ++round) {
      if (reference) {
        auto r = run_reference(a.at("python"), a, model->padded_vocab_size());
        ref_times.insert(ref_times.end(), r.ms.begin(), r.ms.end());
        ref_faults.insert(ref_faults.end(), r.faults.begin(), r.faults.end());
      }
      for (int64_t step = 0; step < warmup + steps; ++step) {
        for (auto& p : model->parameters()) p.mutable_grad().reset();
        const int64_t f0 = minor_page_faults();
        auto t0 = std::chrono::steady_clock::now();
        model->forward(x, {}, {}, y).mean().backward();
        auto t1 = std::chrono::steady_clock::now();
        if (step >= warmup) {
          times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          faults.push_back(static_cast<double>(minor_page_faults() - f0));
        }
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    auto minimum = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    const double ms = median(times);
    int64_t n_params = 0;
    for (const auto& p : model->parameters()) n_params += p.numel();
    std::printf(
        "gpt_bench: %lld layers, hidden %lld, %lld heads, seq %lld, batch %lld, vocab %lld, "
        "%.1fM parameters, fp32 CPU, %d threads, %lld rounds x %lld steps\n",
        (long long)i64("layers"), (long long)i64("hidden"), (long long)i64("heads"), (long long)s, (long long)b,
        (long long)model->padded_vocab_size(), n_params / 1e6, at::get_num_threads(), (long long)i64("rounds"),
        (long long)steps);
    std::printf("megatron-cpp       fwd+bwd median %9.2f ms/step  (min %9.2f)  %8.0f page faults/step%s\n", ms,
                minimum(times), median(faults), allocator_cache ? "" : " (no allocator cache)");
    if (reference) {
      const double ref_ms = median(ref_times);
      std::printf("pytorch reference  fwd+bwd median %9.2f ms/step  (min %9.2f)  %8.0f page faults/step\n", ref_ms,
                  minimum(ref_times), median(ref_faults));
      std::printf("ratio megatron-cpp / reference = %.3f (median), %.3f (min)\n", ms / ref_ms,
                  minimum(times) / minimum(ref_times));
    }
    return 0;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "%s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
  }
  return 1;
}
