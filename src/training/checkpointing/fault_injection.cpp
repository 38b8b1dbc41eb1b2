#include "megatron/training/fault_injection.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace megatron::training {

void fault_point(const std::string& point, int rank, int signal) {
  const char* spec = std::getenv("MEGATRON_FAULT_INJECTION");
  if (!spec) return;
  std::string s(spec), name = s;
  int only_rank = -1;
  if (auto at = s.find('@'); at != std::string::npos) {
    name = s.substr(0, at);
    only_rank = std::atoi(s.c_str() + at + 1);
  }
  if (name != point || (only_rank >= 0 && only_rank != rank)) return;
  std::fprintf(stderr, "[fault injection] rank %d gets signal %d at %s\n", rank, signal, point.c_str());
  std::fflush(stderr);
  std::raise(signal);
}

}  // namespace megatron::training
