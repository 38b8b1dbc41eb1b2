// Rank-aware logging: every line carries "[rank r/N]"; helpers log once per job (rank 0) or from
// the last rank, where Megatron-LM prints its iteration lines. spdlog stays behind this header
// because torch bundles an fmt of its own that must not meet spdlog's.
#pragma once

#include "megatron/export.h"

#include <string>
#include <string_view>

namespace megatron {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

struct MEGATRON_API LoggingOptions {
  int rank = 0;
  int world_size = 1;
  // "trace" | "debug" | "info" | "warn" | "error" | "off"; empty: $MEGATRON_LOG_LEVEL, else "info".
  std::string level;
};

// Installs the rank-prefixed logger. Call once per process, after the launcher is known.
// Throws std::invalid_argument for an unknown level or a rank outside the world.
MEGATRON_API void init_logging(const LoggingOptions& options);

// The rank and world size given to init_logging (rank 0 of 1 before it is called).
MEGATRON_API int logging_rank();
MEGATRON_API int logging_world_size();

MEGATRON_API bool log_enabled(LogLevel level);
MEGATRON_API void log(LogLevel level, std::string_view message);
inline void log_info(std::string_view message) {
  log(LogLevel::kInfo, message);
}
inline void log_warn(std::string_view message) {
  log(LogLevel::kWarn, message);
}

// Once per job: only rank 0 logs.
MEGATRON_API void log_rank_0(LogLevel level, std::string_view message);
// Only the last rank logs: it holds the loss when the pipeline has several stages.
MEGATRON_API void log_rank_last(LogLevel level, std::string_view message);

}  // namespace megatron
