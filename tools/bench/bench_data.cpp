// Index building and sample fetch speed of GPTDataset on a given .bin/.idx prefix.
//   bench_data --data-path P --seq-length 2048 --num-samples 100000 --micro-batch-size 8
// Prints the index build time and samples/s through build_batch (with and without the [s, s]
// attention mask), single thread.
#include "megatron/datasets/data_iterator.h"
#include "megatron/datasets/gpt_dataset.h"

#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <iostream>

namespace ds = megatron::datasets;

int main(int argc, char** argv) {
  std::string prefix, cache;
  int64_t seq_length = 2048, num_samples = 100000, mbs = 8, batches = 200;
  CLI::App app{"GPTDataset index build and sample fetch benchmark"};
  app.add_option("--data-path", prefix)->required();
  app.add_option("--seq-length", seq_length);
  app.add_option("--num-samples", num_samples);
  app.add_option("--micro-batch-size", mbs);
  app.add_option("--batches", batches);
  app.add_option("--cache-dir", cache, "index cache folder (default: a fresh one under /tmp)");
  CLI11_PARSE(app, argc, argv);
  try {
    using clock = std::chrono::steady_clock;
    auto secs = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
    auto t0 = clock::now();
    auto indexed = std::make_shared<ds::IndexedDataset>(prefix);
    auto low = std::make_shared<ds::IndexedLowLevelDataset>(indexed);
    const double open_s = secs(t0);
    ds::GPTDatasetConfig config;
    config.sequence_length = seq_length;
    config.path_to_cache = cache.empty() ? "/tmp/bench_data_cache_" + std::to_string(::getpid()) : cache;
    t0 = clock::now();
    auto dataset = std::make_shared<ds::GPTDataset>(low, std::make_pair<int64_t, int64_t>(0, low->num_sequences()),
                                                    num_samples, ds::Split::kTrain, config);
    const double build_s = secs(t0);
    std::printf("open: %lld documents, %lld tokens in %.3f s\n", static_cast<long long>(indexed->num_documents()),
                static_cast<long long>(indexed->num_tokens()), open_s);
    std::printf("index build: %lld samples, %lld epochs, %.3f s (%s)\n", static_cast<long long>(dataset->size()),
                static_cast<long long>(dataset->num_epochs()), build_s,
                dataset->loaded_from_cache() ? "cache" : "built + saved");
    for (bool mask : {false, true}) {
      ds::BatchOptions options;
      options.eod_token = 0;
      options.create_attention_mask = mask;
      ds::DataIterator it(dataset, std::make_unique<ds::MegatronPretrainingSampler>(dataset->size(), 0, mbs, 0, 1),
                          options);
      t0 = clock::now();
      int64_t n = 0;
      for (int64_t b = 0; b < batches; ++b) {
        auto batch = it.next();
        if (!batch) break;
        n += batch->at("tokens").size(0);
      }
      const double s = secs(t0);
      std::printf("fetch (attention mask %s): %.0f samples/s, %.1f M tokens/s\n", mask ? "on" : "off", n / s,
                  n * seq_length / s / 1e6);
    }
    if (cache.empty()) std::system(("rm -rf " + config.path_to_cache).c_str());
    return 0;
  } catch (const c10::Error& e) {
    std::cerr << e.what_without_backtrace() << "\n";
  }
  return 1;
}
