// Megatron-LM's SentencePiece tokenizer types (SentencePieceTokenizer, GPTSentencePieceTokenizer,
// Llama2Tokenizer) over a .model file, through Debian's libsentencepiece: ids as
// SentencePieceProcessor.encode gives them, EOD its </s>. Builds without the library refuse them.
#pragma once

#include "megatron/export.h"

#include "megatron/tokenizer/tokenizer.h"

#include <memory>
#include <string>

namespace megatron::tokenizer {

class MEGATRON_API SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& model_file);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> tokenize(std::string_view text) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override;
  int32_t eod() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron::tokenizer
