#include "megatron/models/common/serialization.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/storage_context.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unordered_set>

#include "pickle_check.h"

namespace megatron::models::common {

void write_archive(const c10::IValue& value, const std::function<void(const void*, size_t)>& write) {
  std::vector<char> pickle_data;
  // Like torch::jit::pickle_save, but with tag_aggregates = false: no torch.jit type tags, which
  // torch.load(weights_only=True) refuses.
  torch::jit::Pickler pickler(
      [&](const char* buf, size_t size) { pickle_data.insert(pickle_data.end(), buf, buf + size); },
      /*tensor_table=*/nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) -> size_t {
    write(data, size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickle_data.data(), pickle_data.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
}

namespace {

// Every tensor must lie inside its storage: LibTorch's unpickler sets a tensor's offset, sizes and
// strides as the pickle says, without checking them against the bytes behind it.
void check_tensor_bounds(const c10::IValue& root, const std::string& path) {
  std::vector<c10::IValue> pending{root};  // a worklist, not recursion (check_pickle bounds the depth)
  std::unordered_set<const void*> seen;    // a container the memo shares is walked once, not once per path
  while (!pending.empty()) {
    const c10::IValue v = std::move(pending.back());
    pending.pop_back();
    if ((v.isTuple() || v.isList() || v.isGenericDict()) && !seen.insert(v.internalToPointer()).second) continue;
    if (v.isTuple()) {
      for (const auto& e : v.toTupleRef().elements()) pending.push_back(e);
    } else if (v.isList()) {
      for (const auto& e : v.toListRef()) pending.push_back(e);
    } else if (v.isGenericDict()) {
      for (const auto& e : v.toGenericDict()) pending.push_back(e.key()), pending.push_back(e.value());
    } else if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.numel() == 0) continue;
      int64_t last = t.storage_offset();  // the last element's index in the storage
      bool fits = last >= 0;
      for (int64_t d = 0; d < t.dim(); ++d) {
        int64_t step = 0;
        fits = fits && t.stride(d) >= 0 && !__builtin_mul_overflow(t.size(d) - 1, t.stride(d), &step) &&
               !__builtin_add_overflow(last, step, &last);
      }
      int64_t end = 0;
      fits = fits && !__builtin_add_overflow(last, 1, &end) &&
             !__builtin_mul_overflow(end, static_cast<int64_t>(t.element_size()), &end) &&
             static_cast<uint64_t>(end) <= t.storage().nbytes();
      TORCH_CHECK(fits, "a tensor of shape ", t.sizes(), ", strides ", t.strides(), " and offset ", t.storage_offset(),
                  " reaches past its storage of ", t.storage().nbytes(), " bytes");
    }
  }
}

}  // namespace

c10::IValue read_archive(const std::string& path) {
  TORCH_CHECK(std::filesystem::is_regular_file(path), "[serialization] ", path, " does not exist");
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    // Each record must lie inside the file, so that no declared size is allocated unread; each
    // storage is its record, whatever element count the pickle claims for it.
    const uint64_t file_size = std::filesystem::file_size(path);
    auto storages = std::make_shared<torch::jit::DeserializationStorageContext>();
    for (const auto& name : reader.getAllRecords()) {
      TORCH_CHECK(reader.getRecordOffset(name) + reader.getRecordSize(name) <= file_size, "record '", name, "' claims ",
                  reader.getRecordSize(name), " bytes past the end of the file");
      if (name.rfind("data/", 0) != 0) continue;
      auto [bytes, size] = reader.getRecord(name);
      storages->addStorage(name.substr(5), c10::Storage(c10::Storage::use_byte_size_t(), size, std::move(bytes),
                                                        /*allocator=*/nullptr, /*resizable=*/false));
    }
    TORCH_CHECK(reader.hasRecord("data.pkl"), "no data.pkl record");
    auto [pickle, pickle_size] = reader.getRecord("data.pkl");
    detail::check_pickle(static_cast<const uint8_t*>(pickle.get()), pickle_size, "data.pkl");
    c10::IValue value = torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                                          std::nullopt, std::nullopt, c10::Device(c10::kCPU), reader,
                                                          torch::jit::Unpickler::defaultTypeParser, storages);
    check_tensor_bounds(value, path);
    return value;
  } catch (const std::exception& e) {  // c10::Error, or std::out_of_range from the unpickler's .at()
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    TORCH_CHECK(false, "[serialization] ", path, " is not a readable torch.save archive (truncated or corrupt?): ",
                c10_error ? c10_error->what_without_backtrace() : e.what());
  }
}

void save_tensor_dict(const std::string& path, const std::map<std::string, at::Tensor>& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : tensors) dict.insert(name, t.detach().cpu().contiguous());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TORCH_CHECK(out, "[serialization] cannot create ", tmp);
    write_archive(dict, [&](const void* data, size_t size) {  // must not throw (write_archive)
      if (out) out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    });
    out.close();
    TORCH_CHECK(out, "[serialization] writing ", tmp, " failed (disk full?)");
  }
  TORCH_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[serialization] cannot rename ", tmp, " to ", path);
}

std::map<std::string, at::Tensor> load_tensor_dict(const std::string& path) {
  c10::IValue value = read_archive(path);
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
