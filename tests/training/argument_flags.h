// What the argument tests share: the smallest flag set that parses, and the one error line a
// parse of some flags gives.
#pragma once

#include <string>
#include <vector>

#include "error_of.h"
#include "megatron/training/arguments.h"

namespace megatron::training::test_flags {

inline std::vector<std::string> base() {
  return {"--num-layers",
          "2",
          "--hidden-size",
          "64",
          "--num-attention-heads",
          "4",
          "--seq-length",
          "32",
          "--micro-batch-size",
          "2",
          "--train-iters",
          "10",
          "--lr",
          "1e-3",
          "--mock-data",
          "--vocab-size",
          "100"};
}

inline std::string error_of(std::vector<std::string> args, int64_t world = 1) {
  return testing::error_of([&] { parse_arguments(args, world); });
}

}  // namespace megatron::training::test_flags
