// What the checkpoint files' writers and readers share: paths joined one way, and the system's
// reason for a failed call.
#pragma once

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace megatron::training::detail {

inline std::string join(const std::string& a, const std::string& b) {
  return (std::filesystem::path(a) / b).string();
}

inline std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace megatron::training::detail
