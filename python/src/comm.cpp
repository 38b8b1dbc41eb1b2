// megatron_cpp.LauncherEnv: rank and world size from the launcher's environment.
#include "bindings.h"
#include "megatron/comm/launcher_env.h"

void init_comm(py::module_& m) {
  using megatron::comm::Launcher;
  using megatron::comm::LauncherEnv;
  py::enum_<Launcher>(m, "Launcher")
      .value("NONE", Launcher::kNone)
      .value("OPENMPI", Launcher::kOpenMPI)
      .value("PMI", Launcher::kPMI)
      .value("TORCHRUN", Launcher::kTorchrun);
  py::class_<LauncherEnv>(m, "LauncherEnv",
                          "This process's rank, world size and local rank, read from mpirun, PMI "
                          "or torchrun-style variables (none: rank 0 of 1).")
      .def_static("from_environment", &LauncherEnv::from_environment,
                  "Reads the process environment.")
      .def_static("from_variables", &LauncherEnv::from_variables, py::arg("variables"),
                  "Same rules over a dict of variables.")
      .def_readonly("launcher", &LauncherEnv::launcher)
      .def_readonly("rank", &LauncherEnv::rank)
      .def_readonly("world_size", &LauncherEnv::world_size)
      .def_readonly("local_rank", &LauncherEnv::local_rank)
      .def_readonly("local_world_size", &LauncherEnv::local_world_size)
      .def_readonly("master_addr", &LauncherEnv::master_addr)
      .def_readonly("master_port", &LauncherEnv::master_port)
      .def("__repr__", [](const LauncherEnv& e) {
        return "LauncherEnv(launcher=" + std::string(to_string(e.launcher)) +
               ", rank=" + std::to_string(e.rank) + ", world_size=" + std::to_string(e.world_size) +
               ", local_rank=" + std::to_string(e.local_rank) + ")";
      });
}
