// A tool's command line and its end: --help prints and exits 0, a bad flag is one line
// "tool: error: ..." with program::kUsageError, and the work runs under program::run, so that
// any failure is one line too (megatron/program.h).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <string>

#include "megatron/program.h"

inline int run_tool(CLI::App& app, const char* name, int argc, char** argv, const std::function<int()>& work) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
    std::fprintf(stderr, "%s: error: %s; see %s --help\n", name, e.what(), name);
    return megatron::program::kUsageError;
  }
  return megatron::program::run(name, work);
}
