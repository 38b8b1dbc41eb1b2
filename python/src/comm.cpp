// Launcher environment, ProcessGroup (collectives on torch tensors, in place, without copies) and
// init_distributed. Collectives release the GIL while they wait.
#include <c10/util/Exception.h>

#include <chrono>

#include "bindings.h"
#include "megatron/comm/launcher_env.h"
#include "megatron/comm/process_group.h"

namespace {

at::DeviceType device_type_of(const py::object& device) {
  if (py::isinstance<py::str>(device)) return c10::Device(device.cast<std::string>()).type();
  return device.cast<c10::Device>().type();
}

}  // namespace

void init_comm(py::module_& m) {
  using megatron::comm::Launcher;
  using megatron::comm::LauncherEnv;
  using megatron::comm::ProcessGroup;
  using megatron::comm::ReduceOp;
  using Release = py::call_guard<py::gil_scoped_release>;

  py::enum_<Launcher>(m, "Launcher", "Which launcher started this process.")
      .value("NONE", Launcher::kNone)
      .value("OPENMPI", Launcher::kOpenMPI)
      .value("PMI", Launcher::kPMI)
      .value("TORCHRUN", Launcher::kTorchrun)
      .value("SLURM", Launcher::kSlurm);
  py::class_<LauncherEnv>(m, "LauncherEnv",
                          "This process's rank, world size and local rank, read from mpirun, PMI "
                          "or torchrun-style variables (none: rank 0 of 1).")
      .def_static("from_environment", &LauncherEnv::from_environment, "Reads the process environment.")
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
        return "LauncherEnv(launcher=" + std::string(to_string(e.launcher)) + ", rank=" + std::to_string(e.rank) +
               ", world_size=" + std::to_string(e.world_size) + ", local_rank=" + std::to_string(e.local_rank) + ")";
      });

  py::enum_<ReduceOp>(m, "ReduceOp", "Reduction of all_reduce and reduce_scatter.")
      .value("SUM", ReduceOp::kSum)
      .value("AVG", ReduceOp::kAvg)
      .value("MAX", ReduceOp::kMax)
      .value("MIN", ReduceOp::kMin);

  py::class_<ProcessGroup, std::shared_ptr<ProcessGroup>>(
      m, "ProcessGroup",
      "Collectives and point-to-point over an ordered set of ranks: MPI for CPU tensors, NCCL "
      "for CUDA tensors. Every operation works in place on the torch tensors given (contiguous, "
      "same shape and dtype on every rank); every rank of the group calls it.")
      .def_property_readonly("name", &ProcessGroup::name)
      .def("rank", &ProcessGroup::rank, "This process's rank within the group.")
      .def("size", &ProcessGroup::size)
      .def_property_readonly("global_ranks", &ProcessGroup::global_ranks, "World rank of each group rank.")
      .def("global_rank", &ProcessGroup::global_rank, py::arg("group_rank"))
      .def_property_readonly("timeout_seconds", [](const ProcessGroup& g) { return g.timeout().count() / 1000.0; })
      .def("new_group", &ProcessGroup::new_group, py::arg("ranks"), py::arg("name"), Release(),
           "A subgroup (ranks of this group, in the new group's order); collective over its "
           "members, None on the other ranks.")
      .def(
          "all_reduce", [](ProcessGroup& g, at::Tensor& t, ReduceOp op) { g.all_reduce(t, op); }, py::arg("tensor"),
          py::arg("op") = ReduceOp::kSum, Release())
      .def("all_gather", &ProcessGroup::all_gather, py::arg("output"), py::arg("input"), Release(),
           "output [size * n, ...] = every rank's input [n, ...] along dim 0.")
      .def("reduce_scatter", &ProcessGroup::reduce_scatter, py::arg("output"), py::arg("input"),
           py::arg("op") = ReduceOp::kSum, Release(),
           "input [size * n, ...]; output [n, ...] = this rank's slice of the reduction.")
      .def("broadcast", &ProcessGroup::broadcast, py::arg("tensor"), py::arg("src"), Release(), "src is a group rank.")
      .def("send", &ProcessGroup::send, py::arg("tensor"), py::arg("dst"), Release())
      .def("recv", &ProcessGroup::recv, py::arg("tensor"), py::arg("src"), Release())
      .def("barrier", &ProcessGroup::barrier, Release())
      .def("__repr__", [](const ProcessGroup& g) {
        return "ProcessGroup(name='" + g.name() + "', rank=" + std::to_string(g.rank()) +
               ", size=" + std::to_string(g.size()) + ")";
      });

  m.def(
      "init_distributed",
      [](std::optional<LauncherEnv> env, std::optional<double> timeout_seconds, const py::object& device) {
        megatron::comm::DistributedOptions options;
        if (timeout_seconds) {
          TORCH_CHECK_VALUE(*timeout_seconds > 0, "[comm] init_distributed: timeout_seconds must be positive, found ",
                            *timeout_seconds);
          options.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_seconds * 1000));
        }
        options.device_type = device_type_of(device);
        const LauncherEnv e = env ? *env : LauncherEnv::from_environment();
        py::gil_scoped_release release;
        return megatron::comm::init_distributed(e, options);
      },
      py::arg("env") = py::none(), py::kw_only(), py::arg("timeout_seconds") = py::none(), py::arg("device") = "cpu",
      "Starts the communication runtime (MPI under mpirun; NCCL on the first CUDA tensor) and "
      "returns the world ProcessGroup. env: LauncherEnv.from_environment() when None; device: "
      "where the job's tensors live ('cpu' or 'cuda').");
  m.def("abort_job", &megatron::comm::abort_job, py::arg("exit_code") = 1,
        "Ends every rank of an mpirun job (MPI_Abort); returns without MPI. For error paths, so "
        "that no rank waits on one that failed.");
}
