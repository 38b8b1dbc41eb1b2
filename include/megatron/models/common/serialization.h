// Tensor dictionaries in torch.save's zip format: Python reads them with torch.load (also with
// weights_only=True) and they hold plain dicts of tensors, no TorchScript type tags.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace megatron::models::common {

// Writes to path + ".tmp", then renames, so a partly written file never has the final name.
void save_tensor_dict(const std::string& path, const std::map<std::string, at::Tensor>& tensors);
std::map<std::string, at::Tensor> load_tensor_dict(const std::string& path);

}  // namespace megatron::models::common
