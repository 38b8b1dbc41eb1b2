#include "megatron/cpu_math.h"

#include <ATen/ATen.h>

#include <mutex>

namespace megatron {

void warm_up_cpu_math() {
  static std::once_flag once;
  std::call_once(once, [] {
    // One element: no intra-op parallel region, so MKL resolves the kernel on this thread alone.
    // The list is every function ATen routes to MKL VML (ATen/cpu/vml.h), in both precisions.
    using Unary = at::Tensor (*)(const at::Tensor&);
    const Unary functions[] = {&at::acos,   &at::asin, &at::atan, &at::cos,   &at::erf,  &at::erfc,
                               &at::erfinv, &at::exp,  &at::log,  &at::log10, &at::log2, &at::sin,
                               &at::sqrt,   &at::tan,  &at::tanh, &at::trunc};
    for (const auto dtype : {at::kFloat, at::kDouble}) {
      const at::Tensor x = at::full({1}, 0.5, at::TensorOptions().dtype(dtype));
      for (Unary f : functions) (void)f(x);
    }
  });
}

}  // namespace megatron
