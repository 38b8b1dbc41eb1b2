// Temporary folders (deleted at exit) and file surgery for the dataset tests.
#pragma once

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "error_of.h"
#include "temp_dir.h"

namespace megatron::datasets::testing {

inline std::string make_temp_dir() {
  return megatron::testing::make_temp_dir("data_test");
}

inline std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

using megatron::testing::error_of;

}  // namespace megatron::datasets::testing
