// The safetensors format (Hugging Face): 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the raw little-endian tensor bytes. Used for Hugging Face model.safetensors files.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace megatron::models::common {

// Writes tensors (any of F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL, on any device) to path via
// path + ".tmp" and a rename; metadata goes to "__metadata__" (e.g. {"format": "pt"}).
MEGATRON_API void save_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                                   const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Reads every tensor (CPU). A malformed header, an unknown dtype or offsets outside the file
// throw c10::Error naming the file and the tensor.
MEGATRON_API std::map<std::string, at::Tensor> load_safetensors(const std::string& path);

}  // namespace megatron::models::common
