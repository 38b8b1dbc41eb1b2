#include "megatron/models/common/safetensors.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace megatron::models::common {
namespace {

const std::map<std::string, at::ScalarType>& dtypes() {
  static const std::map<std::string, at::ScalarType> table = {
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
      {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool}};
  return table;
}

std::string dtype_name(at::ScalarType t) {
  for (const auto& [name, type] : dtypes())
    if (type == t) return name;
  TORCH_CHECK(false, "[safetensors] no safetensors dtype for ", t);
}

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::ostringstream header;
  header << "{";
  bool first = true;
  if (!metadata.empty()) {
    header << "\"__metadata__\":{";
    for (auto it = metadata.begin(); it != metadata.end(); ++it)
      header << (it == metadata.begin() ? "" : ",") << quoted(it->first) << ":" << quoted(it->second);
    header << "}";
    first = false;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header << (first ? "" : ",") << quoted(name) << ":{\"dtype\":\"" << dtype_name(t.scalar_type()) << "\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) header << (d ? "," : "") << t.size(d);
    header << "],\"data_offsets\":[" << offset << "," << offset + bytes << "]}";
    offset += bytes;
    first = false;
  }
  header << "}";
  std::string text = header.str();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TORCH_CHECK(out, "[safetensors] cannot create ", tmp);
    uint64_t n = text.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : tensors) {
      auto cpu = t.detach().to(at::kCPU).contiguous();  // one tensor at a time
      out.write(static_cast<const char*>(cpu.data_ptr()),
                static_cast<std::streamsize>(cpu.numel() * cpu.element_size()));
    }
    out.close();
    TORCH_CHECK(out, "[safetensors] writing ", tmp, " failed (disk full?)");
  }
  TORCH_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[safetensors] cannot rename ", tmp, " to ", path);
}

std::map<std::string, at::Tensor> load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in, "[safetensors] cannot read ", path);
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char len[8] = {};
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  TORCH_CHECK(in && n <= file_size - 8, "[safetensors] ", path, ": header length ", n, " does not fit the file (",
              file_size, " bytes)");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    TORCH_CHECK(false, "[safetensors] ", path, ": malformed header: ", e.what());
  }
  TORCH_CHECK(header.is_object(), "[safetensors] ", path, ": header is not an object");
  const uint64_t data_start = 8 + n;
  std::map<std::string, at::Tensor> out;
  auto is_count = [](const nlohmann::json& v) { return v.is_number_unsigned(); };
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const bool complete =
        info.is_object() && info.contains("dtype") && info["dtype"].is_string() && info.contains("shape") &&
        info["shape"].is_array() && std::all_of(info["shape"].begin(), info["shape"].end(), is_count) &&
        info.contains("data_offsets") && info["data_offsets"].is_array() && info["data_offsets"].size() == 2 &&
        std::all_of(info["data_offsets"].begin(), info["data_offsets"].end(), is_count);
    TORCH_CHECK(complete, "[safetensors] ", path, ": tensor ", name,
                " lacks dtype, shape or data_offsets (or they are not a string and non-negative integers)");
    const std::string dtype = info["dtype"].get<std::string>();
    auto type = dtypes().find(dtype);
    TORCH_CHECK(type != dtypes().end(), "[safetensors] ", path, ": tensor ", name, " has unsupported dtype ", dtype);
    std::vector<int64_t> sizes;
    for (const auto& d : info["shape"]) sizes.push_back(d.get<int64_t>());
    const auto begin = info["data_offsets"][0].get<uint64_t>();
    const auto end = info["data_offsets"][1].get<uint64_t>();
    auto t = at::empty(sizes, at::TensorOptions().dtype(type->second));
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    TORCH_CHECK(end >= begin && end - begin == bytes && data_start + end <= file_size, "[safetensors] ", path,
                ": tensor ", name, " has offsets [", begin, ", ", end, ") for ", bytes, " bytes in a file of ",
                file_size);
    in.seekg(static_cast<std::streamoff>(data_start + begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(bytes));
    TORCH_CHECK(in, "[safetensors] ", path, ": cannot read tensor ", name);
    out[name] = t;
  }
  return out;
}

}  // namespace megatron::models::common
