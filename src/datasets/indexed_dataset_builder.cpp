// The MMIDIDX writer: tokens streamed into a temporary .bin, the index kept in memory, both
// fsynced and renamed on finalize().
#include <c10/util/Exception.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "indexed_format.h"
#include "megatron/datasets/indexed_dataset.h"

namespace megatron::datasets {
namespace {

using detail::errno_text;
using detail::kHeaderSize;
using detail::kMagic;
constexpr size_t kWriteBuffer = 1 << 22;

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    TORCH_CHECK(w > 0, "[indexed_dataset] ", path, ": write failed: ", errno_text());
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

IndexedDatasetBuilder::IndexedDatasetBuilder(std::string bin_path, DType dtype)
    : bin_path_(std::move(bin_path)), dtype_(dtype) {
  TORCH_CHECK(dtype == DType::kUInt8 || dtype == DType::kInt8 || dtype == DType::kInt16 || dtype == DType::kUInt16 ||
                  dtype == DType::kInt32 || dtype == DType::kInt64,
              "[indexed_dataset] ", bin_path_, ": token files need an integer dtype, got ", dtype_name(dtype));
  bin_tmp_path_ = bin_path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(bin_tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TORCH_CHECK(fd_ >= 0, "[indexed_dataset] ", bin_tmp_path_, ": cannot create: ", errno_text());
  buffer_.reserve(kWriteBuffer);
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (fd_ >= 0) ::close(fd_);
  if (!finalized_) {
    ::unlink(bin_tmp_path_.c_str());
    if (!idx_tmp_path_.empty()) ::unlink(idx_tmp_path_.c_str());
  }
}

void IndexedDatasetBuilder::flush_buffer() {
  if (buffer_.empty()) return;
  write_all(fd_, buffer_.data(), buffer_.size(), bin_tmp_path_);
  buffer_.clear();
}

template <typename T>
void IndexedDatasetBuilder::write_tokens(const T* tokens, int64_t n) {
  TORCH_CHECK(!finalized_, "[indexed_dataset] ", bin_path_, ": builder already finalized");
  TORCH_CHECK(n <= std::numeric_limits<int32_t>::max(), "[indexed_dataset] ", bin_path_, ": a sequence of ", n,
              " tokens does not fit the int32 length field");
  int64_t lo = 0, hi = 0;
  switch (dtype_) {
    case DType::kUInt8:
      lo = 0;
      hi = 255;
      break;
    case DType::kInt8:
      lo = -128;
      hi = 127;
      break;
    case DType::kInt16:
      lo = -32768;
      hi = 32767;
      break;
    case DType::kUInt16:
      lo = 0;
      hi = 65535;
      break;
    case DType::kInt32:
      lo = std::numeric_limits<int32_t>::min();
      hi = std::numeric_limits<int32_t>::max();
      break;
    default: lo = std::numeric_limits<int64_t>::min(); hi = std::numeric_limits<int64_t>::max();
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(tokens[i]);
    TORCH_CHECK(v >= lo && v <= hi, "[indexed_dataset] ", bin_path_, ": token id ", v, " (position ", i,
                " of sequence ", lengths_.size(), ") does not fit ", dtype_name(dtype_), " [", lo, ", ", hi,
                "]; use a dtype that holds the vocabulary (int32 for vocabularies >= 65500)");
  }
  const size_t item = dtype_size(dtype_);
  if (buffer_.size() + n * item > kWriteBuffer) flush_buffer();
  const size_t start = buffer_.size();
  buffer_.resize(start + n * item);
  uint8_t* out = buffer_.data() + start;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(tokens[i]);
    switch (dtype_) {
      case DType::kUInt8:
      case DType::kInt8: out[i] = static_cast<uint8_t>(v); break;
      case DType::kUInt16:
      case DType::kInt16: {
        uint16_t w = static_cast<uint16_t>(v);
        std::memcpy(out + 2 * i, &w, 2);
        break;
      }
      case DType::kInt32: {
        int32_t w = static_cast<int32_t>(v);
        std::memcpy(out + 4 * i, &w, 4);
        break;
      }
      default: std::memcpy(out + 8 * i, &v, 8);
    }
  }
  bytes_written_ += static_cast<int64_t>(n * item);
}

void IndexedDatasetBuilder::add_item(const int32_t* tokens, int64_t n) {
  write_tokens(tokens, n);
  lengths_.push_back(static_cast<int32_t>(n));
}

void IndexedDatasetBuilder::add_item(const int64_t* tokens, int64_t n) {
  write_tokens(tokens, n);
  lengths_.push_back(static_cast<int32_t>(n));
}

void IndexedDatasetBuilder::end_document() {
  document_indices_.push_back(static_cast<int64_t>(lengths_.size()));
}

void IndexedDatasetBuilder::add_document(const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths) {
  int64_t total = 0;
  for (int64_t l : lengths) {
    TORCH_CHECK(l >= 0, "[indexed_dataset] ", bin_path_, ": negative sequence length ", l);
    total += l;
  }
  TORCH_CHECK(total == static_cast<int64_t>(tokens.size()), "[indexed_dataset] ", bin_path_,
              ": add_document expected the lengths to sum to the ", tokens.size(), " tokens, found ", total);
  write_tokens(tokens.data(), static_cast<int64_t>(tokens.size()));
  for (int64_t l : lengths) lengths_.push_back(static_cast<int32_t>(l));
  end_document();
}

void IndexedDatasetBuilder::add_index(const std::string& path_prefix) {
  TORCH_CHECK(!finalized_, "[indexed_dataset] ", bin_path_, ": builder already finalized");
  IndexedDataset other(path_prefix);
  TORCH_CHECK(other.dtype() == dtype_, "[indexed_dataset] ", idx_path(path_prefix), ": expected dtype ",
              dtype_name(dtype_), " to merge into ", bin_path_, ", found ", dtype_name(other.dtype()));
  const int64_t offset = static_cast<int64_t>(lengths_.size());
  const auto lengths = other.sequence_lengths();
  lengths_.insert(lengths_.end(), lengths.begin(), lengths.end());
  for (int64_t k = 1; k < other.num_document_indices(); ++k) {
    document_indices_.push_back(offset + other.document_index(k));
  }
  flush_buffer();
  const int64_t bytes = other.num_tokens() * static_cast<int64_t>(dtype_size(dtype_));
  if (bytes > 0) {
    write_all(fd_, other.get(0, 0, 0).data, static_cast<size_t>(bytes), bin_tmp_path_);
  }
  bytes_written_ += bytes;
}

void IndexedDatasetBuilder::finalize(const std::string& idx_path) {
  TORCH_CHECK(!finalized_, "[indexed_dataset] ", bin_path_, ": builder already finalized");
  flush_buffer();
  TORCH_CHECK(::fsync(fd_) == 0, "[indexed_dataset] ", bin_tmp_path_, ": fsync failed: ", errno_text());
  ::close(fd_);
  fd_ = -1;

  idx_tmp_path_ = idx_path + ".tmp." + std::to_string(::getpid());
  int ifd = ::open(idx_tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TORCH_CHECK(ifd >= 0, "[indexed_dataset] ", idx_tmp_path_, ": cannot create: ", errno_text());
  const uint64_t version = 1, s = lengths_.size(), d = document_indices_.size();
  const uint8_t code = static_cast<uint8_t>(dtype_);
  std::vector<uint8_t> header(kHeaderSize);
  std::memcpy(header.data(), kMagic, 9);
  std::memcpy(header.data() + 9, &version, 8);
  header[17] = code;
  std::memcpy(header.data() + 18, &s, 8);
  std::memcpy(header.data() + 26, &d, 8);
  std::vector<int64_t> pointers(lengths_.size());
  int64_t ptr = 0;
  const int64_t item = static_cast<int64_t>(dtype_size(dtype_));
  for (size_t i = 0; i < lengths_.size(); ++i) {
    pointers[i] = ptr;
    ptr += static_cast<int64_t>(lengths_[i]) * item;
  }
  TORCH_INTERNAL_ASSERT(ptr == bytes_written_, "index and data disagree: ", ptr, " vs ", bytes_written_);
  try {
    write_all(ifd, header.data(), header.size(), idx_tmp_path_);
    write_all(ifd, lengths_.data(), lengths_.size() * 4, idx_tmp_path_);
    write_all(ifd, pointers.data(), pointers.size() * 8, idx_tmp_path_);
    write_all(ifd, document_indices_.data(), document_indices_.size() * 8, idx_tmp_path_);
    TORCH_CHECK(::fsync(ifd) == 0, "[indexed_dataset] ", idx_tmp_path_, ": fsync failed: ", errno_text());
  } catch (...) {
    ::close(ifd);
    throw;
  }
  ::close(ifd);
  // The .bin first: a reader that finds the new .idx always finds its .bin.
  TORCH_CHECK(::rename(bin_tmp_path_.c_str(), bin_path_.c_str()) == 0, "[indexed_dataset] ", bin_path_,
              ": rename from ", bin_tmp_path_, " failed: ", errno_text());
  TORCH_CHECK(::rename(idx_tmp_path_.c_str(), idx_path.c_str()) == 0, "[indexed_dataset] ", idx_path, ": rename from ",
              idx_tmp_path_, " failed: ", errno_text());
  finalized_ = true;
}

}  // namespace megatron::datasets
