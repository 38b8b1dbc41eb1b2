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

#include "mapping_faults.h"

namespace megatron::datasets {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr size_t kHeaderSize = 9 + 8 + 1 + 8 + 8;  // magic, version, dtype, S, D
constexpr size_t kWriteBuffer = 1 << 22;

template <typename T>
T read_le(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));  // x86/ARM hosts are little endian, as the format
  return value;
}

std::string errno_text() {
  return std::strerror(errno);
}

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

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TORCH_CHECK(fd >= 0, "[indexed_dataset] ", path, ": cannot open: ", errno_text());
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    TORCH_CHECK(false, "[indexed_dataset] ", path, ": cannot stat: ", errno_text());
  }
  size_ = static_cast<size_t>(st.st_size);
  mtime_ns_ = mtime_ns(st);
  inode_ = st.st_ino;
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
  detail::unregister_mapping(fault_slot_);
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
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
IndexedDataset::IndexedDataset(std::string path_prefix) : path_prefix_(std::move(path_prefix)) {
  const std::string ipath = idx_path(path_prefix_);
  const std::string bpath = bin_path(path_prefix_);
  struct stat st;
  TORCH_CHECK(::stat(ipath.c_str(), &st) == 0, "[indexed_dataset] ", ipath,
              ": index file not found (expected {prefix}.idx next to {prefix}.bin for prefix '", path_prefix_, "')");
  TORCH_CHECK(::stat(bpath.c_str(), &st) == 0, "[indexed_dataset] ", bpath,
              ": data file not found (expected {prefix}.bin next to {prefix}.idx for prefix '", path_prefix_, "')");
  idx_ = std::make_shared<MappedFile>(ipath);
  bin_ = std::make_shared<MappedFile>(bpath);

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

TokenSpan IndexedDataset::get(int64_t idx, int64_t offset, int64_t length) const {
  TORCH_CHECK(idx >= 0 && idx < num_sequences_, "[indexed_dataset] ", path_prefix_, ": sequence ", idx,
              " out of range [0, ", num_sequences_, ")");
  const int64_t len = sequence_length(idx);
  if (length < 0) length = len - offset;
  TORCH_CHECK(offset >= 0 && offset + length <= len, "[indexed_dataset] ", path_prefix_, ": tokens [", offset, ", ",
              offset + length, ") outside sequence ", idx, " of length ", len);
  TokenSpan span;
  span.dtype = dtype_;
  span.size = length;
  span.data = bin_->data() + sequence_pointer(idx) + offset * static_cast<int64_t>(dtype_size(dtype_));
  return span;
}

TokenSpan IndexedDataset::get_document(int64_t d) const {
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
