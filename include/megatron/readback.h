// Device-to-host reads. Each stalls the host until the device has caught up, so the train loop
// makes one per iteration; going through here counts them, which is how the tests and the
// benchmarks check that.
#pragma once

#include "megatron/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace megatron {

// A CPU copy of t (t itself when it is on the CPU already); counted either way, so that a CPU
// run shows what a GPU run would wait for.
MEGATRON_API at::Tensor read_to_host(const at::Tensor& t);
// read_to_host calls since the process started.
MEGATRON_API int64_t host_readback_count();

}  // namespace megatron
