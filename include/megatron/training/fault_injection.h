// Fault injection for the tests that kill or stop a run at chosen moments: a named point raises a
// signal when MEGATRON_FAULT_INJECTION names it ("point", or "point@rank" for one rank only).
#pragma once

#include "megatron/export.h"

#include <string>

namespace megatron::training {

// Raises `signal` (default SIGKILL) when MEGATRON_FAULT_INJECTION names `point` for this rank.
MEGATRON_API void fault_point(const std::string& point, int rank, int signal = 9);
// Whether MEGATRON_FAULT_INJECTION names `point` for this rank: faults other than a signal
// (a parameter changed on one replica) are the caller's to make.
MEGATRON_API bool fault_requested(const std::string& point, int rank);

}  // namespace megatron::training
