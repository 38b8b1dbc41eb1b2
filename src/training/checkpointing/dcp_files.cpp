// PyTorch Distributed Checkpoint's data files, written and read here (dcp_files.h): records that
// are each a torch.save archive, back to back, as torch.distributed.checkpoint 2.11 writes them.
#include "training/checkpointing/dcp_files.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "megatron/models/common/serialization.h"
#include "megatron/training/checkpoint_files.h"
#include "training/checkpointing/paths.h"

namespace megatron::training::detail {

void DcpMetadata::merge(const DcpMetadata& part, const std::string& where) {
  for (const auto& [key, t] : part.tensors) {
    auto [it, fresh] = tensors.try_emplace(key, t);
    if (fresh) continue;
    TORCH_CHECK(it->second.dtype == t.dtype && it->second.size == t.size, "[checkpointing] ", where, ": tensor '", key,
                "' is ", it->second.dtype, " ", c10::IntArrayRef(it->second.size), " on one rank and ", t.dtype, " ",
                c10::IntArrayRef(t.size), " on another");
    it->second.chunks.insert(it->second.chunks.end(), t.chunks.begin(), t.chunks.end());
  }
  for (const auto& [key, o] : part.objects)
    TORCH_CHECK(objects.emplace(key, o).second, "[checkpointing] ", where, ": object '", key, "' written twice");
}

DcpMetadata write_dcp_file(const std::string& dir, const std::string& file, const std::vector<DcpItem>& items) {
  std::vector<c10::IValue> values;
  values.reserve(items.size());
  for (const auto& item : items) {
    if (!item.chunk.defined()) {
      values.push_back(item.object);
      continue;
    }
    // torch.save writes a tensor's whole storage: a view of a larger one (a parameter in its flat
    // buffer) gets a storage of its own bytes, over the same memory on the CPU (`items` keeps it).
    at::Tensor t = item.chunk.detach().contiguous();
    if (t.storage_offset() != 0 || t.storage().nbytes() != t.nbytes())
      t = t.is_cpu() ? at::from_blob(t.data_ptr(), t.sizes(), t.options()) : t.clone();
    values.push_back(t);
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  write_archives_file(join(dir, file), values, ranges);
  DcpMetadata md;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& item = items[i];
    if (!item.chunk.defined()) {
      md.objects[item.key] = {file, ranges[i].first, ranges[i].second};
      continue;
    }
    auto& t = md.tensors[item.key];
    t.dtype = item.chunk.scalar_type();
    t.size = item.global_size;
    t.chunks.push_back({item.offsets, item.chunk.sizes().vec(), file, ranges[i].first, ranges[i].second});
  }
  return md;
}

at::Tensor read_dcp_box(const std::string& dir, const DcpMetadata& md, const std::string& key,
                        const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes) {
  auto it = md.tensors.find(key);
  TORCH_CHECK(it != md.tensors.end(), "[checkpointing] ", dir, " has no tensor '", key, "'");
  const DcpTensor& t = it->second;
  bool inside = offsets.size() == t.size.size() && sizes.size() == t.size.size();
  for (size_t d = 0; inside && d < t.size.size(); ++d)
    inside = offsets[d] >= 0 && sizes[d] >= 0 && offsets[d] + sizes[d] <= t.size[d];
  TORCH_CHECK(inside, "[checkpointing] ", dir, ": '", key, "' is ", c10::IntArrayRef(t.size), "; this run needs ",
              c10::IntArrayRef(sizes), " of it at ", c10::IntArrayRef(offsets));
  at::Tensor out = at::empty(sizes, at::TensorOptions().dtype(t.dtype));
  int64_t covered = 0;
  for (const auto& c : t.chunks) {
    std::vector<int64_t> lo(sizes.size()), hi(sizes.size());
    bool meets = true;
    for (size_t d = 0; d < sizes.size(); ++d) {
      lo[d] = std::max(offsets[d], c.offsets[d]);
      hi[d] = std::min(offsets[d] + sizes[d], c.offsets[d] + c.sizes[d]);
      meets = meets && lo[d] < hi[d];
    }
    if (!meets) continue;
    const std::string file = join(dir, c.file);
    c10::IValue v;
    try {
      v = models::common::read_archive(file, std::make_pair(c.offset, c.length));
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "[checkpointing] the chunk of '", key, "' at ", c10::IntArrayRef(c.offsets), ": ",
                  e.what_without_backtrace());
    }
    TORCH_CHECK(v.isTensor() && v.toTensor().sizes().vec() == c.sizes && v.toTensor().scalar_type() == t.dtype,
                "[checkpointing] ", file, ": the chunk of '", key, "' at ", c10::IntArrayRef(c.offsets), " is not the ",
                t.dtype, " tensor of shape ", c10::IntArrayRef(c.sizes), " .metadata says");
    at::Tensor src = v.toTensor(), dst = out;
    for (size_t d = 0; d < sizes.size(); ++d) {
      src = src.narrow(static_cast<int64_t>(d), lo[d] - c.offsets[d], hi[d] - lo[d]);
      dst = dst.narrow(static_cast<int64_t>(d), lo[d] - offsets[d], hi[d] - lo[d]);
    }
    dst.copy_(src);
    std::vector<int64_t> extent(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) extent[d] = hi[d] - lo[d];
    covered += dcp_volume(extent);
  }
  TORCH_CHECK(covered == dcp_volume(sizes), "[checkpointing] ", dir, ": the chunks of '", key, "' cover ", covered,
              " of the ", dcp_volume(sizes), " elements this run needs at ", c10::IntArrayRef(offsets));
  return out;
}

c10::IValue read_dcp_object(const std::string& dir, const DcpMetadata& md, const std::string& key) {
  auto it = md.objects.find(key);
  TORCH_CHECK(it != md.objects.end(), "[checkpointing] ", dir, " has no object '", key, "'");
  return models::common::read_archive(join(dir, it->second.file), std::make_pair(it->second.offset, it->second.length));
}

}  // namespace megatron::training::detail
