// The event file format, written by hand: an Event is four protobuf fields and a TFRecord is a
// length and two CRC32Cs. Linking libprotobuf with TensorFlow's .proto files for that would add a
// non-header-only dependency the GPU machine does not have, for about forty lines of encoding.
#include "megatron/training/tensorboard_writer.h"

#include <c10/util/Exception.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace megatron::training {
namespace {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord frames use it; not crc32.h's
// IEEE CRC. TensorBoard's reader checks both of a record's CRCs (tests/python/test_tensorboard.py).
uint32_t crc32c(const std::string& bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

// TFRecord's masked CRC: rotated right by 15 bits, plus a constant.
uint32_t masked_crc(const std::string& bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

template <typename T>
std::string little_endian(T value) {  // x86 and aarch64 Linux are little-endian
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

// Protobuf fields by wire type: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
std::string field_key(int number, int wire_type) {
  return varint(static_cast<uint64_t>(number) << 3 | wire_type);
}
std::string bytes_field(int number, const std::string& bytes) {
  return field_key(number, 2) + varint(bytes.size()) + bytes;
}

// tensorboard's Event: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string),
// summary = 5 (Summary { repeated Value value = 1 }, Value { tag = 1, simple_value = 2 (float) }).
std::string event(int64_t step, const std::string& payload) {
  const double wall_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return field_key(1, 1) + little_endian(wall_time) + field_key(2, 0) + varint(static_cast<uint64_t>(step)) + payload;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir, int64_t queue_size) : queue_size_(queue_size) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TORCH_CHECK(!ec, "[tensorboard] cannot create --tensorboard-dir ", dir, ": ", ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // The pid keeps two runs started in the same second apart (SummaryWriter adds it too).
  path_ = (std::filesystem::path(dir) /
           ("events.out.tfevents." + std::to_string(seconds) + "." + host + "." + std::to_string(getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  TORCH_CHECK(file_ != nullptr, "[tensorboard] cannot write ", path_, ": ", std::strerror(errno));
  write_record(event(0, bytes_field(3, "brain.Event:2")));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ == nullptr) return;
  std::fflush(file_);
  std::fclose(file_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  if (file_ == nullptr) return;
  const std::string summary_value = bytes_field(1, tag) + field_key(2, 5) + little_endian(static_cast<float>(value));
  write_record(event(step, bytes_field(5, bytes_field(1, summary_value))));
  if (++queued_ >= queue_size_) flush();
}

void TensorBoardWriter::flush() {
  if (file_ == nullptr) return;
  TORCH_CHECK(std::fflush(file_) == 0, "[tensorboard] cannot write ", path_, ": ", std::strerror(errno));
  queued_ = 0;
}

void TensorBoardWriter::write_record(const std::string& event) {
  const std::string length = little_endian(static_cast<uint64_t>(event.size()));
  const std::string record = length + little_endian(masked_crc(length)) + event + little_endian(masked_crc(event));
  TORCH_CHECK(std::fwrite(record.data(), 1, record.size(), file_) == record.size(), "[tensorboard] cannot write ",
              path_, ": ", std::strerror(errno));
}

}  // namespace megatron::training
