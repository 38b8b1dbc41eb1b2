#include "megatron/comm/launcher_env.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "error_of.h"

#include <string>

namespace megatron::comm {
namespace {

using Vars = std::map<std::string, std::string>;

// The message of the c10::Error thrown by from_variables, or "" if it did not throw.
std::string error_of(const Vars& vars) {
  return testing::error_of([&] { LauncherEnv::from_variables(vars); });
}

TEST(LauncherEnv, NoVariablesIsRankZeroOfOne) {
  auto env = LauncherEnv::from_variables({});
  EXPECT_EQ(env.launcher, Launcher::kNone);
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_world_size, 1);
  EXPECT_FALSE(env.is_distributed());
}

TEST(LauncherEnv, OpenMPI) {
  auto env = LauncherEnv::from_variables({{"OMPI_COMM_WORLD_RANK", "5"},
                                          {"OMPI_COMM_WORLD_SIZE", "8"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(env.launcher, Launcher::kOpenMPI);
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_TRUE(env.is_distributed());
}

TEST(LauncherEnv, PMIWithoutLocalVariablesIsOneNode) {
  auto env = LauncherEnv::from_variables({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}});
  EXPECT_EQ(env.launcher, Launcher::kPMI);
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 3);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.local_world_size, 3);
}

TEST(LauncherEnv, Torchrun) {
  auto env = LauncherEnv::from_variables({{"RANK", "3"},
                                          {"WORLD_SIZE", "4"},
                                          {"LOCAL_RANK", "1"},
                                          {"LOCAL_WORLD_SIZE", "2"},
                                          {"MASTER_ADDR", "node0"},
                                          {"MASTER_PORT", "29500"}});
  EXPECT_EQ(env.launcher, Launcher::kTorchrun);
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29500);
}

TEST(LauncherEnv, AgreeingLaunchersAreAccepted) {
  auto env = LauncherEnv::from_variables({{"OMPI_COMM_WORLD_RANK", "1"},
                                          {"OMPI_COMM_WORLD_SIZE", "2"},
                                          {"RANK", "1"},
                                          {"WORLD_SIZE", "2"},
                                          {"MASTER_ADDR", "localhost"},
                                          {"MASTER_PORT", "1234"}});
  EXPECT_EQ(env.launcher, Launcher::kOpenMPI);
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.master_addr, "localhost");
}

TEST(LauncherEnv, PartialEnvironmentNamesTheMissingVariable) {
  auto msg = error_of({{"RANK", "0"}});
  EXPECT_NE(msg.find("RANK is set but WORLD_SIZE is not"), std::string::npos) << msg;
  msg = error_of({{"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_NE(msg.find("OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"), std::string::npos) << msg;
}

TEST(LauncherEnv, ContradictoryEnvironmentNamesBothLaunchers) {
  auto msg =
      error_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(msg.find("contradictory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("OMPI_COMM_WORLD_RANK=1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("RANK=0"), std::string::npos) << msg;
}

TEST(LauncherEnv, OutOfRangeAndMalformedValues) {
  auto msg = error_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
  EXPECT_NE(msg.find("RANK=4 is out of range for WORLD_SIZE=4"), std::string::npos) << msg;
  msg = error_of({{"PMI_RANK", "x1"}, {"PMI_SIZE", "2"}});
  EXPECT_NE(msg.find("PMI_RANK='x1' is not a non-negative integer"), std::string::npos) << msg;
  msg = error_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}});
  EXPECT_NE(msg.find("PMI_SIZE=0 must be at least 1"), std::string::npos) << msg;
  msg = error_of({{"OMPI_COMM_WORLD_RANK", "0"},
                  {"OMPI_COMM_WORLD_SIZE", "2"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_NE(msg.find("OMPI_COMM_WORLD_LOCAL_RANK=2 is out of range"), std::string::npos) << msg;
}

TEST(LauncherEnv, TorchrunNeedsRendezvousWhenDistributed) {
  auto msg = error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "localhost"}});
  EXPECT_NE(msg.find("needs MASTER_ADDR and MASTER_PORT"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing: MASTER_PORT"), std::string::npos) << msg;
  msg = error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "0"}});
  EXPECT_NE(msg.find("MASTER_PORT=0 is not a TCP port"), std::string::npos) << msg;
  // A single torchrun-style process needs no rendezvous.
  EXPECT_EQ(LauncherEnv::from_variables({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).world_size, 1);
}

// srun's tasks: rank and size of the step, this node's share of it, and the rendezvous derived
// from the node list and the job id. A batch script's own shell (no step variables) is one process,
// and mpirun or torchrun inside a SLURM job win over SLURM's leftovers.
TEST(LauncherEnv, SlurmStep) {
  const Vars srun = {{"SLURM_PROCID", "9"},     {"SLURM_STEP_NUM_TASKS", "11"},
                     {"SLURM_LOCALID", "1"},    {"SLURM_STEP_TASKS_PER_NODE", "4(x2),3"},
                     {"SLURM_NODEID", "2"},     {"SLURM_STEP_NODELIST", "gpu[07-09,12],cpu3"},
                     {"SLURM_JOB_ID", "123456"}};
  auto env = LauncherEnv::from_variables(srun);
  EXPECT_EQ(env.launcher, Launcher::kSlurm);
  EXPECT_EQ(env.rank, 9);
  EXPECT_EQ(env.world_size, 11);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 3);  // the third node's share of "4(x2),3"
  EXPECT_EQ(env.master_addr, "gpu07");
  EXPECT_EQ(env.master_port, 15000 + 123456 % 20000);
  Vars told = srun;
  told["MASTER_ADDR"] = "head";
  told["MASTER_PORT"] = "29500";
  EXPECT_EQ(LauncherEnv::from_variables(told).master_addr, "head");
  EXPECT_EQ(LauncherEnv::from_variables(told).master_port, 29500);
  EXPECT_EQ(LauncherEnv::from_variables(
                {{"SLURM_STEP_NODELIST", "node5"}, {"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}})
                .master_addr,
            "node5");

  auto batch_shell =
      LauncherEnv::from_variables({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(batch_shell.launcher, Launcher::kNone);
  EXPECT_EQ(batch_shell.world_size, 1);

  Vars under_mpirun = srun;
  under_mpirun["OMPI_COMM_WORLD_RANK"] = "0";
  under_mpirun["OMPI_COMM_WORLD_SIZE"] = "2";
  auto mpi = LauncherEnv::from_variables(under_mpirun);
  EXPECT_EQ(mpi.launcher, Launcher::kOpenMPI);
  EXPECT_EQ(mpi.world_size, 2);

  Vars bad = srun;
  bad["SLURM_PROCID"] = "11";
  EXPECT_NE(error_of(bad).find("SLURM_PROCID=11 is out of range for SLURM_STEP_NUM_TASKS=11"), std::string::npos);
  bad = srun;
  bad["SLURM_NODEID"] = "3";
  EXPECT_NE(error_of(bad).find("SLURM_NODEID=3 but SLURM_STEP_TASKS_PER_NODE='4(x2),3' lists 3 nodes"),
            std::string::npos);
}

TEST(LauncherEnv, ReadsTheProcessEnvironment) {
  ::setenv("PMI_RANK", "1", 1);
  ::setenv("PMI_SIZE", "2", 1);
  auto vars = launcher_variables_from_environment();
  ::unsetenv("PMI_RANK");
  ::unsetenv("PMI_SIZE");
  EXPECT_EQ(vars.at("PMI_RANK"), "1");
  EXPECT_EQ(vars.at("PMI_SIZE"), "2");
}

}  // namespace
}  // namespace megatron::comm
