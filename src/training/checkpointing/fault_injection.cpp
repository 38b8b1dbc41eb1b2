#include "megatron/training/fault_injection.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace megatron::training {

bool fault_requested(const std::string& point, int rank) {
  const char* spec = std::getenv("MEGATRON_FAULT_INJECTION");
  if (!spec) return false;
  std::string s(spec), name = s;
  int only_rank = -1;
  if (auto at = s.find('@'); at != std::string::npos) {
    name = s.substr(0, at);
    only_rank = std::atoi(s.c_str() + at + 1);
  }
  return name == point && (only_rank < 0 || only_rank == rank);
}

void fault_point(const std::string& point, int rank, int signal) {
  if (!fault_requested(point, rank)) return;
  std::fprintf(stderr, "[fault injection] rank %d gets signal %d at %s\n", rank, signal, point.c_str());
  std::fflush(stderr);
  std::raise(signal);
}

}  // namespace megatron::training
