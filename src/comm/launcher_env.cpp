#include "megatron/comm/launcher_env.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <optional>
#include <vector>

namespace megatron::comm {
namespace {

// One launcher's view of this process, with the variable names it came from (for errors).
struct Reading {
  Launcher launcher;
  std::string rank_var, size_var;
  int rank, world_size, local_rank, local_world_size;
};

struct Scheme {
  Launcher launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

constexpr Scheme kSchemes[] = {
    {Launcher::kOpenMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {Launcher::kPMI, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {Launcher::kTorchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};
constexpr const char* kTorchrunRendezvous[] = {"MASTER_ADDR", "MASTER_PORT"};

std::optional<std::string> lookup(const std::map<std::string, std::string>& vars, const std::string& name) {
  auto it = vars.find(name);
  if (it == vars.end()) return std::nullopt;
  return it->second;
}

int parse_int(const std::string& name, const std::string& value) {
  size_t used = 0;
  long parsed = 0;
  try {
    parsed = std::stol(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TORCH_CHECK(used == value.size() && !value.empty() && parsed >= 0 && parsed <= (1L << 30), "[launcher] ", name, "='",
              value, "' is not a non-negative integer");
  return static_cast<int>(parsed);
}

std::optional<Reading> read_scheme(const Scheme& s, const std::map<std::string, std::string>& vars) {
  auto rank = lookup(vars, s.rank);
  auto size = lookup(vars, s.size);
  if (!rank && !size) return std::nullopt;
  TORCH_CHECK(rank && size, "[launcher] ", to_string(s.launcher), " environment is partial: ", rank ? s.rank : s.size,
              " is set but ", rank ? s.size : s.rank, " is not; set both or neither");
  Reading r{s.launcher, s.rank, s.size, parse_int(s.rank, *rank), parse_int(s.size, *size), 0, 1};
  TORCH_CHECK(r.world_size >= 1, "[launcher] ", s.size, "=", r.world_size, " must be at least 1");
  TORCH_CHECK(r.rank < r.world_size, "[launcher] ", s.rank, "=", r.rank, " is out of range for ", s.size, "=",
              r.world_size, " (expected 0..", r.world_size - 1, ")");

  auto local_rank = lookup(vars, s.local_rank);
  auto local_size = lookup(vars, s.local_size);
  // Without local information the job is taken to be on one node.
  r.local_rank = local_rank ? parse_int(s.local_rank, *local_rank) : r.rank;
  r.local_world_size = local_size ? parse_int(s.local_size, *local_size) : r.world_size;
  TORCH_CHECK(r.local_world_size >= 1 && r.local_world_size <= r.world_size, "[launcher] ", s.local_size, "=",
              r.local_world_size, " must be between 1 and ", s.size, "=", r.world_size);
  TORCH_CHECK(r.local_rank < r.local_world_size, "[launcher] ", s.local_rank, "=", r.local_rank,
              " is out of range for ", local_size ? s.local_size : s.size, "=", r.local_world_size);
  return r;
}

// srun's task variables. SLURM_STEP_NUM_TASKS exists only inside an srun step: a batch script's
// own shell (SLURM_PROCID=0, SLURM_NTASKS=N) is not taken for rank 0 of N. Read only when no other
// launcher's variables are there (mpirun and torchrun run inside SLURM jobs too).
constexpr const char* kSlurmVariables[] = {
    "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_NODEID", "SLURM_STEP_NODELIST",  "SLURM_JOB_ID"};

// "4(x2),3" -> {4, 4, 3}: the tasks on each node of the step.
std::vector<int> slurm_tasks_per_node(const std::string& value) {
  std::vector<int> counts;
  size_t pos = 0;
  while (pos < value.size()) {
    size_t end = value.find(',', pos);
    if (end == std::string::npos) end = value.size();
    const std::string item = value.substr(pos, end - pos);
    const size_t paren = item.find("(x");
    const int count = parse_int("SLURM_STEP_TASKS_PER_NODE", item.substr(0, paren));
    const int repeat = paren == std::string::npos
                           ? 1
                           : parse_int("SLURM_STEP_TASKS_PER_NODE", item.substr(paren + 2, item.size() - paren - 3));
    counts.insert(counts.end(), repeat, count);
    pos = end + 1;
  }
  return counts;
}

// The first host of a SLURM node list: "gpu[07-10,12],cpu3" -> "gpu07".
std::string slurm_first_host(const std::string& nodelist) {
  const size_t bracket = nodelist.find('[');
  const size_t comma = nodelist.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) return nodelist.substr(0, comma);
  const size_t first_end = nodelist.find_first_of(",-]", bracket + 1);
  return nodelist.substr(0, bracket) + nodelist.substr(bracket + 1, first_end - bracket - 1);
}

std::optional<Reading> read_slurm(const std::map<std::string, std::string>& vars) {
  auto rank = lookup(vars, "SLURM_PROCID");
  auto size = lookup(vars, "SLURM_STEP_NUM_TASKS");
  if (!rank || !size) return std::nullopt;
  Reading r{Launcher::kSlurm,
            "SLURM_PROCID",
            "SLURM_STEP_NUM_TASKS",
            parse_int("SLURM_PROCID", *rank),
            parse_int("SLURM_STEP_NUM_TASKS", *size),
            0,
            1};
  TORCH_CHECK(r.world_size >= 1 && r.rank < r.world_size, "[launcher] SLURM_PROCID=", r.rank,
              " is out of range for SLURM_STEP_NUM_TASKS=", r.world_size);
  auto local_rank = lookup(vars, "SLURM_LOCALID");
  r.local_rank = local_rank ? parse_int("SLURM_LOCALID", *local_rank) : r.rank;
  r.local_world_size = r.world_size;
  auto per_node = lookup(vars, "SLURM_STEP_TASKS_PER_NODE");
  auto node = lookup(vars, "SLURM_NODEID");
  if (per_node && node) {
    const auto counts = slurm_tasks_per_node(*per_node);
    const int n = parse_int("SLURM_NODEID", *node);
    TORCH_CHECK(n < static_cast<int>(counts.size()), "[launcher] SLURM_NODEID=", n, " but SLURM_STEP_TASKS_PER_NODE='",
                *per_node, "' lists ", counts.size(), " nodes");
    r.local_world_size = counts[n];
  }
  TORCH_CHECK(r.local_rank < r.local_world_size, "[launcher] SLURM_LOCALID=", r.local_rank, " is out of range for ",
              r.local_world_size, " tasks on this node");
  return r;
}

}  // namespace

const char* to_string(Launcher launcher) {
  switch (launcher) {
    case Launcher::kNone: return "single process";
    case Launcher::kOpenMPI: return "OpenMPI";
    case Launcher::kPMI: return "PMI";
    case Launcher::kTorchrun: return "torchrun";
    case Launcher::kSlurm: return "SLURM (srun)";
  }
  return "unknown";
}

LauncherEnv LauncherEnv::from_variables(const std::map<std::string, std::string>& vars) {
  std::vector<Reading> readings;
  for (const auto& scheme : kSchemes) {
    if (auto r = read_scheme(scheme, vars)) readings.push_back(*r);
  }

  if (readings.empty()) {
    if (auto slurm = read_slurm(vars)) readings.push_back(*slurm);
  }
  LauncherEnv env;
  if (readings.empty()) return env;

  // Several launchers may be visible (torchrun-style variables exported under mpirun); they
  // must describe the same process.
  const Reading& first = readings.front();
  for (const Reading& other : readings) {
    TORCH_CHECK(other.rank == first.rank && other.world_size == first.world_size,
                "[launcher] contradictory environment: ", first.rank_var, "=", first.rank, " ", first.size_var, "=",
                first.world_size, " but ", other.rank_var, "=", other.rank, " ", other.size_var, "=", other.world_size,
                "; unset one launcher's variables");
  }
  env.launcher = first.launcher;
  env.rank = first.rank;
  env.world_size = first.world_size;
  env.local_rank = first.local_rank;
  env.local_world_size = first.local_world_size;

  auto addr = lookup(vars, kTorchrunRendezvous[0]);
  auto port = lookup(vars, kTorchrunRendezvous[1]);
  if (addr) env.master_addr = *addr;
  if (port) env.master_port = parse_int(kTorchrunRendezvous[1], *port);
  if (env.launcher == Launcher::kSlurm) {
    // Without MASTER_ADDR/MASTER_PORT: the step's first node, and a port from the job id, so that
    // every task of the step agrees without being told.
    auto nodes = lookup(vars, "SLURM_STEP_NODELIST");
    if (!addr && nodes) env.master_addr = slurm_first_host(*nodes);
    auto job = lookup(vars, "SLURM_JOB_ID");
    if (!port && job) env.master_port = 15000 + parse_int("SLURM_JOB_ID", *job) % 20000;
  }
  if (env.launcher == Launcher::kTorchrun && env.world_size > 1) {
    TORCH_CHECK(addr && port && !addr->empty(), "[launcher] torchrun-style launch with WORLD_SIZE=", env.world_size,
                " needs MASTER_ADDR and MASTER_PORT for the rendezvous; missing: ",
                addr && !addr->empty() ? "" : "MASTER_ADDR ", port ? "" : "MASTER_PORT");
    TORCH_CHECK(env.master_port > 0 && env.master_port < 65536, "[launcher] MASTER_PORT=", env.master_port,
                " is not a TCP port (1..65535)");
  }
  return env;
}

std::map<std::string, std::string> launcher_variables_from_environment() {
  std::map<std::string, std::string> vars;
  auto take = [&](const char* name) {
    if (const char* value = std::getenv(name)) vars[name] = value;
  };
  for (const auto& s : kSchemes) {
    take(s.rank);
    take(s.size);
    take(s.local_rank);
    take(s.local_size);
  }
  for (const char* name : kTorchrunRendezvous) take(name);
  for (const char* name : kSlurmVariables) take(name);
  return vars;
}

LauncherEnv LauncherEnv::from_environment() {
  return from_variables(launcher_variables_from_environment());
}

}  // namespace megatron::comm
