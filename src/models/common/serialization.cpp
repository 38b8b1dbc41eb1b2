#include "megatron/models/common/serialization.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstdio>
#include <fstream>
#include <iterator>

namespace megatron::models::common {

void save_tensor_dict(const std::string& path, const std::map<std::string, at::Tensor>& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : tensors) dict.insert(name, t.detach().cpu().contiguous());
  std::vector<char> pickle_data;
  // Like torch::jit::pickle_save, but with tag_aggregates = false: no torch.jit type tags, which
  // torch.load(weights_only=True) refuses.
  torch::jit::Pickler pickler(
      [&](const char* buf, size_t size) { pickle_data.insert(pickle_data.end(), buf, buf + size); },
      /*tensor_table=*/nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(dict);
  pickler.stop();
  const std::string tmp = path + ".tmp";
  {
    caffe2::serialize::PyTorchStreamWriter writer(tmp);
    torch::jit::writeArchiveAndTensors("data", pickle_data.data(), pickle_data.size(),
                                       pickler.tensorData(), writer);
    writer.writeEndOfFile();
  }
  TORCH_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[serialization] cannot rename ", tmp,
              " to ", path);
}

std::map<std::string, at::Tensor> load_tensor_dict(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TORCH_CHECK(f, "[serialization] cannot read ", path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  c10::IValue value = torch::jit::pickle_load(bytes);
  TORCH_CHECK(value.isGenericDict(), "[serialization] ", path, " does not hold a dict");
  std::map<std::string, at::Tensor> out;
  for (const auto& entry : value.toGenericDict()) {
    TORCH_CHECK(entry.key().isString() && entry.value().isTensor(), "[serialization] ", path,
                " holds something other than name -> tensor");
    out[entry.key().toStringRef()] = entry.value().toTensor();
  }
  return out;
}

}  // namespace megatron::models::common
