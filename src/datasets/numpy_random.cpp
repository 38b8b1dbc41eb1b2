#include "megatron/datasets/numpy_random.h"

#include <c10/util/Exception.h>

#include <vector>

namespace megatron::datasets {
namespace {

// SeedSequence's hashing constants.
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875;
constexpr uint32_t kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(2549297995355413924ULL) << 64) | 4865540595714422341ULL;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  return value ^ (value >> 16);
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  return r ^ (r >> 16);
}

// SeedSequence(seed).generate_state(4, np.uint64) with the default pool of 4 words.
std::vector<uint64_t> seed_sequence_state(uint64_t seed) {
  std::vector<uint32_t> entropy;  // the integer as little-endian 32-bit words
  do {
    entropy.push_back(static_cast<uint32_t>(seed & 0xFFFFFFFF));
    seed >>= 32;
  } while (seed > 0);
  uint32_t pool[4];
  uint32_t hc = kInitA;
  for (size_t i = 0; i < 4; ++i) pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0, hc);
  for (size_t src = 0; src < 4; ++src) {
    for (size_t dst = 0; dst < 4; ++dst) {
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hc));
    }
  }
  for (size_t src = 4; src < entropy.size(); ++src) {
    for (size_t dst = 0; dst < 4; ++dst) pool[dst] = mix(pool[dst], hashmix(entropy[src], hc));
  }
  uint32_t words[8];
  uint32_t hb = kInitB;
  for (size_t i = 0; i < 8; ++i) {
    uint32_t v = pool[i % 4];
    v ^= hb;
    hb *= kMultB;
    v *= hb;
    words[i] = v ^ (v >> 16);
  }
  std::vector<uint64_t> out(4);
  for (size_t k = 0; k < 4; ++k) out[k] = words[2 * k] | static_cast<uint64_t>(words[2 * k + 1]) << 32;
  return out;
}

}  // namespace

NumpyPCG64Generator::NumpyPCG64Generator(uint64_t seed) {
  const auto v = seed_sequence_state(seed);
  const unsigned __int128 initstate = static_cast<unsigned __int128>(v[0]) << 64 | v[1];
  const unsigned __int128 initseq = static_cast<unsigned __int128>(v[2]) << 64 | v[3];
  state_ = 0;
  inc_ = initseq << 1 | 1;
  state_ = state_ * kPcgMultiplier + inc_;
  state_ += initstate;
  state_ = state_ * kPcgMultiplier + inc_;
}

uint64_t NumpyPCG64Generator::next_uint64() {
  state_ = state_ * kPcgMultiplier + inc_;
  const auto high = static_cast<uint64_t>(state_ >> 64), low = static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(high >> 58);
  const uint64_t x = high ^ low;
  return (x >> rot) | (x << ((64 - rot) & 63));
}

uint32_t NumpyPCG64Generator::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const uint64_t next = next_uint64();
  has_uint32_ = true;
  uinteger_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next & 0xFFFFFFFF);
}

int64_t NumpyPCG64Generator::integers32(int64_t low, int64_t high) {
  TORCH_CHECK(high > low && high - low <= (int64_t{1} << 32), "[numpy_random] integers: expected ",
              "0 < high - low <= 2^32, got [", low, ", ", high, ")");
  const auto rng = static_cast<uint32_t>(high - low - 1);
  if (rng == 0) return low;
  if (rng == 0xFFFFFFFF) return low + next_uint32();
  const uint32_t rng_excl = rng + 1;
  uint64_t m = static_cast<uint64_t>(next_uint32()) * rng_excl;
  auto leftover = static_cast<uint32_t>(m & 0xFFFFFFFF);
  if (leftover < rng_excl) {
    const uint32_t threshold = (UINT32_MAX - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<uint64_t>(next_uint32()) * rng_excl;
      leftover = static_cast<uint32_t>(m & 0xFFFFFFFF);
    }
  }
  return low + static_cast<int64_t>(m >> 32);
}

}  // namespace megatron::datasets
