// What the reader (indexed_dataset.cpp) and the builder (indexed_dataset_builder.cpp) share about
// the MMIDIDX layout.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

namespace megatron::datasets::detail {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr size_t kHeaderSize = 9 + 8 + 1 + 8 + 8;  // magic, version, dtype, S, D

inline std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace megatron::datasets::detail
