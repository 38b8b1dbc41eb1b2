// CPU math kernels settled before they run on several threads.
#pragma once

#include "megatron/export.h"

namespace megatron {

// LibTorch sends float and double exp, log, sqrt, tanh, erf, sin, ... on CPU to MKL's vector math
// library, which picks each function's kernel on its first call. When that first call runs on
// several intra-op threads at once, a thread can run a low-accuracy kernel for its whole chunk
// (up to ~1e-4 relative error, so a resumed run's first loss differs; pytorch/pytorch#188792).
// Calling each function once on one element, on this thread, settles the choice first.
// Idempotent; pretrain(), init_distributed() and GPTModel call it.
MEGATRON_API void warm_up_cpu_math();

}  // namespace megatron
