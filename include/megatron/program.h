// How every program of the project ends on an error: one line "program: error: message" on
// stderr and a documented exit code, never a signal, an abort or a C++ backtrace.
#pragma once

#include "megatron/export.h"

#include <c10/util/Exception.h>

#include <functional>
#include <string>

namespace megatron::program {

constexpr int kRuntimeError = 1;  // a failure while running (a rank, a file, a collective)
constexpr int kUsageError = 2;    // bad flags, config or input named on the command line
// A collective could not complete (comm::CollectiveError): it outlived
// --distributed-timeout-minutes (a peer died or hangs), or a peer's connection closed. Under
// mpirun the watchdog ends every rank with it; for a restart loop to tell from other failures.
constexpr int kCollectiveFailed = 3;

// An error in what the job was given (its flags, config or input) that shows only once the ranks
// meet, such as ranks launched with different flags: exit_code_of_current_error gives kUsageError.
class MEGATRON_API UsageError : public c10::Error {
 public:
  explicit UsageError(std::string message) : c10::Error(std::move(message), nullptr) {}
};

// The program's name as install_terminate_handler (or run) set it ("megatron" before).
MEGATRON_API const char* name();

// The message of the exception in flight (a c10::Error without its C++ backtrace).
MEGATRON_API std::string current_error_message();

// std::terminate (a throw from a destructor while unwinding, from a noexcept function or from a
// thread) prints "program: error: ..." and exits kRuntimeError instead of aborting.
MEGATRON_API void install_terminate_handler(const char* program);

// The exit code for the exception in flight: kCollectiveFailed for a comm::CollectiveError,
// kUsageError for a UsageError, otherwise `code`.
MEGATRON_API int exit_code_of_current_error(int code = kRuntimeError);

// Runs body with the terminate handler installed; an exception escaping it is one line and its
// exit code (exit_code_of_current_error(code)).
MEGATRON_API int run(const char* program, const std::function<int()>& body, int code = kRuntimeError);

}  // namespace megatron::program
