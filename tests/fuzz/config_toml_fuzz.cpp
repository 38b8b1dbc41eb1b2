// A --config TOML file, read through the command line's parser with a valid base run.
#include "fuzz_util.h"
#include "megatron/training/arguments.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const std::string path = fuzz::write_file("run.toml", data, size);
  fuzz::expect_clean([&] {
    training::parse_arguments({"--num-layers", "2", "--hidden-size", "8", "--num-attention-heads", "2", "--seq-length",
                               "8", "--micro-batch-size", "1", "--train-iters", "1", "--lr", "1e-3", "--mock-data",
                               "--vocab-size", "16", "--config", path},
                              1);
  });
  return 0;
}
