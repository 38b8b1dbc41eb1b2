// Progress for MPI's nonblocking collectives while their caller computes (mpi_progress.cpp).
#pragma once

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <memory>
#include <mutex>
#include <vector>

namespace megatron::comm::detail {

// One operation's requests, tested under `mutex` by their owner and by the progress thread (MPI
// forbids testing one request from two threads at once).
struct TrackedRequests {
  std::mutex mutex;
  std::vector<MPI_Request> requests;
};

// After MPI_Init_thread, with the thread level it provided (below MPI_THREAD_MULTIPLE, or with
// MEGATRON_MPI_PROGRESS=0, nothing runs and operations advance inside their owners' tests).
void init_mpi_progress(int provided);
// Tests `r` until it completes (or its owner drops it): 50 us apart, backing off to 1 ms while
// nothing completes.
void track_mpi_requests(const std::shared_ptr<TrackedRequests>& r);
// Before MPI_Finalize: the thread makes no MPI call after this returns.
void stop_mpi_progress();

}  // namespace megatron::comm::detail
