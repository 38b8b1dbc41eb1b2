// Minimal .npy (format 1.0) reading and writing for the dataset index caches, so that numpy
// can open them: C-order, little-endian integer arrays of rank 1 or 2.
#pragma once

#include "megatron/export.h"

#include "megatron/datasets/indexed_dataset.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megatron::datasets {

struct MEGATRON_API NpyArray {
  std::string descr;           // "<i2", "<i4", "<i8", "<u4", ...
  std::vector<int64_t> shape;  // rank 1 or 2
  std::vector<uint8_t> data;   // raw little-endian values
  int64_t numel() const;
  // Values converted to int64 (integer descrs only).
  std::vector<int64_t> to_int64() const;
};

// Writes to "{path}.tmp.{pid}" and renames, so a reader never sees a partial file.
MEGATRON_API void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                            const void* data, size_t nbytes);
template <typename T>
MEGATRON_API void write_npy(const std::string& path, const std::vector<T>& values, std::vector<int64_t> shape = {});

MEGATRON_API NpyArray read_npy(const std::string& path);

// The same file memory-mapped: its header parsed and the data left in place. The data offset
// of a .npy is a multiple of 16 (64 in files written here), so the values are aligned.
struct MEGATRON_API MappedNpy {
  std::shared_ptr<const MappedFile> file;
  std::string descr;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  int64_t numel() const;
};
MEGATRON_API MappedNpy map_npy(const std::string& path);

}  // namespace megatron::datasets
