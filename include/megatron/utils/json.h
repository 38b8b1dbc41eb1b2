// A small strict JSON reader for vocab.json files and JSONL corpora (RFC 8259 values, UTF-8).
// Strings decode to UTF-8; a lone \uD800-\uDFFF escape becomes U+FFFD.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megatron::utils {

struct MEGATRON_API JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in file order

  // The member named key, or nullptr (objects only; the last one wins on duplicates).
  const JsonValue* find(std::string_view key) const;
};

// Thrown with the byte offset of the first problem.
class MEGATRON_API JsonError : public std::runtime_error {
 public:
  JsonError(const std::string& what, size_t offset)
      : std::runtime_error(what + " at byte " + std::to_string(offset)), offset_(offset) {}
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
};

// Parses one JSON value filling the whole text (surrounding whitespace allowed).
MEGATRON_API JsonValue parse_json(std::string_view text);

// s as a JSON string literal: quoted, with '"' and '\\' escaped (s is UTF-8 without control
// characters, as names and keys are).
MEGATRON_API std::string json_quote(std::string_view s);

}  // namespace megatron::utils
