#include "megatron/program.h"

#include <c10/util/Exception.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "megatron/comm/collective_error.h"

namespace megatron::program {
namespace {
const char* g_program = "megatron";
}

const char* name() {
  return g_program;
}

std::string current_error_message() {
  try {
    throw;
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

int exit_code_of_current_error(int code) {
  try {
    throw;
  } catch (const comm::CollectiveError&) {
    return kCollectiveFailed;
  } catch (const UsageError&) {
    return kUsageError;
  } catch (...) {
    return code;
  }
}

void install_terminate_handler(const char* program) {
  g_program = program;
  // A write past `ulimit -f` then fails with EFBIG, which the writers name, instead of killing the
  // process mid-save (Python's interpreter ignores SIGXFSZ the same way).
  std::signal(SIGXFSZ, SIG_IGN);
  std::set_terminate([] {
    const std::string message =
        std::current_exception() ? current_error_message() : std::string("std::terminate without an exception");
    std::fprintf(stderr, "%s: error: %s\n", g_program, message.c_str());
    std::fflush(stderr);
    std::_Exit(kRuntimeError);
  });
}

int run(const char* program, const std::function<int()>& body, int code) {
  install_terminate_handler(program);
  try {
    return body();
  } catch (...) {
    std::fprintf(stderr, "%s: error: %s\n", program, current_error_message().c_str());
    return exit_code_of_current_error(code);
  }
}

}  // namespace megatron::program
