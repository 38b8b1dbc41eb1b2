// SHA-256 (FIPS 180-4), streamed: --verify-integrity's digests of checkpoint files, as
// megatron-core's integrity.json keeps them. Written here rather than taken from OpenSSL so that
// the GPU machine's build, which has no Debian packages, needs no libcrypto; checked against
// Python's hashlib (tests/python/test_torch_dist.py).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace megatron::training {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::string hex_digest();  // lowercase; ends the stream

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes so far
};

// The digest of a whole file, read in 1 MiB pieces; throws naming the file when it cannot be read.
std::string sha256_of_file(const std::string& path);

}  // namespace megatron::training
