// The generators Megatron-LM seeds beside torch's (Python's random and numpy's global
// RandomState), as their seeded states, for the rng_state a Megatron-LM loader restores.
// Private to src/training.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>

namespace megatron::training::detail {

// random.getstate() after random.seed(seed): (3, (624 words..., 624), None).
c10::IValue python_random_state(uint64_t seed);
// numpy.random.get_state() after numpy.random.seed(seed), the key as a list (set_state takes it):
// ("MT19937", [624 words], 624, 0, 0.0).
c10::IValue numpy_random_state(uint32_t seed);

}  // namespace megatron::training::detail
