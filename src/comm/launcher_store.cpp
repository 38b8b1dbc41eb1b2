// The key-value store of a torchrun/deepspeed-style job (no MPI): a c10d::TCPStore at
// MASTER_ADDR:MASTER_PORT, through which Gloo groups and NCCL communicators meet. Every way the
// meeting can fail (nobody serving, a foreign service on the port, a rank that never comes, two
// processes given one RANK) ends each rank within the distributed timeout on one line and exit 3.
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstdlib>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "megatron/comm/collective_error.h"

namespace megatron::comm::detail {
namespace {

std::string reason(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);  // without its C++ backtrace
  return c10 ? c10->what_without_backtrace() : e.what();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// Each rank checks in under its own key; a count over 1 is a RANK given twice. Every rank then
// waits, within the timeout, for all of them, and names who never came.
void check_in(c10d::Store& store, const LauncherEnv& env, std::chrono::milliseconds timeout, const std::string& at) {
  auto key = [](int r) { return "rank/" + std::to_string(r); };
  if (store.add(key(env.rank), 1) > 1)
    throw CollectiveError("[comm] RANK=" + std::to_string(env.rank) + " was given to two processes of the job at " +
                          at + " (MASTER_ADDR:MASTER_PORT): each process needs its own RANK in [0, WORLD_SIZE=" +
                          std::to_string(env.world_size) + ")");
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back(key(r));
  // The rank serving the store waits longer, so that every other rank can still ask it who is
  // missing when its own wait ends.
  const bool serving = env.rank == 0;
  try {
    store.wait(keys, serving ? timeout + std::chrono::seconds(2) : timeout);
  } catch (const std::exception&) {
    std::vector<int> missing, twice;
    for (int r = 0; r < env.world_size; ++r) {
      const int64_t count = store.check({key(r)}) ? store.add(key(r), 0) : 0;
      if (count == 0) missing.push_back(r);
      if (count > 1) twice.push_back(r);
    }
    if (missing.empty()) return;  // the last one came as the wait ended
    throw CollectiveError("[comm] rank " + std::to_string(env.rank) + " waited " +
                          std::to_string(timeout.count() / 1000) + " s at " + at + " (MASTER_ADDR:MASTER_PORT) for " +
                          "rank" + (missing.size() > 1 ? "s " : " ") + rank_list(missing) +
                          " of WORLD_SIZE=" + std::to_string(env.world_size) + ", which never came" +
                          (twice.empty() ? "" : "; RANK " + rank_list(twice) + " came twice (a RANK set wrong?)"));
  }
}

// c10d logs each failed store call as a warning with a C++ backtrace, before the error this file
// turns it into; while the rendezvous lasts only errors are logged.
class QuietC10d {
 public:
  QuietC10d() : level_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = std::max(level_, 2); }
  ~QuietC10d() { FLAGS_caffe2_log_level = level_; }

 private:
  int level_;
};

}  // namespace

c10::intrusive_ptr<c10d::Store> make_launcher_store(const LauncherEnv& env, std::chrono::milliseconds timeout) {
  const std::string at = env.master_addr + ":" + std::to_string(env.master_port);
  const QuietC10d quiet;
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(env.master_port);
  // torchrun's agent already serves a store on MASTER_PORT (and says so); rank 0 serves one
  // only under launchers that do not (deepspeed, a hand-set environment).
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  opts.isServer = env.rank == 0 && !(agent_store && std::string(agent_store) == "True");
  opts.numWorkers = env.world_size;
  opts.waitWorkers = false;  // check_in waits instead, and names who is missing
  opts.timeout = timeout;    // bounds the connection and every reply; ranks wait here while rank 0 builds caches
  c10::intrusive_ptr<c10d::Store> store;
  try {
    // c10d's constructor pings the server and waits for its answer without a timeout, so a
    // foreign service on the port would hold this rank forever: it runs on a thread of its own
    // (left behind if it never returns) and the deadline is kept here. Its own connection
    // retries end at the timeout, so they report first.
    std::packaged_task<c10::intrusive_ptr<c10d::Store>()> connect(
        [addr = env.master_addr, opts] { return c10::make_intrusive<c10d::TCPStore>(addr, opts); });
    auto connected = connect.get_future();
    std::thread(std::move(connect)).detach();
    if (connected.wait_for(timeout + std::chrono::seconds(5)) != std::future_status::ready)
      throw std::runtime_error("no rendezvous store answered on that port (a foreign service is listening there?)");
    store = connected.get();
  } catch (const std::exception& e) {
    throw CollectiveError("[comm] rank " + std::to_string(env.rank) +
                          (opts.isServer
                               ? " could not serve the rendezvous store at " + at +
                                     " (MASTER_ADDR:MASTER_PORT; is another service on that port?): "
                               : " could not reach the rendezvous store at " + at +
                                     " (MASTER_ADDR:MASTER_PORT) within " + std::to_string(timeout.count() / 1000) +
                                     " s (is rank 0 started, and nothing else on that port?): ") +
                          reason(e));
  }
  // A restarted torchrun worker group must not read the previous attempt's keys.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("megatron/" + std::string(restart ? restart : "0"), store);
  try {
    check_in(*prefixed, env, timeout, at);
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    throw CollectiveError("[comm] rank " + std::to_string(env.rank) + " lost the rendezvous store at " + at +
                          " (MASTER_ADDR:MASTER_PORT): " + reason(e));
  }
  return prefixed;
}

}  // namespace megatron::comm::detail
