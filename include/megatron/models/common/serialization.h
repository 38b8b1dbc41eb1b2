// torch.save's zip format from C++: Python reads these files with torch.load (also with
// weights_only=True), since they hold plain dicts, lists, strings, numbers and tensors and no
// TorchScript type tags.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace megatron::models::common {

// Streams `value` as a torch.save archive to `write`, which is called with consecutive chunks
// and must not throw (LibTorch's zip writer calls it through C code): it records a failure and
// the caller reports it after write_archive returns. Lists must be generic (c10::impl::GenericList of
// AnyType): typed ones would be written with TorchScript helpers that torch.load refuses.
// Tensors are copied to the CPU one at a time, so a CUDA model costs one tensor of host memory.
MEGATRON_API void write_archive(const c10::IValue& value, const std::function<void(const void*, size_t)>& write);

// Reads a torch.save archive (also one written by Python) straight from the file, or from the
// bytes `range` (offset, length) of it, where PyTorch Distributed Checkpoint's .distcp files keep
// one per record; tensors land on the CPU. A missing, truncated or malformed file throws
// c10::Error naming it.
MEGATRON_API c10::IValue read_archive(const std::string& path,
                                      std::optional<std::pair<uint64_t, uint64_t>> range = std::nullopt);

// Writes to path + ".tmp", then renames, so a partly written file never has the final name.
MEGATRON_API void save_tensor_dict(const std::string& path, const std::map<std::string, at::Tensor>& tensors);
MEGATRON_API std::map<std::string, at::Tensor> load_tensor_dict(const std::string& path);

}  // namespace megatron::models::common
