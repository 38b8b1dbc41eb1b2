// Reading the files a user hands us (configs, tokenizer files, Hugging Face files, headers):
// the one place that checks what a path names and bounds how much and how deep is read, so that
// no reader recurses, allocates or echoes past these bounds. Errors start with `where`, which the
// caller sets to its tag and the path ("[tokenizer] /x/vocab.json").
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace megatron::detail {

// Structures nest at most this deep in any file we read; checked while parsing, before anything
// recursive (a dump, a copy, a destructor, a walk) touches the value.
inline constexpr int kMaxNesting = 100;
// A file read whole holds at most this much (the largest real ones, tokenizer.json files of big
// vocabularies, are tens of MB); a pipe that never ends stops here too.
inline constexpr uint64_t kMaxWholeFileBytes = uint64_t{1} << 30;

// Refuses a path that does not name a regular file (a named pipe passes when pipe_ok), with the
// OS's reason when it cannot be looked at.
void check_regular_file(const std::string& path, const std::string& where, bool pipe_ok = false);

// The bytes of a regular file or named pipe, at most max_bytes of them.
std::string read_whole_file(const std::string& path, const std::string& where, uint64_t max_bytes = kMaxWholeFileBytes);

// text as JSON, nested at most kMaxNesting deep; an object holding one key twice is refused when
// asked (nlohmann keeps the last silently). Errors: "<where>: malformed JSON: parse error at ...".
nlohmann::json parse_json(std::string_view text, const std::string& where, bool refuse_repeated_keys = false);

// At most `limit` bytes of a value for an error line, saying how much was left out.
std::string excerpt(std::string_view text, size_t limit = 80);

}  // namespace megatron::detail
