#include "megatron/training/num_microbatches_calculator.h"

#include <algorithm>

namespace megatron::training {

int64_t get_current_global_batch_size(const Arguments& args, int64_t consumed_samples) {
  const int64_t gbs = *args.global_batch_size;
  if (args.rampup_batch_size.empty()) return gbs;
  const int64_t start = args.rampup_batch_size[0], increment = args.rampup_batch_size[1];
  const int64_t samples = args.rampup_batch_size[2];
  if (consumed_samples > samples) return gbs;
  // In doubles, as Megatron-LM's int(consumed / (samples / increments)).
  const double per_increment = static_cast<double>(samples) / static_cast<double>((gbs - start) / increment);
  const auto steps = static_cast<int64_t>(static_cast<double>(consumed_samples) / per_increment);
  return std::min(gbs, start + steps * increment);
}

int64_t get_num_microbatches(const Arguments& args, int64_t consumed_samples) {
  return get_current_global_batch_size(args, consumed_samples) / (args.micro_batch_size * args.data_parallel_size);
}

}  // namespace megatron::training
