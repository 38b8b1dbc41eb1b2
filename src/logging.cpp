// Compiled without torch's include directories: see the note in megatron/logging.h.
#include "megatron/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace megatron {
namespace {

std::atomic<int> g_rank{0};
std::atomic<int> g_world_size{1};

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void init_logging(const LoggingOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw std::invalid_argument(
        fmt::format("[logging] rank {} is out of range for world size {}", options.rank, options.world_size));
  }
  std::string name = options.level;
  if (name.empty()) {
    const char* env = std::getenv("MEGATRON_LOG_LEVEL");
    name = env ? env : "info";
  }
  auto level = spdlog::level::from_str(name);
  // from_str maps unknown names to "off"; only "off" itself may mean off.
  if (level == spdlog::level::off && name != "off") {
    throw std::invalid_argument(
        fmt::format("[logging] unknown log level '{}'; expected trace, debug, info, warn, error or off", name));
  }

  g_rank = options.rank;
  g_world_size = options.world_size;
  auto logger = std::make_shared<spdlog::logger>("megatron", std::make_shared<spdlog::sinks::stdout_sink_mt>());
  logger->set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [rank {}/{}] [%l] %v", options.rank, options.world_size));
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);  // lines from several ranks must not sit in buffers
  spdlog::set_default_logger(std::move(logger));
}

int logging_rank() {
  return g_rank;
}
int logging_world_size() {
  return g_world_size;
}

bool log_enabled(LogLevel level) {
  return spdlog::default_logger_raw()->should_log(to_spdlog(level));
}

void log(LogLevel level, std::string_view message) {
  spdlog::default_logger_raw()->log(to_spdlog(level), message);
}

void log_rank_0(LogLevel level, std::string_view message) {
  if (g_rank == 0) log(level, message);
}

void log_rank_last(LogLevel level, std::string_view message) {
  if (g_rank == g_world_size - 1) log(level, message);
}

}  // namespace megatron
