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

}  // namespace

const char* to_string(Launcher launcher) {
  switch (launcher) {
    case Launcher::kNone: return "single process";
    case Launcher::kOpenMPI: return "OpenMPI";
    case Launcher::kPMI: return "PMI";
    case Launcher::kTorchrun: return "torchrun";
  }
  return "unknown";
}

LauncherEnv LauncherEnv::from_variables(const std::map<std::string, std::string>& vars) {
  std::vector<Reading> readings;
  for (const auto& scheme : kSchemes) {
    if (auto r = read_scheme(scheme, vars)) readings.push_back(*r);
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
  return vars;
}

LauncherEnv LauncherEnv::from_environment() {
  return from_variables(launcher_variables_from_environment());
}

}  // namespace megatron::comm
