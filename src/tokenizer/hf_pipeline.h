// The parts of a Hugging Face tokenizer.json around its model: the normalizer and pre-tokenizer
// (text to words) and the decoder (tokens to text), built from their JSON and applied as the
// tokenizers package applies them. Regexes run on Oniguruma,
// the engine tokenizers itself uses, so that every pattern splits the same; normalization forms
// come from utf8proc.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::tokenizer::detail {

// A compiled Oniguruma regex (Oniguruma syntax, UTF-8), safe to share between threads.
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Calls found(begin, end) for each non-empty match, left to right, as onig's find_iter gives them.
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& found) const;

 private:
  void* regex_;  // OnigRegex
  std::string where_;
};

// One piece of text on its way to the model; `first` marks the piece that begins the input
// (Metaspace's prepend_scheme "first" looks at it).
struct Piece {
  std::string text;
  bool first = false;
};

using Normalizer = std::function<void(std::string&)>;
using PreTokenizer = std::function<void(std::vector<Piece>&)>;

// Each returns an empty function for JSON null; `where` prefixes error messages ("<file>: normalizer").
Normalizer build_normalizer(const nlohmann::json& spec, const std::string& where);

// byte_level is set when the chain ends in ByteLevel: the model then reads each byte of a piece
// through GPT-2's byte-to-unicode table (the pieces themselves keep their raw bytes).
PreTokenizer build_pre_tokenizer(const nlohmann::json& spec, const std::string& where, bool& byte_level);

// Turns a list of token spellings into the decoded text's pieces (their concatenation is the text).
using Decoder = std::function<void(std::vector<std::string>&)>;
Decoder build_decoder(const nlohmann::json& spec, const std::string& where);  // hf_decoder.cpp

// Counts the nesting of Sequence specs on this thread: a hostile file must not overflow the stack.
struct NestingGuard {
  explicit NestingGuard(const std::string& where);
  ~NestingGuard();
  static int& depth();
};

// spec[key], which must be one UTF-8 character (Metaspace's replacement).
std::string one_character(const nlohmann::json& spec, const char* key, const std::string& where);

// Rust's char::is_whitespace (the White_Space property), on the code point at s[i].
bool whitespace_at(std::string_view s, size_t i, size_t& len);

}  // namespace megatron::tokenizer::detail
