// Megatron-LM's MMIDIDX indexed dataset (version 1): a .bin of raw token ids and a .idx of
// sequence lengths, byte pointers and document boundaries. Reader (mmap, zero-copy) and builder.
//
// .idx layout, little endian:
//   9 bytes "MMIDIDX\0\0" | u64 version = 1 | u8 dtype code | u64 S (sequences) | u64 D
//   | i32 lengths[S] | i64 pointers[S] (bytes into .bin) | i64 document_indices[D]
// document_indices starts at 0 and ends at S: document d is sequences [doc[d], doc[d+1]).
#pragma once

#include "megatron/export.h"

#include <sys/types.h>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace megatron::datasets {

// The numeric codes Megatron-LM writes into the .idx header.
enum class DType : uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUInt16 = 8,
};

MEGATRON_API size_t dtype_size(DType dtype);
MEGATRON_API const char* dtype_name(DType dtype);
// True for the codes 1..8; the reader refuses anything else.
MEGATRON_API bool is_valid_dtype_code(uint8_t code);
// Megatron's choice for token files: uint16 when vocab_size < 65500, else int32.
MEGATRON_API DType optimal_dtype(int64_t vocab_size);

MEGATRON_API std::string idx_path(const std::string& path_prefix);
MEGATRON_API std::string bin_path(const std::string& path_prefix);
// Both {prefix}.idx and {prefix}.bin exist.
MEGATRON_API bool indexed_dataset_exists(const std::string& path_prefix);

// A read-only view of one contiguous run of values in the mapped .bin.
struct MEGATRON_API TokenSpan {
  const void* data = nullptr;
  int64_t size = 0;  // number of values
  DType dtype = DType::kInt32;

  int64_t operator[](int64_t i) const;
  // Converts to int64 into out[0..size).
  void copy_to(int64_t* out) const;
  std::vector<int64_t> to_vector() const;
};

// Read-only memory map of a whole file, unmapped on destruction; or, with map = false (Megatron-LM's
// --no-mmap-bin-files, for file systems where mapping is slow or unsupported), an open descriptor
// read with pread.
class MEGATRON_API MappedFile {
 public:
  explicit MappedFile(const std::string& path, bool map = true);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }  // nullptr unless mapped
  bool mapped() const { return fd_ < 0; }
  size_t size() const { return size_; }
  // Copies bytes [offset, offset + n): from the mapping, or with pread.
  void read_at(int64_t offset, size_t n, void* out) const;
  const std::string& path() const { return path_; }
  // Size and modification time when opened, to notice files replaced under the mapping.
  bool changed_on_disk() const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int64_t mtime_ns_ = 0;
  ino_t inode_ = 0;
  int fault_slot_ = -1;  // its range in the SIGBUS handler's table (src/datasets/mapping_faults.h)
  int fd_ = -1;          // open only when not mapped
};

// Reader: validates the pair on open (see the class comment in indexed_dataset.cpp for the list)
// and serves sequences as zero-copy spans into the mapped .bin.
class MEGATRON_API IndexedDataset {
 public:
  // mmap_bin_files = false reads the .bin with pread (the .idx is always mapped), as Megatron-LM's
  // IndexedDataset(mmap=False); get() and get_document() then refuse, read() serves.
  explicit IndexedDataset(std::string path_prefix, bool mmap_bin_files = true);

  const std::string& path_prefix() const { return path_prefix_; }
  DType dtype() const { return dtype_; }
  int64_t num_sequences() const { return num_sequences_; }
  // Documents, not counting the leading 0 of the document index.
  int64_t num_documents() const { return num_document_indices_ - 1; }
  int64_t num_tokens() const { return num_tokens_; }

  // Entries of the index arrays: lengths [S] int32, byte pointers [S] int64, document index
  // [D + 1] int64. They sit unaligned in the mapped .idx (from byte 34), so they are read by value.
  int32_t sequence_length(int64_t i) const { return load<int32_t>(lengths_, i); }
  int64_t sequence_pointer(int64_t i) const { return load<int64_t>(pointers_, i); }
  int64_t document_index(int64_t k) const { return load<int64_t>(document_indices_, k); }
  int64_t num_document_indices() const { return num_document_indices_; }
  // Copies of whole arrays.
  std::vector<int32_t> sequence_lengths() const;
  std::vector<int64_t> document_indices() const;
  // The per-sequence modes of multimodal files (nullptr when the file has none).
  const int8_t* sequence_modes() const { return modes_; }

  // Sequence idx, tokens [offset, offset + length); length < 0 means "to the end".
  TokenSpan get(int64_t idx, int64_t offset = 0, int64_t length = -1) const;
  // All tokens of document d (its sequences are contiguous in the .bin).
  TokenSpan get_document(int64_t d) const;
  // Tokens [offset, offset + length) of sequence idx (length < 0: to the end), mapped or not: as
  // int64 into out, or as the file's bytes into out (nullptr: only checks) returning the length.
  void read(int64_t idx, int64_t offset, int64_t length, int64_t* out) const;
  int64_t read_raw(int64_t idx, int64_t offset, int64_t length, void* out) const;

  bool mmap_bin_files() const { return bin_->mapped(); }
  // Throws when either file was replaced, truncated or touched since it was opened.
  void check_unchanged() const;

 private:
  std::string path_prefix_;
  std::shared_ptr<MappedFile> idx_;
  std::shared_ptr<MappedFile> bin_;
  DType dtype_ = DType::kInt32;
  int64_t num_sequences_ = 0;
  int64_t num_document_indices_ = 0;
  int64_t num_tokens_ = 0;
  void check_mapped() const;
  template <typename T>
  static T load(const uint8_t* base, int64_t i) {
    T v;
    std::memcpy(&v, base + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return v;
  }

  const uint8_t* lengths_ = nullptr;
  const uint8_t* pointers_ = nullptr;
  const uint8_t* document_indices_ = nullptr;
  const int8_t* modes_ = nullptr;
};

// Builder: streams tokens into "{bin}.tmp", keeps the index in memory, and on finalize() writes
// the .idx the same way and renames both, so readers never see a half-written pair.
class MEGATRON_API IndexedDatasetBuilder {
 public:
  IndexedDatasetBuilder(std::string bin_path, DType dtype);
  ~IndexedDatasetBuilder();  // removes the temporary files unless finalized
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  DType dtype() const { return dtype_; }
  int64_t num_sequences() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t num_documents() const { return static_cast<int64_t>(document_indices_.size()) - 1; }

  // One sequence. Refuses ids that do not fit the dtype (naming the id and the dtype).
  void add_item(const int32_t* tokens, int64_t n);
  void add_item(const int64_t* tokens, int64_t n);
  void add_item(const std::vector<int32_t>& tokens) { add_item(tokens.data(), tokens.size()); }
  void add_item(const std::vector<int64_t>& tokens) { add_item(tokens.data(), tokens.size()); }
  // Closes the current document (Megatron's end_document).
  void end_document();
  // One document of several sequences: tokens are their concatenation (Megatron's add_document).
  void add_document(const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths);
  // Appends a whole dataset; its dtype must equal this builder's.
  void add_index(const std::string& path_prefix);
  // Writes the .idx and renames both files into place.
  void finalize(const std::string& idx_path);

 private:
  template <typename T>
  void write_tokens(const T* tokens, int64_t n);
  void flush_buffer();

  std::string bin_path_, bin_tmp_path_, idx_tmp_path_;
  DType dtype_;
  int fd_ = -1;
  std::vector<uint8_t> buffer_;
  int64_t bytes_written_ = 0;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> document_indices_{0};
  bool finalized_ = false;
};

}  // namespace megatron::datasets
