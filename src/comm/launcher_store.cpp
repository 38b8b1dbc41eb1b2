// The key-value store of a torchrun/deepspeed-style job (no MPI): a c10d::TCPStore at
// MASTER_ADDR:MASTER_PORT, through which Gloo groups and NCCL communicators meet.
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <string>

#include "backend.h"

namespace megatron::comm::detail {

c10::intrusive_ptr<c10d::Store> make_launcher_store(const LauncherEnv& env, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(env.master_port);
  // torchrun's agent already serves a store on MASTER_PORT (and says so); rank 0 serves one
  // only under launchers that do not (deepspeed, a hand-set environment).
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  opts.isServer = env.rank == 0 && !(agent_store && std::string(agent_store) == "True");
  opts.numWorkers = env.world_size;
  opts.timeout = timeout;  // ranks wait here while rank 0 builds dataset caches
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "[comm] rank ", env.rank, " could not reach the rendezvous store at ", env.master_addr, ":",
                env.master_port, " (MASTER_ADDR:MASTER_PORT): ", e.what());
  }
  // A restarted torchrun worker group must not read the previous attempt's keys.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return c10::make_intrusive<c10d::PrefixStore>("megatron/" + std::string(restart ? restart : "0"), store);
}

}  // namespace megatron::comm::detail
