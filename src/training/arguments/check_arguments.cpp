// pretrain_gpt --check-args: a launch script's flags judged without starting the run.
#include <c10/util/Exception.h>

#include <ostream>
#include <string>
#include <vector>

#include "megatron/training/arguments.h"

namespace megatron::training {

bool check_arguments(const std::vector<std::string>& args, int64_t world_size, std::ostream& out,
                     const std::string& program) {
  std::optional<Arguments> parsed;
  try {
    parsed = parse_arguments(args, world_size, program);
  } catch (const c10::Error& e) {
    out << "refused: " << e.what_without_backtrace() << "\n";
    out << program << " would not start with these flags (" << world_size << " ranks)\n";
    return false;
  }
  if (!parsed) return true;  // --help was printed
  const Arguments& a = *parsed;
  for (const auto& flag : ignored_megatron_flags(a)) {
    for (const auto& f : argument_fields())
      if (f.flag == flag) {
        std::string why = f.help;
        const std::string prefix = "accepted, no effect: ";
        if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
        out << "no effect: " << flag << ": " << why << "\n";
      }
  }
  out << program << " would start: " << world_size << " ranks, tensor-parallel " << a.tensor_model_parallel_size
      << ", pipeline-parallel " << a.pipeline_model_parallel_size;
  if (a.context_parallel_size > 1) out << ", context-parallel " << a.context_parallel_size;
  out << ", data-parallel " << a.data_parallel_size;
  if (a.expert_model_parallel_size > 1) out << " (expert-parallel " << a.expert_model_parallel_size << ")";
  out << ", " << a.num_microbatches << " micro-batches of " << a.micro_batch_size << " per step, ";
  if (a.train_iters)
    out << *a.train_iters << " iterations\n";
  else
    out << a.train_samples.value_or(0) << " samples\n";
  return true;
}

}  // namespace megatron::training
