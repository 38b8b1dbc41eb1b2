// Checkpoint files: torch.save archives written under temporary names, fsync'ed, checksummed.
#include "megatron/training/checkpoint_files.h"

#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "input_files.h"
#include "megatron/comm/launcher_env.h"
#include "megatron/models/common/serialization.h"
#include "megatron/training/fault_injection.h"
#include "training/checkpointing/crc32.h"
#include "training/checkpointing/paths.h"

namespace megatron::training {
namespace fs = std::filesystem;
namespace {
using detail::errno_text;
using detail::join;

// A file written through a descriptor: every write checked, fsync'ed before close.
class FileWriter {
 public:
  explicit FileWriter(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    TORCH_CHECK(fd_ >= 0, "[checkpointing] cannot create ", path_, ": ", errno_text());
  }
  ~FileWriter() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(path_.c_str());  // failed midway: free the space, the name was temporary anyway
    }
  }
  // Never throws: LibTorch's zip writer calls it through C code, and a throw there resurfaces as
  // "unexpected pos" from the writer's destructor. The first failure is kept for close().
  void write(const void* data, size_t size) noexcept {
    if (!error_.empty()) return;
    const char* p = static_cast<const char*>(data);
    crc_ = crc32_update(crc_, p, size);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = "writing " + path_ + " failed after " + std::to_string(bytes_) +
                 " bytes: " + (n == 0 ? std::string("no space written") : errno_text());
        return;
      }
      p += n;
      size -= static_cast<size_t>(n);
      bytes_ += static_cast<uint64_t>(n);
    }
  }
  WrittenFile close() {
    TORCH_CHECK(error_.empty(), "[checkpointing] ", error_);
    TORCH_CHECK(::fsync(fd_) == 0, "[checkpointing] fsync of ", path_, " failed: ", errno_text());
    const int rc = ::close(fd_);
    fd_ = -1;
    TORCH_CHECK(rc == 0, "[checkpointing] closing ", path_, " failed: ", errno_text());
    return {path_, bytes_, crc_};
  }
  uint64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint32_t crc_ = 0;
  std::string error_;
};

// name -> (bytes, crc32) from a rank folder's checksums.txt; empty when there is none.
std::map<std::string, std::pair<uint64_t, uint32_t>> read_checksums(const std::string& dir) {
  std::map<std::string, std::pair<uint64_t, uint32_t>> out;
  const std::string path = dir + "/" + kChecksumFileName;
  std::ifstream in(path);
  if (!in) return out;
  megatron::detail::check_regular_file(path, "[checkpointing] " + path);
  std::string name, crc;
  uint64_t bytes = 0;
  while (in >> name >> bytes >> crc) out[name] = {bytes, static_cast<uint32_t>(std::stoul(crc, nullptr, 16))};
  TORCH_CHECK(in.eof(), "[checkpointing] ", path, " is malformed; expected lines '<file> <bytes> <crc32 hex>'");
  return out;
}

uint32_t file_crc32(const std::string& path) {
  megatron::detail::check_regular_file(path, "[checkpointing] " + path);
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in, "[checkpointing] cannot read ", path);
  std::vector<char> buffer(8 << 20);
  uint32_t crc = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    crc = crc32_update(crc, buffer.data(), static_cast<size_t>(in.gcount()));
  }
  return crc;
}

std::string crc_hex(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof(text), "%08x", crc);
  return text;
}

uint32_t little_endian_u32(const unsigned char* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// A checkpoint without checksums.txt (Megatron-LM's own, for one) is checked against the CRC-32
// that the zip format stores with every record; LibTorch's reader does not check it. LibTorch
// finds the records; each one's stored CRC sits in its local header, or, when flag bit 3 is set
// (as LibTorch writes), in the data descriptor right after its bytes.
void verify_zip_records(const std::string& path) {
  megatron::detail::check_regular_file(path, "[checkpointing] " + path);
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> archive;
  try {
    archive = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "[checkpointing] ", path,
                " cannot be read (truncated or corrupt?): ", e.what_without_backtrace());
  }
  auto& reader = *archive;
  std::ifstream in(path, std::ios::binary);
  const uint64_t file_size = fs::file_size(path);
  std::vector<char> buffer;
  for (const auto& name : reader.getAllRecords()) {
    const uint64_t header = reader.getRecordHeaderOffset(name), offset = reader.getRecordOffset(name);
    const uint64_t size = reader.getRecordSize(name);
    TORCH_CHECK(header + 30 <= file_size && offset + size <= file_size, "[checkpointing] ", path,
                " is truncated: record '", name, "' ends past the end of the file");
    unsigned char local[30], descriptor[8] = {};
    in.seekg(static_cast<std::streamoff>(header));
    in.read(reinterpret_cast<char*>(local), sizeof local);
    if (local[8] != 0 || local[9] != 0) continue;  // compressed: LibTorch writes stored records only
    const bool has_descriptor = (local[6] & 0x08) != 0;
    TORCH_CHECK(!has_descriptor || offset + size + 8 <= file_size, "[checkpointing] ", path, " is truncated: record '",
                name, "' has no data descriptor");
    uint32_t stored = little_endian_u32(local + 14);
    if (has_descriptor) {
      in.seekg(static_cast<std::streamoff>(offset + size));
      in.read(reinterpret_cast<char*>(descriptor), sizeof descriptor);
      stored = little_endian_u32(descriptor) == 0x08074b50 ? little_endian_u32(descriptor + 4)
                                                           : little_endian_u32(descriptor);
    }
    buffer.resize(size);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(buffer.data(), static_cast<std::streamsize>(size));
    TORCH_CHECK(in, "[checkpointing] ", path, ": cannot read record '", name, "'");
    const uint32_t crc = crc32_update(0, buffer.data(), size);
    TORCH_CHECK(crc == stored, "[checkpointing] ", path, " is corrupt: record '", name, "' has CRC-32 ", crc_hex(crc),
                ", the archive says ", crc_hex(stored));
  }
}

}  // namespace

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TORCH_CHECK(fd >= 0, "[checkpointing] cannot open folder ", dir, ": ", errno_text());
  const int rc = ::fsync(fd);
  const std::string err = errno_text();
  ::close(fd);
  TORCH_CHECK(rc == 0, "[checkpointing] fsync of folder ", dir, " failed: ", err);
}

void write_text_file(const std::string& path, const std::string& text) {
  FileWriter w(path);
  w.write(text.data(), text.size());
  w.close();
}

WrittenFile write_checkpoint_file(const std::string& path, const c10::IValue& value) {
  FileWriter out(path);
  const int rank = comm::LauncherEnv::from_environment().rank;
  int chunks = 0;
  models::common::write_archive(value, [&](const void* data, size_t size) {
    out.write(data, size);
    if (++chunks == 3) fault_point("save:mid_file", rank);  // a file cut short
  });
  return out.close();
}

WrittenFile write_archives_file(const std::string& path, const std::vector<c10::IValue>& values,
                                std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  FileWriter out(path);
  const int rank = comm::LauncherEnv::from_environment().rank;
  ranges.clear();
  for (const auto& value : values) {
    const uint64_t start = out.bytes();
    models::common::write_archive(value, [&](const void* data, size_t size) { out.write(data, size); });
    ranges.emplace_back(start, out.bytes() - start);
    if (ranges.size() == 2) fault_point("save:mid_file", rank);
  }
  return out.close();
}

c10::IValue read_checkpoint_file(const std::string& path) {
  TORCH_CHECK(fs::is_regular_file(path), "[checkpointing] ", path, " does not exist");
  const auto parent = fs::path(path).parent_path().string();
  const auto sums = read_checksums(parent);
  if (auto it = sums.find(fs::path(path).filename().string()); it != sums.end()) {
    const uint64_t size = fs::file_size(path);
    TORCH_CHECK(size == it->second.first, "[checkpointing] ", path, " is truncated or overwritten: ", size, " bytes, ",
                kChecksumFileName, " says ", it->second.first);
    const uint32_t crc = file_crc32(path);
    TORCH_CHECK(crc == it->second.second, "[checkpointing] ", path, " is corrupt: CRC32 ", crc_hex(crc), ", ",
                kChecksumFileName, " says ", crc_hex(it->second.second));
  }
  if (!sums.count(fs::path(path).filename().string())) verify_zip_records(path);
  try {
    return models::common::read_archive(path);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "[checkpointing] ", path, " cannot be read: ", e.what_without_backtrace());
  }
}

std::vector<WrittenFile> write_rank_dir(const std::string& parent, const std::string& name,
                                        const std::map<std::string, c10::IValue>& files) {
  const std::string final_dir = join(parent, name), tmp = final_dir + ".tmp";
  remove_tree(tmp);
  fs::create_directories(tmp);
  std::vector<WrittenFile> written;
  std::ostringstream sums;
  for (const auto& [file, value] : files) {
    written.push_back(write_checkpoint_file(join(tmp, file), value));
    sums << file << " " << written.back().bytes << " " << crc_hex(written.back().crc32) << "\n";
  }
  write_text_file(join(tmp, kChecksumFileName), sums.str());
  fsync_dir(tmp);
  fault_point("save:before_rank_rename", comm::LauncherEnv::from_environment().rank);
  remove_tree(final_dir);
  fs::rename(tmp, final_dir);
  fsync_dir(parent);
  for (auto& w : written) w.path = join(final_dir, fs::path(w.path).filename().string());
  return written;
}

void remove_tree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  const int rc = ::nftw(
      path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
  TORCH_CHECK(rc == 0, "[checkpointing] cannot delete ", path, ": ", errno_text());
}

}  // namespace megatron::training
