#include "training/loop/initialize.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "build_config.h"
#include "megatron/comm/launcher_env.h"
#include "megatron/cpu_math.h"
#include "megatron/logging.h"
#include "megatron/memory.h"
#include "megatron/tensor_parallel/random.h"
#include "training/loop/same_arguments.h"

#if MEGATRON_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace megatron::training::detail {
namespace {

c10::Device choose_device(const Arguments& args, int local_rank) {
  std::string name = args.device;
  // --distributed-backend gloo is Megatron-LM's way of saying: a CPU job.
  const bool gloo = args.distributed_backend == "gloo";
  if (name.empty()) name = at::hasCUDA() && !gloo ? "cuda" : "cpu";
  if (name == "cpu") return c10::Device(c10::kCPU);
  TORCH_CHECK(!gloo,
              "[training] --device cuda with --distributed-backend gloo: CUDA tensors go through NCCL "
              "here; use --distributed-backend nccl, or --device cpu");
  TORCH_CHECK(at::hasCUDA(), "[training] --device cuda, but no CUDA device is visible");
  // One GPU per local rank; a launcher that shows each rank only its own GPU leaves one visible.
  const auto index = static_cast<c10::DeviceIndex>(local_rank % static_cast<int>(at::getNumGPUs()));
#if MEGATRON_WITH_CUDA
  c10::cuda::set_device(index);
  if (!args.fp8_format.empty()) {
    // _scaled_mm's float8 GEMMs run on Ada (sm_89), Hopper and later tensor cores.
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
    TORCH_CHECK(prop->major * 10 + prop->minor >= 89,
                "[training] --fp8-format needs FP8 tensor cores (sm_89 or later); ", prop->name, " is sm_", prop->major,
                prop->minor, ". Drop --fp8-format, or run on an Ada/Hopper/Blackwell GPU");
  }
#endif
  // TF32 tensor cores for fp32 matmuls and convolutions only when asked (--tf32).
  at::globalContext().setAllowTF32CuBLAS(args.tf32);
  at::globalContext().setAllowTF32CuDNN(args.tf32);
  // cuBLAS may reduce bf16 GEMMs' partial sums in bf16 unless told not to (as torch.backends' switch).
  at::globalContext().setAllowBF16ReductionCuBLAS(!args.disable_bf16_reduced_precision_matmul);
  return c10::Device(c10::kCUDA, index);
}

// Ranks on one machine share its cores. Unless OMP_NUM_THREADS says otherwise, each rank takes
// an equal share (torchrun sets 1): oversubscribed ranks would thrash, and their threaded
// reductions would not give the same bits from run to run.
void set_intra_op_threads_per_rank(const comm::LauncherEnv& env) {
  if (env.local_world_size <= 1 || std::getenv("OMP_NUM_THREADS") != nullptr) return;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int threads = std::max(1, cores / env.local_world_size);
  if (threads < at::get_num_threads()) at::set_num_threads(threads);
}

void log_layout(const Arguments& args, const ParallelState& ps) {
  log_rank_0(LogLevel::kInfo, "> initialized tensor model parallel with size " +
                                  std::to_string(ps.get_tensor_model_parallel_world_size()));
  log_rank_0(LogLevel::kInfo, "> initialized pipeline model parallel with size " +
                                  std::to_string(ps.get_pipeline_model_parallel_world_size()));
  if (ps.get_context_parallel_world_size() > 1)
    log_rank_0(LogLevel::kInfo,
               "> initialized context parallel with size " + std::to_string(ps.get_context_parallel_world_size()));
  log_rank_0(LogLevel::kInfo,
             "> initialized data parallel with size " + std::to_string(ps.get_data_parallel_world_size()));
  log_rank_0(LogLevel::kInfo, "> intra-op threads per rank: " + std::to_string(at::get_num_threads()));
  if (const auto ignored = ignored_megatron_flags(args); !ignored.empty()) {
    std::string names;
    for (const auto& f : ignored) names += " " + f;
    log_rank_0(LogLevel::kWarn, "these Megatron-LM flags have no effect in megatron-cpp (see --help):" + names);
  }
}

// --logging-level (else $MEGATRON_LOGGING_LEVEL), Python's numbers: at 10 (DEBUG) or below the
// debug lines show. Higher levels change nothing: the lines logged here at info are the ones
// Megatron-LM prints without its logger, which its level does not silence either.
void apply_logging_level(const Arguments& args, const comm::LauncherEnv& env) {
  std::optional<int64_t> level = args.logging_level;
  if (const char* from_env = std::getenv("MEGATRON_LOGGING_LEVEL"); !level && from_env && *from_env) {
    char* end = nullptr;
    const long long value = std::strtoll(from_env, &end, 10);
    TORCH_CHECK(*end == '\0', "[training] MEGATRON_LOGGING_LEVEL must be a number (Python's logging levels), got '",
                from_env, "'");
    level = value;
  }
  if (!level) return;
  log_rank_0(LogLevel::kInfo, "Setting logging level to " + std::to_string(*level));
  if (*level <= 10) init_logging({env.rank, env.world_size, "debug"});
}

}  // namespace

uint64_t stage_seed(const Arguments& args, const ParallelState& ps) {
  return args.seed + 100 * ps.get_pipeline_model_parallel_rank();
}

Initialized initialize_megatron(const Arguments& args, std::shared_ptr<comm::ProcessGroup> world) {
  const auto env = comm::LauncherEnv::from_environment();
  TORCH_CHECK(!args.local_rank || *args.local_rank == env.local_rank, "[training] --local-rank ",
              args.local_rank.value_or(0), " disagrees with the launcher's local rank ", env.local_rank,
              " (LOCAL_RANK or the MPI launcher's variable)");
  // A program (or Python script) that did not set up logging for its rank still logs once per job.
  if (logging_world_size() != env.world_size) init_logging({env.rank, env.world_size, ""});
  apply_logging_level(args, env);
  const c10::Device device = choose_device(args, env.local_rank);
  if (!args.no_cpu_allocator_cache) enable_cpu_allocator_cache();
  set_intra_op_threads_per_rank(env);
  warm_up_cpu_math();
  if (!world) {
    comm::DistributedOptions options;
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(args.distributed_timeout_minutes * 60000));
    options.device_type = device.type();
    world = comm::init_distributed(env, options);
  }
  TORCH_CHECK(world->size() == args.world_size, "[training] the arguments were validated for world size ",
              args.world_size, " but the job has ", world->size(), " ranks");
  const auto vpp = args.virtual_pipeline_model_parallel_size;
  // Before any group is made from them: ranks with other parallel sizes would build other groups.
  check_ranks_have_the_same_arguments(args, *world);
  auto ps = ParallelState::initialize_model_parallel(
      world, static_cast<int>(args.tensor_model_parallel_size), static_cast<int>(args.pipeline_model_parallel_size),
      vpp ? std::optional<int>(static_cast<int>(*vpp)) : std::nullopt, static_cast<int>(args.context_parallel_size),
      static_cast<int>(args.expert_model_parallel_size), expert_tp_size_of(args), args.use_tp_pp_dp_mapping,
      std::vector<int>(args.hierarchical_context_parallel_sizes.begin(),
                       args.hierarchical_context_parallel_sizes.end()));
  log_layout(args, ps);
  // Megatron-LM's _set_random_seed: one seed per pipeline stage, TP-region states per TP rank.
  const uint64_t seed = stage_seed(args, ps);
  auto rng_tracker = tensor_parallel::model_parallel_manual_seed(seed, ps.get_tensor_model_parallel_rank(), device);
  return Initialized{device, std::move(ps), std::move(rng_tracker)};
}

}  // namespace megatron::training::detail
