// all_reduce bus bandwidth of ProcessGroup on host tensors, next to a plain MPI_Allreduce loop
// on the same buffers in the same run. Launch: mpirun -np N build/bin/allreduce_bench
// Bus bandwidth follows nccl-tests: bytes / time * 2 (n - 1) / n.
#include <ATen/ATen.h>
// The C API only (as the library's MPI backend): the C++ bindings need extra libraries.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>

#include "megatron/comm/process_group.h"

namespace {

// Seconds per call, the slowest rank's, over `iters` calls.
template <typename Fn>
double time_per_call(int iters, Fn fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) fn();
  double local = (MPI_Wtime() - start) / iters, slowest = 0;
  MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"all_reduce bus bandwidth: megatron ProcessGroup vs plain MPI_Allreduce"};
  int64_t min_bytes = 1 << 10, max_bytes = int64_t(256) << 20;
  int rounds = 5;
  app.add_option("--min-bytes", min_bytes, "smallest message")->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "largest message")->capture_default_str();
  app.add_option("--rounds", rounds, "alternating rounds per size; the best of each method counts")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    using namespace megatron::comm;
    auto world = init_distributed(LauncherEnv::from_environment());
    const int n = world->size();
    const double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
    if (world->rank() == 0) {
      std::printf("# all_reduce(sum) of float32 host tensors, %d ranks\n", n);
      std::printf("%12s %8s %14s %14s %8s\n", "bytes", "iters", "megatron GB/s", "MPI GB/s", "ratio");
    }
    double log_ratio_sum = 0;
    int sizes = 0;
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
      auto tensor = at::ones({bytes / 4});
      auto raw = at::ones({bytes / 4});
      // About 64 MiB reduced per round; the methods alternate so that both see the same load.
      const int iters = static_cast<int>(std::clamp<int64_t>((int64_t(64) << 20) / bytes, 2, 1000));
      auto run_ours = [&] { world->all_reduce(tensor); };
      auto run_mpi = [&] {
        MPI_Allreduce(MPI_IN_PLACE, raw.data_ptr(), raw.numel(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      };
      run_ours();
      run_mpi();
      double ours = 1e30, mpi = 1e30;
      for (int round = 0; round < rounds; ++round) {
        ours = std::min(ours, time_per_call(iters, run_ours));
        mpi = std::min(mpi, time_per_call(iters, run_mpi));
      }
      double ours_bw = bytes / ours * bus_factor / 1e9, mpi_bw = bytes / mpi * bus_factor / 1e9;
      log_ratio_sum += std::log(ours_bw / mpi_bw);
      ++sizes;
      if (world->rank() == 0)
        std::printf("%12lld %8d %14.3f %14.3f %8.3f\n", static_cast<long long>(bytes), iters, ours_bw, mpi_bw,
                    ours_bw / mpi_bw);
    }
    if (world->rank() == 0)
      std::printf("# geometric mean ratio (megatron / MPI): %.3f\n", std::exp(log_ratio_sum / sizes));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    megatron::comm::abort_job(1);
    return 1;
  }
  return 0;
}
