#include "megatron/models/common/safetensors.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>
#include <vector>

#include "input_files.h"

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
  const std::string where = "[safetensors] " + path;
  megatron::detail::check_regular_file(path, where);
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in, where, ": cannot be read");
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char len[8] = {};
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  // The safetensors package's own bounds: a header of at most 100,000,000 bytes, starting with '{'.
  TORCH_CHECK(in && file_size >= 8 && n <= file_size - 8 && n <= 100'000'000, where, ": header length ", n,
              " does not fit the file (", file_size, " bytes) or the format's 100,000,000-byte limit");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  TORCH_CHECK(in && !text.empty() && text[0] == '{', where, ": the header does not start with '{'");
  const nlohmann::json header = megatron::detail::parse_json(text, where, /*refuse_repeated_keys=*/true);
  TORCH_CHECK(header.is_object(), where, ": header is not an object");
  const uint64_t data_start = 8 + n, data_size = file_size - data_start;
  struct Entry {
    std::string name;
    at::ScalarType type;
    std::vector<int64_t> sizes;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  auto is_size = [](const nlohmann::json& v) {  // a dimension, as LibTorch holds one
    return v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
  };
  auto is_offset = [](const nlohmann::json& v) { return v.is_number_unsigned(); };
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      const bool strings =
          info.is_object() && std::all_of(info.begin(), info.end(), [](const auto& v) { return v.is_string(); });
      TORCH_CHECK(strings, where, ": \"__metadata__\" must map strings to strings");
      continue;
    }
    const std::string shown = megatron::detail::excerpt(name);
    const bool complete =
        info.is_object() && info.contains("dtype") && info["dtype"].is_string() && info.contains("shape") &&
        info["shape"].is_array() && std::all_of(info["shape"].begin(), info["shape"].end(), is_size) &&
        info.contains("data_offsets") && info["data_offsets"].is_array() && info["data_offsets"].size() == 2 &&
        std::all_of(info["data_offsets"].begin(), info["data_offsets"].end(), is_offset);
    TORCH_CHECK(complete, where, ": tensor ", shown,
                " lacks dtype, shape or data_offsets (or they are not a string and non-negative integers)");
    const std::string dtype = info["dtype"].get<std::string>();
    auto type = dtypes().find(dtype);
    TORCH_CHECK(type != dtypes().end(), where, ": tensor ", shown, " has unsupported dtype ",
                megatron::detail::excerpt(dtype));
    Entry e{name, type->second, {}, info["data_offsets"][0].get<uint64_t>(), info["data_offsets"][1].get<uint64_t>()};
    for (const auto& d : info["shape"]) e.sizes.push_back(d.get<int64_t>());
    entries.push_back(std::move(e));
  }
  // As the safetensors package validates: in offset order, each tensor starts where the one
  // before ended, holds exactly its shape's bytes (counted without overflow), and the last one
  // ends at the end of the file; no overlap, no gap.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t next = 0;
  for (const auto& e : entries) {
    uint64_t bytes = c10::elementSize(e.type);
    bool overflow = false;
    for (int64_t d : e.sizes) overflow = overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
    TORCH_CHECK(!overflow, where, ": tensor ", megatron::detail::excerpt(e.name),
                "'s shape holds more bytes than 2^64");
    TORCH_CHECK(e.begin == next && e.end >= e.begin && e.end - e.begin == bytes && e.end <= data_size, where,
                ": tensor ", megatron::detail::excerpt(e.name), " has offsets [", e.begin, ", ", e.end, ") for ", bytes,
                " bytes; expected it to start at ", next, " (where the tensor before it ends) and lie inside the ",
                data_size, " bytes of data");
    next = e.end;
  }
  TORCH_CHECK(next == data_size, where, ": its tensors end at byte ", next, " of the ", data_size,
              " bytes of data; the rest belongs to no tensor");
  std::map<std::string, at::Tensor> out;
  for (const auto& e : entries) {
    auto t = at::empty(e.sizes, at::TensorOptions().dtype(e.type));
    in.seekg(static_cast<std::streamoff>(data_start + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    TORCH_CHECK(in, where, ": cannot read tensor ", megatron::detail::excerpt(e.name));
    out[e.name] = t;
  }
  return out;
}

}  // namespace megatron::models::common
