// The GPT-2 pre-tokenization pattern, hand-written for speed (a regex engine runs it about 5x
// slower), exactly as Oniguruma matches it on valid UTF-8:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// An invalid UTF-8 byte is one character of the [^\s\p{L}\p{N}] class.
#pragma once

#include "unicode_tables.h"
#include "utf8.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace megatron::tokenizer::detail {

enum Class : uint8_t { kLetter, kNumber, kSpace, kOther };

struct AsciiClasses {
  Class table[128];
  AsciiClasses() {
    for (uint32_t c = 0; c < 128; ++c) {
      table[c] = is_space(c) ? kSpace : is_letter(c) ? kLetter : is_number(c) ? kNumber : kOther;
    }
  }
};
inline const AsciiClasses kAscii;

inline Class classify(uint32_t cp) {
  if (cp < 128) return kAscii.table[cp];
  if (cp == kInvalid) return kOther;
  if (is_space(cp)) return kSpace;
  if (is_letter(cp)) return kLetter;
  if (is_number(cp)) return kNumber;
  return kOther;
}

// The class and byte length of the character at text[i].
inline Class class_at(std::string_view text, size_t i, size_t& len) {
  const auto b = static_cast<unsigned char>(text[i]);
  if (b < 0x80) {
    len = 1;
    return kAscii.table[b];
  }
  return classify(decode_utf8(text, i, len));
}

// Calls emit(begin, end) for each GPT-2 pre-token of text, left to right.
template <typename Emit>
void for_each_pretoken(std::string_view text, Emit&& emit) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const char c = text[i];
    // 's 't 're 've 'm 'll 'd (ASCII apostrophe, lower case, as the pattern is written)
    if (c == '\'' && i + 1 < n) {
      const char a = text[i + 1];
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < n) {
        const char b = text[i + 2];
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
          emit(i, i + 3);
          i += 3;
          continue;
        }
      }
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional ASCII space then a class run.
    const size_t j = (c == ' ' && i + 1 < n) ? i + 1 : i;
    size_t len;
    const Class cls = class_at(text, j, len);
    if (cls != kSpace) {
      size_t k = j + len;
      while (k < n && class_at(text, k, len) == cls) k += len;
      emit(i, k);
      i = k;
      continue;
    }
    // Whitespace: `\s+(?!\S)` leaves the last space of a run for the next word; `\s+` takes a
    // lone one (or the run at the end of the text).
    size_t k = i, last = i, count = 0;
    while (k < n && class_at(text, k, len) == kSpace) {
      last = k;
      k += len;
      ++count;
    }
    const size_t end = (k < n && count > 1) ? last : k;
    emit(i, end);
    i = end;
  }
}

}  // namespace megatron::tokenizer::detail
