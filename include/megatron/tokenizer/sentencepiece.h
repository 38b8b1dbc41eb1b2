// Megatron-LM's SentencePieceTokenizer / GPTSentencePieceTokenizer / Llama2Tokenizer: a
// SentencePiece .model file (BPE as Llama 2 and Mistral ship it, or unigram), encoding as the
// sentencepiece package's encode_as_ids does: its normalizer (the precompiled character map,
// extra-whitespace removal, the dummy prefix, spaces as U+2581), user-defined symbols, BPE merges
// by piece score or the unigram Viterbi path, and byte fallback. Text that is not valid UTF-8 is
// read as Python's bytes.decode("utf-8", errors="replace") reads it.
#pragma once

#include "megatron/export.h"

#include "megatron/tokenizer/tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::tokenizer {

class MEGATRON_API SentencePieceTokenizer : public Tokenizer {
 public:
  // No <s> is added: Megatron-LM's three SentencePiece types all encode with encode_as_ids.
  explicit SentencePieceTokenizer(const std::string& model_file);
  ~SentencePieceTokenizer() override;

  void tokenize_into(std::string_view text, std::vector<int32_t>& out) const override;
  // As sentencepiece's decode_ids: control tokens dropped, byte pieces joined, U+2581 as spaces.
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override;
  int32_t eod() const override;  // the model's </s>; -1 when it has none
  int32_t bos() const;           // the model's <s>; -1 when it has none

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron::tokenizer
