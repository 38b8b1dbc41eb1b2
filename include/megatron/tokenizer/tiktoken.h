// Megatron-LM's TikTokenizer: a tiktoken vocabulary in Megatron-LM's JSON form (a list of
// {"rank": i, "token_bytes": base64, "token_str": ...}), its ids shifted past num_special_tokens
// special tokens (<unk> <s> </s> <mask> <pad> <cls> <sep>, or --tokenizer-special-tokens, then
// <SPECIAL_i>), text split by the "v1" or "v2" pattern and byte pairs merged lowest rank first,
// as tiktoken encodes. Special tokens in the text are recognised (Megatron-LM encodes with
// allowed_special="all").
#pragma once

#include "megatron/export.h"

#include "megatron/tokenizer/tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::tokenizer {

class MEGATRON_API TikTokenizer : public Tokenizer {
 public:
  // vocab_size counts the special tokens; the file's first vocab_size - num_special_tokens
  // entries are used, as Megatron-LM cuts them. special_tokens (--tokenizer-special-tokens)
  // replaces the first seven, in its order: it must hold those seven, each once, and at most
  // num_special_tokens in all.
  TikTokenizer(const std::string& path, const std::string& pattern = "v2", int64_t num_special_tokens = 1000,
               int64_t vocab_size = 131072, const std::vector<std::string>& special_tokens = {});
  ~TikTokenizer() override;

  void tokenize_into(std::string_view text, std::vector<int32_t>& out) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;  // the tokens' bytes
  int64_t vocab_size() const override;
  int32_t eod() const override;  // </s>
  int32_t bos() const;           // <s>
  // Every special token, by id (the list's, then <SPECIAL_i>).
  const std::vector<std::string>& special_tokens() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron::tokenizer
