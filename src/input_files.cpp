#include "input_files.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

namespace megatron::detail {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISFIFO(mode)) return "a named pipe";
  return "not a regular file";
}

void check_mode(mode_t mode, const std::string& where, bool pipe_ok) {
  TORCH_CHECK(S_ISREG(mode) || (pipe_ok && S_ISFIFO(mode)), where, ": is ", kind_of(mode), ", expected a file");
}

}  // namespace

void check_regular_file(const std::string& path, const std::string& where, bool pipe_ok) {
  struct stat st {};
  TORCH_CHECK(::stat(path.c_str(), &st) == 0, where, ": cannot be read: ", std::strerror(errno));
  check_mode(st.st_mode, where, pipe_ok);
}

std::string read_whole_file(const std::string& path, const std::string& where, uint64_t max_bytes) {
  // Looked at before opening (opening a pipe waits for a writer), and again through the
  // descriptor, so the file checked is the file read.
  check_regular_file(path, where, /*pipe_ok=*/true);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TORCH_CHECK(fd >= 0, where, ": cannot be read: ", std::strerror(errno));
  std::string text;
  try {
    struct stat st {};
    TORCH_CHECK(::fstat(fd, &st) == 0, where, ": cannot be read: ", std::strerror(errno));
    check_mode(st.st_mode, where, /*pipe_ok=*/true);
    TORCH_CHECK(!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) <= max_bytes, where, ": is ", st.st_size,
                " bytes; files read whole are at most ", max_bytes, " bytes");
    if (S_ISREG(st.st_mode)) text.reserve(static_cast<size_t>(st.st_size));
    std::vector<char> chunk(1 << 16);
    for (;;) {
      const ssize_t n = ::read(fd, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) continue;
      TORCH_CHECK(n >= 0, where, ": reading failed: ", std::strerror(errno));
      if (n == 0) break;
      TORCH_CHECK(text.size() + static_cast<size_t>(n) <= max_bytes, where, ": holds more than ", max_bytes,
                  " bytes (does it ever end?); files read whole are at most that");
      text.append(chunk.data(), static_cast<size_t>(n));
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return text;
}

nlohmann::json parse_json(std::string_view text, const std::string& where, bool refuse_repeated_keys) {
  using nlohmann::json;
  std::vector<std::set<std::string>> keys;  // of each open object, when refusing repeats
  // nlohmann parses without recursion; the callback sees each object and list as it opens, with
  // its depth, so a deep one is refused before the parsed value exists.
  const json::parser_callback_t bound = [&](int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start)
      TORCH_CHECK(depth < kMaxNesting, where, ": malformed JSON: nested deeper than ", kMaxNesting,
                  " objects and lists");
    if (refuse_repeated_keys) {
      if (event == E::object_start) keys.emplace_back();
      if (event == E::object_end) keys.pop_back();
      if (event == E::key && !keys.empty())
        TORCH_CHECK(keys.back().insert(parsed.get<std::string>()).second, where, ": malformed JSON: the key \"",
                    excerpt(parsed.get<std::string>()), "\" appears twice in one object");
    }
    return true;
  };
  std::string what;
  try {
    return json::parse(text, bound);
  } catch (const json::exception& e) {  // parse errors, and numbers out of range
    what = e.what();
  }
  // nlohmann's message names the line and column ("parse error at line 3, column 5: ...").
  const auto at = what.find("parse error");
  TORCH_CHECK(false, where, ": malformed JSON: ", at == std::string::npos ? what : what.substr(at));
  return {};
}

std::string excerpt(std::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8 characters
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace megatron::detail
