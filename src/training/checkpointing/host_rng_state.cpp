// MT19937's two published seedings: init_genrand (numpy's seed of an integer) and init_by_array
// (Python's random.seed of an integer, its 32-bit words least significant first). Written out
// here because no library exposes the seeded key; tests check both against Python and numpy.
#include "training/checkpointing/host_rng_state.h"

#include <array>
#include <vector>

namespace megatron::training::detail {
namespace {

constexpr size_t kN = 624;
using Key = std::array<uint32_t, kN>;

Key init_genrand(uint32_t s) {
  Key mt{};
  mt[0] = s;
  for (uint32_t i = 1; i < kN; ++i) mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i;
  return mt;
}

Key init_by_array(const std::vector<uint32_t>& key) {
  Key mt = init_genrand(19650218u);
  size_t i = 1, j = 0;
  for (size_t k = std::max(kN, key.size()); k; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    if (++i >= kN) mt[0] = mt[kN - 1], i = 1;
    if (++j >= key.size()) j = 0;
  }
  for (size_t k = kN - 1; k; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    if (++i >= kN) mt[0] = mt[kN - 1], i = 1;
  }
  mt[0] = 0x80000000u;
  return mt;
}

}  // namespace

c10::IValue python_random_state(uint64_t seed) {
  std::vector<uint32_t> words;
  for (uint64_t n = seed; n; n >>= 32) words.push_back(static_cast<uint32_t>(n));
  if (words.empty()) words.push_back(0);
  std::vector<c10::IValue> state;
  for (uint32_t w : init_by_array(words)) state.emplace_back(static_cast<int64_t>(w));
  state.emplace_back(static_cast<int64_t>(kN));  // the index: the next draw regenerates the key
  return c10::ivalue::Tuple::create(int64_t{3}, c10::ivalue::Tuple::create(std::move(state)), c10::IValue());
}

c10::IValue numpy_random_state(uint32_t seed) {
  c10::impl::GenericList key(c10::AnyType::get());
  for (uint32_t w : init_genrand(seed)) key.push_back(static_cast<int64_t>(w));
  return c10::ivalue::Tuple::create({c10::IValue("MT19937"), c10::IValue(key), c10::IValue(static_cast<int64_t>(kN)),
                                     c10::IValue(int64_t{0}), c10::IValue(0.0)});
}

}  // namespace megatron::training::detail
