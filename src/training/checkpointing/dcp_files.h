// PyTorch Distributed Checkpoint's files (torch.distributed.checkpoint's FileSystemWriter and
// FileSystemReader), which Megatron-LM's torch_dist checkpoints are: every rank writes its chunks
// of the global tensors, each a torch.save archive, back to back into __<rank>_0.distcp, and one
// rank writes .metadata, a pickle of where each chunk of each tensor lies. Format only; what the
// keys mean is torch_dist.cpp's.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace megatron::training::detail {

constexpr const char* kDcpMetadataFileName = ".metadata";

inline int64_t dcp_volume(const std::vector<int64_t>& sizes) {  // elements in a box
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

struct DcpChunk {
  std::vector<int64_t> offsets, sizes;  // in the global tensor
  std::string file;                     // its .distcp file in the folder
  uint64_t offset = 0, length = 0;      // its archive's bytes there
};
struct DcpTensor {
  c10::ScalarType dtype = c10::kFloat;
  std::vector<int64_t> size;  // global
  std::vector<DcpChunk> chunks;
};
struct DcpObject {  // a torch.save'd value (Megatron-LM's ShardedObject)
  std::string file;
  uint64_t offset = 0, length = 0;
};

struct DcpMetadata {
  std::map<std::string, DcpTensor> tensors;
  std::map<std::string, DcpObject> objects;
  // Adds part's entries (another rank's); a tensor both describe with another dtype or global size,
  // or an object both hold, throws naming `where`.
  void merge(const DcpMetadata& part, const std::string& where);
};

// What a rank writes: a chunk of a global tensor, or (object defined) a value.
struct DcpItem {
  std::string key;
  std::vector<int64_t> global_size, offsets;
  at::Tensor chunk;
  c10::IValue object;
};

// Writes items into <dir>/<file>, fsync'ed; returns the metadata of what it wrote.
DcpMetadata write_dcp_file(const std::string& dir, const std::string& file, const std::vector<DcpItem>& items);

// The .metadata pickle (DCP's Metadata, version 1.0.0, which torch.distributed.checkpoint reads),
// and a pickle of one back; the reader checks every chunk lies inside its tensor, no two chunks
// of a tensor overlap and each file name is a plain name in the folder, throwing one line naming
// `where` and the key otherwise.
std::string dcp_metadata_pickle(const DcpMetadata& md);
DcpMetadata parse_dcp_metadata(const uint8_t* data, size_t size, const std::string& where);
DcpMetadata read_dcp_metadata(const std::string& dir);

// Elements [offsets, offsets + sizes) of tensor `key`, read from the chunks that overlap them
// (only those files' archives are read); every element must be covered. Throws naming the key and
// file for a missing key, a box outside the tensor, a chunk whose archive is not the shape and
// dtype the metadata says.
at::Tensor read_dcp_box(const std::string& dir, const DcpMetadata& md, const std::string& key,
                        const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes);
c10::IValue read_dcp_object(const std::string& dir, const DcpMetadata& md, const std::string& key);

}  // namespace megatron::training::detail
