// Pretrain GPT: Megatron-LM's pretrain_gpt.py in C++. This file only says how to build the
// model and the datasets and how one micro-batch goes through the model; pretrain() does the rest.
// The steps themselves are the library's (megatron/training/gpt_callbacks.h), so that the Python
// package trains with the same ones.
//   mpirun -np 2 build/bin/pretrain_gpt --num-layers 2 --hidden-size 64 ... (see --help)
// The tests that include this file for its callbacks (tests/training, tests/pipeline_parallel)
// also use the model, data and tokenizer headers it includes.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "megatron/comm/process_group.h"
#include "megatron/datasets/blended_dataset.h"
#include "megatron/logging.h"
#include "megatron/models/gpt/gpt_model.h"
#include "megatron/program.h"
#include "megatron/tokenizer/tokenizer.h"
#include "megatron/training/config.h"
#include "megatron/training/gpt_callbacks.h"
#include "megatron/training/training.h"

using namespace megatron;
using training::TrainingContext;

namespace {

std::unique_ptr<tokenizer::Tokenizer> g_tokenizer;  // built once from the flags, as in Megatron-LM

// Megatron's model_provider: the GPT model of this stage (or model chunk).
std::shared_ptr<torch::nn::Module> model_builder(const TrainingContext& ctx, bool pre_process, bool post_process) {
  return training::gpt_model_provider(ctx, pre_process, post_process, g_tokenizer->vocab_size());
}

// Megatron's train_valid_test_datasets_provider: GPT datasets from --data-path, or mock data.
training::Datasets dataset_builder(const TrainingContext& ctx, const std::array<int64_t, 3>& num_samples) {
  return training::gpt_datasets_provider(ctx, num_samples, *g_tokenizer);
}

// One micro-batch: get_batch, the model's per-token loss, and loss_func (masked mean).
std::pair<at::Tensor, training::LossFunc> forward_step(datasets::BatchIterator& data_iterator,
                                                       torch::nn::Module& model) {
  return training::gpt_forward_step(data_iterator, model);
}

}  // namespace

#ifndef PRETRAIN_GPT_NO_MAIN  // tests/training include this file for its callbacks
int main(int argc, char** argv) {
  // MKL otherwise picks GEMM thread counts dynamically (more so on a busy machine), which changes
  // float sums between runs and breaks bit-identical resumes. It reads MKL_DYNAMIC before main
  // runs, so the program starts itself again with it set (a value already set is kept).
  if (!std::getenv("MKL_DYNAMIC")) {
    ::setenv("MKL_DYNAMIC", "FALSE", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: carry on as we are
  }
  program::install_terminate_handler("pretrain_gpt");
  // --check-args FLAGS...: whether this launch line would start, for a job of the launcher's
  // world size (WORLD_SIZE=N to ask for another), without starting it.
  std::vector<std::string> words(argv + 1, argv + argc);
  if (const auto it = std::find(words.begin(), words.end(), "--check-args"); it != words.end()) {
    words.erase(it);
    return program::run("pretrain_gpt", [&] {
      int64_t world_size = 0;
      if (const char* ws = std::getenv("WORLD_SIZE")) {
        char* end = nullptr;
        world_size = std::strtoll(ws, &end, 10);
        TORCH_CHECK(*ws && !*end && world_size > 0, "[arguments] --check-args: WORLD_SIZE must be a positive ",
                    "number of ranks, got '", ws, "'");
      } else {
        world_size = comm::LauncherEnv::from_environment().world_size;
      }
      return training::check_arguments(words, world_size, std::cout) ? 0 : program::kUsageError;
    });
  }
  comm::LauncherEnv env;
  std::optional<training::Arguments> args;
  try {
    env = comm::LauncherEnv::from_environment();
    init_logging({env.rank, env.world_size, ""});
    args = training::parse_arguments(words, env.world_size);
    if (!args) return 0;  // --help
    g_tokenizer = training::build_tokenizer(*args);
  } catch (...) {
    // The same on every rank: say it once.
    if (env.rank == 0) std::fprintf(stderr, "pretrain_gpt: error: %s\n", program::current_error_message().c_str());
    return program::kUsageError;
  }
  try {
    training::pretrain(*args, model_builder, dataset_builder, forward_step);
  } catch (...) {
    const int code = program::exit_code_of_current_error();
    // Every rank finds a usage error at once (ranks launched with different flags): say it once.
    if (code != program::kUsageError || env.rank == 0)
      std::fprintf(stderr, "pretrain_gpt: error: [rank %d] %s\n", env.rank, program::current_error_message().c_str());
    if (code != program::kUsageError) comm::abort_job(code);
    return code;
  }
  return 0;
}
#endif  // PRETRAIN_GPT_NO_MAIN
