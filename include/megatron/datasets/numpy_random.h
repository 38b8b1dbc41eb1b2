// numpy's legacy RandomState(seed) as far as Megatron's index building uses it: MT19937 seeded
// from a 32-bit integer and RandomState.shuffle (Fisher-Yates with masked rejection sampling),
// so document and shuffle indices match Megatron-LM's bit for bit.
#pragma once

#include "megatron/export.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>

namespace megatron::datasets {

class MEGATRON_API NumpyRandomState {
 public:
  // numpy seeds an integer with MT19937's reference init_genrand, which is std::mt19937's.
  explicit NumpyRandomState(uint32_t seed) : engine_(seed) {}

  uint32_t next_uint32() { return static_cast<uint32_t>(engine_()); }
  // numpy's mt19937_next64: high word first.
  uint64_t next_uint64() {
    const uint64_t hi = next_uint32();
    return hi << 32 | next_uint32();
  }

  // Uniform in [0, max]: draw under the smallest all-ones mask >= max, reject values above max
  // (numpy's random_interval; 32-bit draws while max fits in 32 bits).
  uint64_t random_interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    uint64_t value;
    if (max <= 0xffffffffULL) {
      while ((value = (next_uint32() & mask)) > max) {
      }
    } else {
      while ((value = (next_uint64() & mask)) > max) {
      }
    }
    return value;
  }

  // RandomState.shuffle of a 1-D array: i from n-1 down to 1 swaps x[i] with x[interval(i)].
  // The partners of a block of swaps are drawn first (the same draws in the same order) and their
  // cache lines fetched: an epoch's index outgrows the cache, and a miss per swap dominated.
  template <typename T>
  void shuffle(T* data, int64_t n) {
    constexpr int64_t kBlock = 64;
    int64_t partner[kBlock];
    for (int64_t top = n - 1; top >= 1; top -= kBlock) {
      const int64_t count = std::min(kBlock, top);  // i = top, top-1, ..., top-count+1 >= 1
      for (int64_t k = 0; k < count; ++k) {
        partner[k] = static_cast<int64_t>(random_interval(static_cast<uint64_t>(top - k)));
        __builtin_prefetch(data + partner[k], 1);
      }
      for (int64_t k = 0; k < count; ++k) std::swap(data[top - k], data[partner[k]]);
    }
  }

 private:
  std::mt19937 engine_;
};

// numpy's np.random.default_rng(seed) (SeedSequence -> PCG64, XSL-RR output) and the
// Generator.integers path for 32-bit dtypes (Lemire's bounded draw), which Megatron-LM's mock
// dataset uses for its document lengths.
class MEGATRON_API NumpyPCG64Generator {
 public:
  explicit NumpyPCG64Generator(uint64_t seed);

  uint64_t next_uint64();
  // Two 32-bit values per 64-bit draw, low half first (numpy's buffered next32).
  uint32_t next_uint32();
  // Generator.integers(low, high, dtype=np.int32 / np.uint32) for one value in [low, high).
  int64_t integers32(int64_t low, int64_t high);

 private:
  unsigned __int128 state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

}  // namespace megatron::datasets
