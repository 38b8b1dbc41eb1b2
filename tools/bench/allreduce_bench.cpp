// all_reduce bus bandwidth of ProcessGroup on host tensors, next to a plain MPI_Allreduce loop
// on the same buffers in the same run. Launch: mpirun -np N build/bin/allreduce_bench
// Bus bandwidth follows nccl-tests: bytes / time * 2 (n - 1) / n.
// --overlap: how much of an all_reduce_async launched before compute of about its own length is
// hidden by it (tools/bench/mpi_progress_bench.py runs it with and without the progress thread).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
// The C API only (as the library's MPI backend): the C++ bindings need extra libraries.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <thread>

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

// Rows of --overlap: the all_reduce_async alone (launched and waited), work of about that long
// alone, and the all_reduce_async launched before the work and waited after it; "hidden" is the
// share of the shorter of the two that the overlap saved. The work is
// matrix products on one thread (CPU training: the cores are busy), or a sleep (the host idle
// while a GPU computes).
void overlap_rows(megatron::comm::ProcessGroup& world, int64_t min_bytes, int64_t max_bytes, int rounds, bool sleep) {
  at::set_num_threads(1);
  auto a = at::rand({256, 256}), b = at::rand({256, 256});
  auto compute = [&](int k) {
    if (sleep) {
      std::this_thread::sleep_for(std::chrono::microseconds(100) * k);
      return;
    }
    for (int i = 0; i < k; ++i) a = at::mm(a, b).div_(256);
  };
  const double per_unit = time_per_call(50, [&] { compute(1); });
  if (world.rank() == 0) {
    std::printf("# all_reduce_async(sum) of float32 host tensors under %s, %d ranks\n",
                sleep ? "a sleep" : "matrix products", world.size());
    std::printf("%12s %12s %12s %14s %8s\n", "bytes", "comm ms", "compute ms", "overlapped ms", "hidden");
  }
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    auto tensor = at::ones({bytes / 4});
    double comm = 1e30, alone = 1e30, both = 1e30;
    world.all_reduce(tensor);
    for (int round = 0; round < rounds; ++round)
      comm = std::min(comm, time_per_call(3, [&] { world.all_reduce_async(tensor)->wait(); }));
    const int k = std::max(1, static_cast<int>(comm / per_unit));
    for (int round = 0; round < rounds; ++round) {
      alone = std::min(alone, time_per_call(3, [&] { compute(k); }));
      both = std::min(both, time_per_call(3, [&] {
                        auto work = world.all_reduce_async(tensor);
                        compute(k);
                        work->wait();
                      }));
    }
    if (world.rank() == 0)
      std::printf("%12lld %12.2f %12.2f %14.2f %7.0f%%\n", static_cast<long long>(bytes), comm * 1e3, alone * 1e3,
                  both * 1e3, 100.0 * std::clamp((comm + alone - both) / std::min(comm, alone), 0.0, 1.0));
  }
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
  bool overlap = false, sleep = false;
  app.add_flag("--overlap", overlap, "all_reduce_async under compute: the share of the all-reduce hidden");
  app.add_flag("--sleep", sleep, "with --overlap: the work is a sleep (an idle host), not matrix products");
  CLI11_PARSE(app, argc, argv);

  try {
    using namespace megatron::comm;
    auto world = init_distributed(LauncherEnv::from_environment());
    const int n = world->size();
    if (overlap) {
      overlap_rows(*world, min_bytes, max_bytes, rounds, sleep);
      return 0;
    }
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
