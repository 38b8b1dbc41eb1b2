#include "megatron/datasets/indexed_dataset.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "indexed_format.h"
#include "mapping_faults.h"

namespace megatron::datasets {
namespace {

using detail::errno_text;
using detail::kHeaderSize;
using detail::kMagic;

template <typename T>
T read_le(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));  // x86/ARM hosts are little endian, as the format
  return value;
}

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

template <typename T>
int64_t value_at(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(data) + i * sizeof(T), sizeof(T));
  return static_cast<int64_t>(v);
}

template <typename T>
void convert(const void* data, int64_t n, int64_t* out) {
  const T* src = static_cast<const T*>(data);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(src[i]);
}

}  // namespace

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
    case DType::kInt8: return 1;
    case DType::kInt16:
    case DType::kUInt16: return 2;
    case DType::kInt32:
    case DType::kFloat32: return 4;
    case DType::kInt64:
    case DType::kFloat64: return 8;
  }
  TORCH_CHECK(false, "[indexed_dataset] unknown dtype code ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat64: return "float64";
    case DType::kFloat32: return "float32";
    case DType::kUInt16: return "uint16";
  }
  return "unknown";
}

bool is_valid_dtype_code(uint8_t code) {
  return code >= 1 && code <= 8;
}

DType optimal_dtype(int64_t vocab_size) {
  return vocab_size < 65500 ? DType::kUInt16 : DType::kInt32;
}

std::string idx_path(const std::string& path_prefix) {
  return path_prefix + ".idx";
}
std::string bin_path(const std::string& path_prefix) {
  return path_prefix + ".bin";
}

bool indexed_dataset_exists(const std::string& path_prefix) {
  struct stat st;
  return ::stat(idx_path(path_prefix).c_str(), &st) == 0 && ::stat(bin_path(path_prefix).c_str(), &st) == 0;
}

int64_t TokenSpan::operator[](int64_t i) const {
  switch (dtype) {
    case DType::kUInt8: return value_at<uint8_t>(data, i);
    case DType::kInt8: return value_at<int8_t>(data, i);
    case DType::kInt16: return value_at<int16_t>(data, i);
    case DType::kUInt16: return value_at<uint16_t>(data, i);
    case DType::kInt32: return value_at<int32_t>(data, i);
    case DType::kInt64: return value_at<int64_t>(data, i);
    default: TORCH_CHECK(false, "[indexed_dataset] token dtype ", dtype_name(dtype), " is not an integer type");
  }
}

void TokenSpan::copy_to(int64_t* out) const {
  switch (dtype) {
    case DType::kUInt8: return convert<uint8_t>(data, size, out);
    case DType::kInt8: return convert<int8_t>(data, size, out);
    case DType::kInt16: return convert<int16_t>(data, size, out);
    case DType::kUInt16: return convert<uint16_t>(data, size, out);
    case DType::kInt32: return convert<int32_t>(data, size, out);
    case DType::kInt64: return convert<int64_t>(data, size, out);
    default: TORCH_CHECK(false, "[indexed_dataset] token dtype ", dtype_name(dtype), " is not an integer type");
  }
}

std::vector<int64_t> TokenSpan::to_vector() const {
  std::vector<int64_t> out(static_cast<size_t>(size));
  copy_to(out.data());
  return out;
}

MappedFile::MappedFile(const std::string& path, bool map) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TORCH_CHECK(fd >= 0, "[indexed_dataset] ", path, ": cannot open: ", errno_text());
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    TORCH_CHECK(false, "[indexed_dataset] ", path, ": cannot stat: ", errno_text());
  }
  if (!S_ISREG(st.st_mode)) {  // a folder maps as nothing; a device or pipe cannot be mapped
    ::close(fd);
    TORCH_CHECK(false, "[indexed_dataset] ", path, ": is not a regular file (a folder, device or pipe?)");
  }
  size_ = static_cast<size_t>(st.st_size);
  mtime_ns_ = mtime_ns(st);
  inode_ = st.st_ino;
  if (!map) {
    fd_ = fd;
    return;
  }
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      TORCH_CHECK(false, "[indexed_dataset] ", path, ": mmap failed: ", errno_text());
    }
    data_ = static_cast<const uint8_t*>(p);
    fault_slot_ = detail::register_mapping(data_, size_, path_);
  }
  ::close(fd);  // the mapping stays valid
}

MappedFile::~MappedFile() {
  if (fd_ >= 0) ::close(fd_);
  detail::unregister_mapping(fault_slot_);
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::read_at(int64_t offset, size_t n, void* out) const {
  TORCH_CHECK(offset >= 0 && static_cast<size_t>(offset) + n <= size_, "[indexed_dataset] ", path_, ": bytes [", offset,
              ", ", static_cast<size_t>(offset) + n, ") lie outside the ", size_, "-byte file");
  if (mapped()) {
    if (n > 0) std::memcpy(out, data_ + offset, n);
    return;
  }
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, p, n, offset);
    if (r < 0 && errno == EINTR) continue;
    TORCH_CHECK(r >= 0, "[indexed_dataset] ", path_, ": read at byte ", offset, " failed: ", errno_text());
    TORCH_CHECK(r > 0, "[indexed_dataset] ", path_, ": the file ends at byte ", offset,
                ", before the bytes the index points to (truncated after it was opened?)");
    p += r, offset += r, n -= static_cast<size_t>(r);
  }
}

bool MappedFile::changed_on_disk() const {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) return true;
  return static_cast<size_t>(st.st_size) != size_ || mtime_ns(st) != mtime_ns_ || st.st_ino != inode_;
}

// Checks on open, each failing with the file and what was wrong: both files present; magic,
// version 1, a known dtype code; .idx size equal to what S and D imply (optionally plus S mode
// bytes); lengths >= 0; pointers increasing by length * itemsize and inside the .bin; .bin size
// equal to the token bytes; document indices starting at 0, non-decreasing, ending at S.
IndexedDataset::IndexedDataset(std::string path_prefix, bool mmap_bin_files) : path_prefix_(std::move(path_prefix)) {
  const std::string ipath = idx_path(path_prefix_);
  const std::string bpath = bin_path(path_prefix_);
  struct stat st;
  TORCH_CHECK(::stat(ipath.c_str(), &st) == 0, "[indexed_dataset] ", ipath,
              ": index file not found (expected {prefix}.idx next to {prefix}.bin for prefix '", path_prefix_, "')");
  TORCH_CHECK(::stat(bpath.c_str(), &st) == 0, "[indexed_dataset] ", bpath,
              ": data file not found (expected {prefix}.bin next to {prefix}.idx for prefix '", path_prefix_, "')");
  idx_ = std::make_shared<MappedFile>(ipath);
  bin_ = std::make_shared<MappedFile>(bpath, mmap_bin_files);

  const uint8_t* p = idx_->data();
  const size_t isize = idx_->size();
  TORCH_CHECK(isize >= kHeaderSize, "[indexed_dataset] ", ipath, ": expected at least ", kHeaderSize,
              " header bytes, found a file of ", isize, " bytes (truncated?)");
  TORCH_CHECK(std::memcmp(p, kMagic, 9) == 0, "[indexed_dataset] ", ipath,
              ": expected the magic \"MMIDIDX\\0\\0\", found other bytes (not a Megatron "
              "MMIDIDX index, or a legacy/lazy format)");
  const uint64_t version = read_le<uint64_t>(p + 9);
  TORCH_CHECK(version == 1, "[indexed_dataset] ", ipath, ": expected version 1, found ", version);
  const uint8_t code = p[17];
  TORCH_CHECK(is_valid_dtype_code(code), "[indexed_dataset] ", ipath, ": expected a dtype code in 1..8, found ",
              static_cast<int>(code));
  dtype_ = static_cast<DType>(code);
  const uint64_t s = read_le<uint64_t>(p + 18);
  const uint64_t d = read_le<uint64_t>(p + 26);
  // Guard the size arithmetic against absurd counts from a corrupted header.
  TORCH_CHECK(s <= isize && d <= isize, "[indexed_dataset] ", ipath, ": header claims ", s, " sequences and ", d,
              " document indices, more than a ", isize, "-byte index can hold");
  const uint64_t expected = kHeaderSize + 4 * s + 8 * s + 8 * d;
  TORCH_CHECK(isize == expected || isize == expected + s, "[indexed_dataset] ", ipath, ": expected ", expected,
              " bytes for ", s, " sequences and ", d, " document indices, found ", isize, " bytes");
  TORCH_CHECK(d >= 1, "[indexed_dataset] ", ipath, ": expected at least one document index (the leading 0), found 0");
  num_sequences_ = static_cast<int64_t>(s);
  num_document_indices_ = static_cast<int64_t>(d);
  // The arrays sit at 34 + ... bytes: not naturally aligned, which x86/ARM64 load fine.
  lengths_ = p + kHeaderSize;
  pointers_ = p + kHeaderSize + 4 * s;
  document_indices_ = p + kHeaderSize + 12 * s;
  if (isize == expected + s && s > 0) modes_ = reinterpret_cast<const int8_t*>(p + expected);

  const int64_t item = static_cast<int64_t>(dtype_size(dtype_));
  const int64_t bsize = static_cast<int64_t>(bin_->size());
  int64_t next_pointer = 0;
  for (int64_t i = 0; i < num_sequences_; ++i) {
    const int64_t len = read_le<int32_t>(p + kHeaderSize + 4 * i);
    const int64_t ptr = read_le<int64_t>(p + kHeaderSize + 4 * s + 8 * i);
    TORCH_CHECK(len >= 0, "[indexed_dataset] ", ipath, ": sequence ", i, " has negative length ", len);
    TORCH_CHECK(ptr == next_pointer, "[indexed_dataset] ", ipath, ": sequence ", i, " expected to start at byte ",
                next_pointer, " (previous pointer + length * ", item, "), found ", ptr);
    next_pointer = ptr + len * item;
    TORCH_CHECK(next_pointer <= bsize, "[indexed_dataset] ", bpath, ": sequence ", i, " ends at byte ", next_pointer,
                " but the data file has only ", bsize, " bytes (truncated .bin, or a .bin/.idx mismatch)");
  }
  TORCH_CHECK(next_pointer == bsize, "[indexed_dataset] ", bpath, ": expected ", next_pointer, " bytes (",
              next_pointer / item, " ", dtype_name(dtype_), " tokens per the index), found ", bsize,
              " bytes (.bin/.idx mismatch)");
  num_tokens_ = next_pointer / item;

  int64_t prev = read_le<int64_t>(p + kHeaderSize + 12 * s);
  TORCH_CHECK(prev == 0, "[indexed_dataset] ", ipath, ": expected the document index to start at 0, found ", prev);
  for (int64_t k = 1; k < num_document_indices_; ++k) {
    const int64_t v = read_le<int64_t>(p + kHeaderSize + 12 * s + 8 * k);
    TORCH_CHECK(v >= prev, "[indexed_dataset] ", ipath, ": document index ", k, " is ", v,
                ", smaller than the previous ", prev, " (expected non-decreasing)");
    prev = v;
  }
  TORCH_CHECK(prev == num_sequences_, "[indexed_dataset] ", ipath,
              ": expected the document index to end at the sequence count ", num_sequences_, ", found ", prev);
}

namespace {

// Tokens [offset, offset + length) of sequence idx, checked (length < 0: to the end); returns the length.
int64_t checked_length(const IndexedDataset& d, int64_t idx, int64_t offset, int64_t length) {
  TORCH_CHECK(idx >= 0 && idx < d.num_sequences(), "[indexed_dataset] ", d.path_prefix(), ": sequence ", idx,
              " out of range [0, ", d.num_sequences(), ")");
  const int64_t len = d.sequence_length(idx);
  if (length < 0) length = len - offset;
  TORCH_CHECK(offset >= 0 && offset + length <= len, "[indexed_dataset] ", d.path_prefix(), ": tokens [", offset, ", ",
              offset + length, ") outside sequence ", idx, " of length ", len);
  return length;
}

}  // namespace

TokenSpan IndexedDataset::get(int64_t idx, int64_t offset, int64_t length) const {
  check_mapped();
  length = checked_length(*this, idx, offset, length);
  TokenSpan span;
  span.dtype = dtype_;
  span.size = length;
  span.data = bin_->data() + sequence_pointer(idx) + offset * static_cast<int64_t>(dtype_size(dtype_));
  return span;
}

TokenSpan IndexedDataset::get_document(int64_t d) const {
  check_mapped();
  TORCH_CHECK(d >= 0 && d < num_documents(), "[indexed_dataset] ", path_prefix_, ": document ", d, " out of range [0, ",
              num_documents(), ")");
  const int64_t first = document_index(d), last = document_index(d + 1);
  TokenSpan span;
  span.dtype = dtype_;
  if (first == last) {
    span.data = bin_->data();
    return span;
  }
  span.data = bin_->data() + sequence_pointer(first);
  const int64_t end_byte = sequence_pointer(last - 1) +
                           static_cast<int64_t>(sequence_length(last - 1)) * static_cast<int64_t>(dtype_size(dtype_));
  span.size = (end_byte - sequence_pointer(first)) / static_cast<int64_t>(dtype_size(dtype_));
  return span;
}

void IndexedDataset::check_mapped() const {
  TORCH_CHECK(bin_->mapped(), "[indexed_dataset] ", bin_->path(),
              " was opened unmapped (mmap_bin_files=false, --no-mmap-bin-files): read tokens with read()");
}

int64_t IndexedDataset::read_raw(int64_t idx, int64_t offset, int64_t length, void* out) const {
  length = checked_length(*this, idx, offset, length);
  const int64_t item = static_cast<int64_t>(dtype_size(dtype_));
  if (out != nullptr) bin_->read_at(sequence_pointer(idx) + offset * item, static_cast<size_t>(length * item), out);
  return length;
}

void IndexedDataset::read(int64_t idx, int64_t offset, int64_t length, int64_t* out) const {
  if (bin_->mapped()) return get(idx, offset, length).copy_to(out);
  length = read_raw(idx, offset, length, nullptr);
  thread_local std::vector<uint8_t> bytes;  // one read per sample; prefetch threads each have theirs
  bytes.resize(static_cast<size_t>(length) * dtype_size(dtype_));
  read_raw(idx, offset, length, bytes.data());
  TokenSpan{bytes.data(), length, dtype_}.copy_to(out);
}

std::vector<int32_t> IndexedDataset::sequence_lengths() const {
  std::vector<int32_t> out(static_cast<size_t>(num_sequences_));
  if (!out.empty()) std::memcpy(out.data(), lengths_, out.size() * sizeof(int32_t));
  return out;
}

std::vector<int64_t> IndexedDataset::document_indices() const {
  std::vector<int64_t> out(static_cast<size_t>(num_document_indices_));
  std::memcpy(out.data(), document_indices_, out.size() * sizeof(int64_t));
  return out;
}

void IndexedDataset::check_unchanged() const {
  TORCH_CHECK(!idx_->changed_on_disk(), "[indexed_dataset] ", idx_->path(),
              ": the file changed on disk after it was opened (rewritten while training?); "
              "restart on the new files");
  TORCH_CHECK(!bin_->changed_on_disk(), "[indexed_dataset] ", bin_->path(),
              ": the file changed on disk after it was opened (rewritten while training?); "
              "restart on the new files");
}

}  // namespace megatron::datasets
