#include "megatron/datasets/npy.h"

#include <c10/util/Exception.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

#include "input_files.h"

namespace megatron::datasets {
namespace {

template <typename T>
const char* descr_of();
template <>
const char* descr_of<int16_t>() {
  return "<i2";
}
template <>
const char* descr_of<int32_t>() {
  return "<i4";
}
template <>
const char* descr_of<int64_t>() {
  return "<i8";
}
template <>
const char* descr_of<uint32_t>() {
  return "<u4";
}

size_t descr_size(const std::string& descr, const std::string& path) {
  TORCH_CHECK(descr.size() == 3 && (descr[0] == '<' || descr[0] == '|') && (descr[1] == 'i' || descr[1] == 'u'),
              "[npy] ", path, ": expected a little-endian integer array, found descr '", descr, "'");
  return static_cast<size_t>(descr[2] - '0');
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<int64_t> NpyArray::to_int64() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  const uint8_t* p = data.data();
  for (size_t i = 0; i < out.size(); ++i) {
    if (descr == "<i2") {
      int16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      out[i] = v;
    } else if (descr == "<u2") {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      out[i] = v;
    } else if (descr == "<i4") {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = v;
    } else if (descr == "<u4") {
      uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = v;
    } else if (descr == "<i8") {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      out[i] = v;
    } else
      TORCH_CHECK(false, "[npy] cannot convert descr '", descr, "' to int64");
  }
  return out;
}

void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, const void* data,
               size_t nbytes) {
  std::ostringstream dict;
  dict << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict << shape[i] << (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  dict << "), }";
  std::string header = dict.str();
  // Pad with spaces so that magic + len + header + '\n' is a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TORCH_CHECK(out, "[npy] ", tmp, ": cannot create");
    const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    out.write(magic, 8);
    const uint16_t hlen = static_cast<uint16_t>(header.size());
    out.write(reinterpret_cast<const char*>(&hlen), 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(nbytes));
    out.flush();
    TORCH_CHECK(out, "[npy] ", tmp, ": write failed");
  }
  TORCH_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[npy] ", path, ": rename from ", tmp, " failed");
}

template <typename T>
void write_npy(const std::string& path, const std::vector<T>& values, std::vector<int64_t> shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  write_npy(path, descr_of<T>(), shape, values.data(), values.size() * sizeof(T));
}
template void write_npy<int16_t>(const std::string&, const std::vector<int16_t>&, std::vector<int64_t>);
template void write_npy<int32_t>(const std::string&, const std::vector<int32_t>&, std::vector<int64_t>);
template void write_npy<int64_t>(const std::string&, const std::vector<int64_t>&, std::vector<int64_t>);
template void write_npy<uint32_t>(const std::string&, const std::vector<uint32_t>&, std::vector<int64_t>);

namespace {

// The descr and shape of a .npy header dict ("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), }"),
// each dimension a non-negative integer.
std::pair<std::string, std::vector<int64_t>> parse_header(const std::string& header, const std::string& path) {
  const auto d = header.find("'descr'");
  const auto colon = d == std::string::npos ? d : header.find(':', d);
  const auto q1 = colon == std::string::npos ? colon : header.find('\'', colon + 1);
  const auto q2 = q1 == std::string::npos ? q1 : header.find('\'', q1 + 1);
  TORCH_CHECK(q2 != std::string::npos, "[npy] ", path, ": header without descr: ", header);
  TORCH_CHECK(header.find("'fortran_order': False") != std::string::npos, "[npy] ", path, ": expected a C-order array");
  const auto key = header.find("'shape'");
  const auto s = key == std::string::npos ? key : header.find('(', key);
  const auto e = s == std::string::npos ? s : header.find(')', s);
  TORCH_CHECK(e != std::string::npos, "[npy] ", path, ": header without a shape: ", header);
  std::vector<int64_t> shape;
  std::stringstream dims(header.substr(s + 1, e - s - 1));
  std::string item;
  while (std::getline(dims, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(item.c_str(), &end, 10);
    TORCH_CHECK(
        errno == 0 && n >= 0 && end != item.c_str() && std::string(end).find_first_not_of(' ') == std::string::npos,
        "[npy] ", path, ": shape entry '", item, "' is not a non-negative integer");
    shape.push_back(n);
  }
  return {header.substr(q1 + 1, q2 - q1 - 1), shape};
}

// Bytes of the array's data, refusing a shape whose size overflows.
size_t data_bytes(const std::string& descr, const std::vector<int64_t>& shape, const std::string& path) {
  size_t n = descr_size(descr, path);
  for (int64_t d : shape) {
    TORCH_CHECK(d == 0 || n <= std::numeric_limits<size_t>::max() / static_cast<size_t>(d), "[npy] ", path,
                ": the shape's size overflows");
    n *= static_cast<size_t>(d);
  }
  return n;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  megatron::detail::check_regular_file(path, "[npy] " + path);
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in, "[npy] ", path, ": cannot open");
  char magic[8];
  in.read(magic, 8);
  TORCH_CHECK(in && std::memcmp(magic, "\x93NUMPY", 6) == 0, "[npy] ", path,
              ": expected the .npy magic, found other bytes");
  size_t hlen = 0;
  if (magic[6] == 1) {
    uint16_t h;
    in.read(reinterpret_cast<char*>(&h), 2);
    hlen = h;
  } else {
    uint32_t h;
    in.read(reinterpret_cast<char*>(&h), 4);
    hlen = h;
  }
  std::string header(hlen, '\0');
  in.read(header.data(), static_cast<std::streamsize>(hlen));
  TORCH_CHECK(in, "[npy] ", path, ": truncated header");
  NpyArray arr;
  std::tie(arr.descr, arr.shape) = parse_header(header, path);
  const size_t nbytes = data_bytes(arr.descr, arr.shape, path);
  const auto data_start = in.tellg();
  in.seekg(0, std::ios::end);
  TORCH_CHECK(in.tellg() - data_start >= static_cast<std::streamoff>(nbytes), "[npy] ", path, ": expected ", nbytes,
              " data bytes, the file is shorter (truncated?)");
  in.seekg(data_start);
  arr.data.resize(nbytes);
  in.read(reinterpret_cast<char*>(arr.data.data()), static_cast<std::streamsize>(nbytes));
  TORCH_CHECK(in && static_cast<size_t>(in.gcount()) == nbytes, "[npy] ", path, ": expected ", nbytes,
              " data bytes, the file is shorter (truncated?)");
  return arr;
}

int64_t MappedNpy::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

MappedNpy map_npy(const std::string& path) {
  auto file = std::make_shared<const MappedFile>(path);
  const uint8_t* p = file->data();
  const size_t size = file->size();
  TORCH_CHECK(size >= 10 && std::memcmp(p, "\x93NUMPY", 6) == 0, "[npy] ", path,
              ": expected the .npy magic, found other bytes");
  size_t hlen, start;
  if (p[6] == 1) {
    hlen = static_cast<size_t>(p[8]) | static_cast<size_t>(p[9]) << 8;
    start = 10;
  } else {
    TORCH_CHECK(size >= 12, "[npy] ", path, ": truncated header");
    hlen = static_cast<size_t>(p[8]) | static_cast<size_t>(p[9]) << 8 | static_cast<size_t>(p[10]) << 16 |
           static_cast<size_t>(p[11]) << 24;
    start = 12;
  }
  TORCH_CHECK(start + hlen <= size, "[npy] ", path, ": truncated header");
  const std::string header(reinterpret_cast<const char*>(p + start), hlen);
  MappedNpy out;
  std::tie(out.descr, out.shape) = parse_header(header, path);
  const size_t nbytes = data_bytes(out.descr, out.shape, path);
  TORCH_CHECK(start + hlen + nbytes == size, "[npy] ", path, ": expected ", start + hlen + nbytes,
              " bytes for shape and descr '", out.descr, "', found ", size, " (truncated?)");
  out.data = p + start + hlen;
  out.file = std::move(file);
  return out;
}

}  // namespace megatron::datasets
