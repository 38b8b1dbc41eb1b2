// Megatron's NullTokenizer: text is space-separated integer ids; EOD is vocab_size - 1.
#pragma once

#include "megatron/export.h"

#include "megatron/tokenizer/tokenizer.h"

namespace megatron::tokenizer {

class MEGATRON_API NullTokenizer : public Tokenizer {
 public:
  explicit NullTokenizer(int64_t vocab_size);
  // "12 7 3" -> {12, 7, 3}; anything but integers in [0, vocab_size) separated by single spaces
  // is an error naming the offending word.
  void tokenize_into(std::string_view text, std::vector<int32_t>& out) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return static_cast<int32_t>(vocab_size_ - 1); }

 private:
  int64_t vocab_size_;
};

}  // namespace megatron::tokenizer
