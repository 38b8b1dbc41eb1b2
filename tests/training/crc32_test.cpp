// The checkpoint files' CRC-32 against the standard's check value and a bit-at-a-time
// implementation written from the definition, over lengths and pieces that exercise the
// eight-byte path, the tail and chaining.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "training/checkpointing/crc32.h"

namespace megatron::training {
namespace {

uint32_t bitwise_crc32(const std::vector<unsigned char>& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Crc32, CheckValueOfTheStandard) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32_update(0, check.data(), check.size()), 0xCBF43926u);
  EXPECT_EQ(crc32_update(0, nullptr, 0), 0u);
}

TEST(Crc32, MatchesTheDefinitionInAnyPieces) {
  std::mt19937 rng(7);
  for (size_t n : {1, 7, 8, 9, 63, 64, 1000, 4099}) {
    std::vector<unsigned char> data(n);
    for (auto& b : data) b = static_cast<unsigned char>(rng());
    const uint32_t want = bitwise_crc32(data);
    EXPECT_EQ(crc32_update(0, data.data(), n), want) << n << " bytes";
    const size_t cut = n / 3;
    EXPECT_EQ(crc32_update(crc32_update(0, data.data(), cut), data.data() + cut, n - cut), want) << n << " bytes";
  }
}

}  // namespace
}  // namespace megatron::training
