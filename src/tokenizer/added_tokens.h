// Added (special) tokens cut out of text before the model sees it, as Hugging Face tokenizers'
// AddedVocabulary matches them: leftmost, then longest, with lstrip/rstrip/single_word.
#pragma once

#include "hf_pipeline.h"
#include "unicode_tables.h"
#include "utf8.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::tokenizer::detail {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false, lstrip = false, rstrip = false;
};

// Added tokens matched as tokenizers' AddedVocabulary matches them: leftmost, then longest.
class AddedTokenSplitter {
 public:
  void add(AddedToken t) {
    if (t.content.empty()) return;
    auto& bucket = by_first_[static_cast<unsigned char>(t.content[0])];
    bucket.push_back(std::move(t));
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    empty_ = false;
  }
  bool empty() const { return empty_; }

  // Calls text_part(begin, end) for the text between tokens and token(id) for each token, in order.
  template <typename Text, typename Token>
  void split(std::string_view text, Text&& text_part, Token&& token) const {
    size_t start_offset = 0, pos = 0;
    while (pos < text.size()) {
      const AddedToken* found = nullptr;
      for (const AddedToken& t : by_first_[static_cast<unsigned char>(text[pos])]) {
        if (text.compare(pos, t.content.size(), t.content) == 0) {
          found = &t;
          break;
        }
      }
      if (found == nullptr) {
        ++pos;
        continue;
      }
      size_t start = pos, stop = pos + found->content.size();
      pos = stop;
      if (found->single_word && (word_char_before(text, start) || word_char_at(text, stop))) continue;
      if (found->lstrip) {
        size_t b = start;
        while (b > start_offset && is_space_before(text, b)) b = previous_char(text, b);
        start = b;
      }
      size_t len;
      while (found->rstrip && stop < text.size() && whitespace_at(text, stop, len)) stop += len;
      if (start_offset < start) text_part(start_offset, start);
      token(found->id);
      start_offset = pos = stop;
    }
    if (start_offset < text.size()) text_part(start_offset, text.size());
  }

 private:
  static size_t previous_char(std::string_view s, size_t i) {
    do --i;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80);
    return i;
  }
  static bool is_space_before(std::string_view s, size_t i) {
    size_t len;
    return whitespace_at(s, previous_char(s, i), len);
  }
  static bool is_word(uint32_t cp) { return cp == '_' || is_letter(cp) || is_number(cp); }
  static bool word_char_at(std::string_view s, size_t i) {
    size_t len;
    return i < s.size() && is_word(decode_utf8(s, i, len));
  }
  static bool word_char_before(std::string_view s, size_t i) { return i > 0 && word_char_at(s, previous_char(s, i)); }

  std::array<std::vector<AddedToken>, 256> by_first_;
  bool empty_ = true;
};

// A --tokenizer-special-tokens entry as tokenizers' add_special_tokens adds it: a token of the
// vocabulary keeps its id (lookup: the id, or -1), a new one takes the id append gives it; then it
// is matched whole in raw text. Returns its id.
template <typename Lookup, typename Append>
int32_t add_special_token(const std::string& token, AddedTokenSplitter& splitter, Lookup&& lookup, Append&& append) {
  int32_t id = lookup(token);
  if (id < 0) id = append(token);
  splitter.add(AddedToken{token, id});
  return id;
}

}  // namespace megatron::tokenizer::detail
