// Who am I in the job: rank, world size and local rank, read from whichever launcher started us
// (mpirun / OpenMPI, MPICH-style PMI, a torchrun-style environment, or SLURM's srun when none of
// those is there).
#pragma once

#include "megatron/export.h"

#include <map>
#include <string>

namespace megatron::comm {

enum class Launcher { kNone, kOpenMPI, kPMI, kTorchrun, kSlurm };

MEGATRON_API const char* to_string(Launcher launcher);

struct MEGATRON_API LauncherEnv {
  Launcher launcher = Launcher::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // Rendezvous address for torchrun-style launches (TCPStore); empty otherwise. Under srun without
  // MASTER_ADDR/MASTER_PORT: the step's first node and 15000 + SLURM_JOB_ID % 20000.
  std::string master_addr;
  int master_port = 0;

  bool is_distributed() const { return world_size > 1; }

  // Reads the process environment. A single process with no launcher variables is rank 0 of 1.
  // Partial or contradictory variables throw c10::Error naming them.
  static LauncherEnv from_environment();
  // Same rules over an explicit variable map (what from_environment() reads).
  static LauncherEnv from_variables(const std::map<std::string, std::string>& vars);
};

// The environment variables from_environment() looks at, for tests and diagnostics.
MEGATRON_API std::map<std::string, std::string> launcher_variables_from_environment();

}  // namespace megatron::comm
