#include "megatron/tokenizer/null_tokenizer.h"

#include <c10/util/Exception.h>

#include <charconv>

namespace megatron::tokenizer {

NullTokenizer::NullTokenizer(int64_t vocab_size) : vocab_size_(vocab_size) {
  TORCH_CHECK(vocab_size > 1, "[tokenizer] NullTokenizer needs --vocab-size > 1, got ", vocab_size);
}

void NullTokenizer::tokenize_into(std::string_view text, std::vector<int32_t>& ids) const {
  size_t i = 0;
  while (true) {
    const size_t end = std::min(text.find(' ', i), text.size());
    const std::string_view word = text.substr(i, end - i);
    int64_t v = -1;
    auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
    TORCH_CHECK(ec == std::errc() && p == word.data() + word.size() && v >= 0 && v < vocab_size_,
                "[tokenizer] NullTokenizer: expected integer ids in [0, ", vocab_size_,
                ") separated by single spaces, found '", std::string(word), "'");
    ids.push_back(static_cast<int32_t>(v));
    if (end == text.size()) break;
    i = end + 1;
  }
}

std::string NullTokenizer::detokenize(const std::vector<int32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out.push_back(' ');
    out += std::to_string(ids[i]);
  }
  return out;
}

}  // namespace megatron::tokenizer
