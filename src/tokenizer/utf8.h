// UTF-8 reading and writing shared by the tokenizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace megatron::tokenizer::detail {

constexpr uint32_t kInvalid = 0xFFFFFFFF;  // a byte that starts no valid sequence

inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Decodes the code point at s[i], setting len; invalid or overlong sequences, surrogates and
// values past U+10FFFF give kInvalid with len 1.
inline uint32_t decode_utf8(std::string_view s, size_t i, size_t& len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  len = 1;
  if (b0 < 0x80) return b0;
  int n;
  uint32_t cp, min;
  if ((b0 & 0xE0) == 0xC0) {
    n = 1;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 2;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 3;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    return kInvalid;
  }
  for (int k = 1; k <= n; ++k) {
    if (i + k >= s.size()) return kInvalid;
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return kInvalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kInvalid;
  len = static_cast<size_t>(n) + 1;
  return cp;
}

// The text with each maximal invalid subsequence replaced by U+FFFD, as Python's
// bytes.decode("utf-8", errors="replace") reads it (Unicode's "maximal subpart" practice).
inline std::string replace_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len;
    if (decode_utf8(s, i, len) != kInvalid) {
      out.append(s.data() + i, len);
      i += len;
      continue;
    }
    // The lead byte fixes how many continuation bytes follow and the second one's range.
    const auto b0 = static_cast<unsigned char>(s[i]);
    int need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      need = 2;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      need = 3;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    }
    size_t j = i + 1;
    for (int k = 0; k < need && j < s.size(); ++k, ++j) {
      const auto b = static_cast<unsigned char>(s[j]);
      if (b < (k == 0 ? lo : 0x80) || b > (k == 0 ? hi : 0xBF)) break;
    }
    out += "\xEF\xBF\xBD";
    i = j;
  }
  return out;
}

bool is_valid_utf8(std::string_view s);

// text itself when it is valid UTF-8, else its replaced copy, kept in storage.
inline std::string_view as_valid_utf8(std::string_view text, std::string& storage) {
  if (is_valid_utf8(text)) return text;
  storage = replace_invalid_utf8(text);
  return storage;
}

inline bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    if (decode_utf8(s, i, len) == kInvalid) return false;
    i += len;
  }
  return true;
}

}  // namespace megatron::tokenizer::detail
