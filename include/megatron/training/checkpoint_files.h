// The file layer of checkpointing: every byte goes to a temporary name, is fsync'ed, then renamed;
// each rank folder carries checksums.txt (size and CRC32 of its files), checked on reading.
#pragma once

#include "megatron/export.h"

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace megatron::training {

constexpr const char* kChecksumFileName = "checksums.txt";

struct MEGATRON_API WrittenFile {
  std::string path;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};
// Writes `value` as a torch.save archive to path (whose folder must exist): flushed and
// fsync'ed; errors (disk full, permissions) throw naming the file. Returns the CRC32 and size.
MEGATRON_API WrittenFile write_checkpoint_file(const std::string& path, const c10::IValue& value);
// Writes several torch.save archives back to back into path (PyTorch Distributed Checkpoint's
// .distcp files), flushed and fsync'ed; ranges gets each one's (offset, length).
MEGATRON_API WrittenFile write_archives_file(const std::string& path, const std::vector<c10::IValue>& values,
                                             std::vector<std::pair<uint64_t, uint64_t>>& ranges);
// Reads one file, checking it against its folder's checksums.txt when there is one; a missing,
// truncated or corrupt file throws one line naming it.
MEGATRON_API c10::IValue read_checkpoint_file(const std::string& path);
// Writes the files of one rank folder as <parent>/<name>.tmp, fsyncs, renames to <parent>/<name>.
MEGATRON_API std::vector<WrittenFile> write_rank_dir(const std::string& parent, const std::string& name,
                                                     const std::map<std::string, c10::IValue>& files);
// Writes a small text file durably (flushed, fsync'ed) under its final name; callers rename.
MEGATRON_API void write_text_file(const std::string& path, const std::string& text);
// fsync of a folder makes the names created or renamed in it durable.
MEGATRON_API void fsync_dir(const std::string& dir);
// Deletes a file or folder tree if it exists (nftw; std::filesystem::remove_all is avoided
// because LibTorch's libtorch.so exports a copy of it that crashes on non-empty folders).
MEGATRON_API void remove_tree(const std::string& path);

}  // namespace megatron::training
