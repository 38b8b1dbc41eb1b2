#include "megatron/models/common/serialization.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "input_files.h"
#include "unpickler.h"

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

// bytes [base, base + length) of a file, as the zip reader sees a whole archive: one record of a
// PyTorch Distributed Checkpoint .distcp file is a torch.save archive at an offset.
class FileRange final : public caffe2::serialize::ReadAdapterInterface {
 public:
  FileRange(const std::string& path, uint64_t base, uint64_t length)
      : in_(path, std::ios::binary), base_(base), length_(length) {
    TORCH_CHECK(in_, "cannot open it");
  }
  size_t size() const override { return length_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= length_) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, length_ - pos));
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(base_ + pos));
    in_.read(static_cast<char*>(buf), static_cast<std::streamsize>(n));
    return static_cast<size_t>(in_.gcount());
  }

 private:
  mutable std::ifstream in_;
  uint64_t base_, length_;
};

c10::IValue read_archive_from(caffe2::serialize::PyTorchStreamReader& reader, uint64_t archive_size) {
  // Each record must lie inside the archive, so that no declared size is allocated unread; each
  // storage is its record, whatever element count the pickle claims for it.
  std::map<std::string, c10::Storage> storages;
  for (const auto& name : reader.getAllRecords()) {
    const uint64_t offset = reader.getRecordOffset(name);
    TORCH_CHECK(offset <= archive_size && reader.getRecordSize(name) <= archive_size - offset, "record '", name,
                "' claims ", reader.getRecordSize(name), " bytes past the end of the archive");
    if (name.rfind("data/", 0) != 0) continue;
    auto [bytes, size] = reader.getRecord(name);
    storages.emplace(name.substr(5), c10::Storage(c10::Storage::use_byte_size_t(), size, std::move(bytes),
                                                  /*allocator=*/nullptr, /*resizable=*/false));
  }
  if (reader.hasRecord("byteorder")) {  // torch.save's record of the machine that wrote the storages
    auto [order, order_size] = reader.getRecord("byteorder");
    const std::string byteorder(static_cast<const char*>(order.get()), order_size);
    TORCH_CHECK(byteorder == "little", "storages written ", byteorder, "-endian; this machine reads little-endian");
  }
  TORCH_CHECK(reader.hasRecord("data.pkl"), "no data.pkl record");
  auto [pickle, pickle_size] = reader.getRecord("data.pkl");
  return detail::unpickle(
      static_cast<const uint8_t*>(pickle.get()), pickle_size,
      [&](const std::string& key) {
        auto it = storages.find(key);
        TORCH_CHECK(it != storages.end(), "data.pkl names storage '", key, "', which has no record data/", key);
        return it->second;
      },
      "data.pkl");
}

}  // namespace

c10::IValue read_archive(const std::string& path, std::optional<std::pair<uint64_t, uint64_t>> range) {
  megatron::detail::check_regular_file(path, "[serialization] " + path);
  const uint64_t file_size = std::filesystem::file_size(path);
  const std::string what = range ? path + " (bytes " + std::to_string(range->first) + " to " +
                                       std::to_string(range->first + range->second) + ")"
                                 : path;
  try {
    if (!range) {
      caffe2::serialize::PyTorchStreamReader reader(path);
      return read_archive_from(reader, file_size);
    }
    const auto [base, length] = *range;
    TORCH_CHECK(base <= file_size && length <= file_size - base, "the file has ", file_size, " bytes");
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<FileRange>(path, base, length));
    return read_archive_from(reader, length);
  } catch (const std::exception& e) {  // c10::Error, or a std::exception from the zip reader
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    TORCH_CHECK(false, "[serialization] ", what, " is not a readable torch.save archive (truncated or corrupt?): ",
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
