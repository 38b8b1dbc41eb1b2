#include "mapping_faults.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "megatron/program.h"

namespace megatron::datasets::detail {
namespace {

// The handler reads this table, so it is fixed-size and lock-free: a slot is live while begin
// is non-zero (set last on register, cleared first on unregister).
struct Mapping {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  char path[512];
};
constexpr int kSlots = 256;
Mapping g_mappings[kSlots];
struct sigaction g_previous {};  // whoever handled SIGBUS before us (a sanitizer, Python's faulthandler)
std::mutex g_register;           // writers only

void write_all(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void on_sigbus(int signal, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const Mapping& m : g_mappings) {
    const uintptr_t begin = m.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= m.end.load(std::memory_order_relaxed)) continue;
    write_all(program::name());
    write_all(": error: [indexed_dataset] ");
    write_all(m.path);
    write_all(
        ": reading its memory mapping failed (SIGBUS): the file was truncated after it was opened; "
        "restart on complete files\n");
    ::_exit(program::kRuntimeError);
  }
  // Not ours: the handler that was there before (or the default action) gets it when the
  // faulting access runs again on return, with its real siginfo.
  ::sigaction(signal, &g_previous, nullptr);
}

void install_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

int register_mapping(const void* data, size_t size, const std::string& path) {
  static std::once_flag installed;
  std::call_once(installed, install_handler);
  std::lock_guard<std::mutex> lock(g_register);
  for (int slot = 0; slot < kSlots; ++slot) {
    Mapping& m = g_mappings[slot];
    if (m.begin.load(std::memory_order_relaxed) != 0) continue;
    std::strncpy(m.path, path.c_str(), sizeof m.path - 1);
    m.path[sizeof m.path - 1] = '\0';
    m.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_relaxed);
    m.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return slot;
  }
  return -1;
}

void unregister_mapping(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_register);
  g_mappings[slot].begin.store(0, std::memory_order_release);
}

}  // namespace megatron::datasets::detail
