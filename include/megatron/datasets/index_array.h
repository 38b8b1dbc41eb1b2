// A read-only 1-D array that either owns its values or views them in a memory-mapped file, so
// that index caches loaded by every rank of a node share one copy in the page cache.
#pragma once

#include "megatron/datasets/indexed_dataset.h"

#include <cstddef>
#include <memory>
#include <vector>

namespace megatron::datasets {

template <typename T>
class IndexArray {
 public:
  IndexArray() = default;
  explicit IndexArray(std::vector<T> values) : owned_(std::move(values)), data_(owned_.data()), size_(owned_.size()) {}
  // View of size values at data, which lives inside file (kept alive here).
  IndexArray(std::shared_ptr<const MappedFile> file, const T* data, size_t size)
      : file_(std::move(file)), data_(data), size_(size) {}
  // Moving keeps the vector's buffer, so data_ stays valid; copies would not.
  IndexArray(IndexArray&&) noexcept = default;
  IndexArray& operator=(IndexArray&&) noexcept = default;
  IndexArray(const IndexArray&) = delete;
  IndexArray& operator=(const IndexArray&) = delete;

  const T* data() const { return data_; }
  size_t size() const { return size_; }
  const T& operator[](size_t i) const { return data_[i]; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  bool mapped() const { return file_ != nullptr; }
  std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

 private:
  std::vector<T> owned_;
  std::shared_ptr<const MappedFile> file_;
  const T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace megatron::datasets
