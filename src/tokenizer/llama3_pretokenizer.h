// The pre-tokenization patterns of Llama 3's and Qwen 2's tokenizer.json, hand-written for speed
// (Oniguruma runs them about 3x slower), exactly as Oniguruma matches them on valid UTF-8:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// (Qwen 2's has \p{N} for \p{N}{1,3}). hf_pipeline.cpp uses this scanner when a Split pattern is
// one of these two strings; tests/python/test_hf_tokenizer.py checks both against tokenizers.
#pragma once

#include "gpt2_pretokenizer.h"

#include <cstddef>
#include <string_view>

namespace megatron::tokenizer::detail {

inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Calls emit(begin, end) for each match of the pattern with max_digits digits per number (3 for
// Llama 3, 1 for Qwen 2), left to right; the matches cover the text.
template <typename Emit>
void for_each_llama3_pretoken(std::string_view text, int max_digits, Emit&& emit) {
  const size_t n = text.size();
  auto lower = [&](size_t k) -> char {
    if (k >= n) return 0;
    const char c = text[k];
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
  };
  auto newline = [&](size_t k) { return text[k] == '\r' || text[k] == '\n'; };
  auto run_end = [&](size_t k, Class cls) {  // the end of the run of cls starting at k
    size_t len;
    while (k < n && class_at(text, k, len) == cls) k += len;
    return k;
  };
  size_t i = 0;
  while (i < n) {
    // (?i:'s|'t|'re|'ve|'m|'ll|'d): case-insensitive, and U+017F (long s) folds to s.
    if (text[i] == '\'' && i + 1 < n) {
      const char a = lower(i + 1);
      size_t len = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        len = 2;
      } else if (text.compare(i + 1, 2, "\xC5\xBF") == 0) {
        len = 3;
      } else if (((a == 'r' || a == 'v') && lower(i + 2) == 'e') || (a == 'l' && lower(i + 2) == 'l')) {
        len = 3;
      }
      if (len > 0) {
        emit(i, i + len);
        i += len;
        continue;
      }
    }
    size_t len;
    const Class first = class_at(text, i, len);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    const size_t letters = first != kLetter && first != kNumber && !newline(i) ? i + len : i;
    size_t letter_len;
    if (letters < n && class_at(text, letters, letter_len) == kLetter) {
      const size_t end = run_end(letters, kLetter);
      emit(i, end);
      i = end;
      continue;
    }
    // \p{N}{1,max_digits}
    if (first == kNumber) {
      size_t end = i;
      for (int d = 0; d < max_digits && end < n && class_at(text, end, len) == kNumber; ++d) end += len;
      emit(i, end);
      i = end;
      continue;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    const size_t others = text[i] == ' ' ? i + 1 : i;
    size_t other_len;
    if (others < n && class_at(text, others, other_len) == kOther) {
      size_t end = run_end(others, kOther);
      while (end < n && newline(end)) ++end;
      emit(i, end);
      i = end;
      continue;
    }
    // Whitespace: `\s*[\r\n]+` ends after the run's last newline; else `\s+(?!\S)` leaves the
    // run's last character for the next word, or `\s+` takes a lone one (or the run at the end).
    size_t end = i, after_newline = 0, last = i, count = 0;
    while (end < n && class_at(text, end, len) == kSpace) {
      if (newline(end)) after_newline = end + 1;
      last = end;
      end += len;
      ++count;
    }
    if (after_newline > 0) {
      end = after_newline;
    } else if (end < n && count > 1) {
      end = last;
    }
    emit(i, end);
    i = end;
  }
}

}  // namespace megatron::tokenizer::detail
