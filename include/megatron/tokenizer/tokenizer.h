// The tokenizer interface the data tools use, and Megatron-style construction from flags.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::tokenizer {

class MEGATRON_API Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Thread-safe: one tokenizer may serve many worker threads.
  std::vector<int32_t> tokenize(std::string_view text) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 8);
    tokenize_into(text, out);
    return out;
  }
  // Appends text's ids to out, for callers that reuse one buffer (preprocess_data's workers).
  virtual void tokenize_into(std::string_view text, std::vector<int32_t>& out) const = 0;
  virtual std::string detokenize(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  // The end-of-document id appended by --append-eod.
  virtual int32_t eod() const = 0;
};

struct MEGATRON_API TokenizerOptions {
  std::string tokenizer_type;  // as --tokenizer-type names them (build_tokenizer lists them)
  std::string vocab_file;
  std::string merge_file;
  std::string tokenizer_model;         // the file (or folder) of a HuggingFace, TikToken or SentencePiece tokenizer
  bool include_special_tokens = true;  // HuggingFaceTokenizer: add the post-processor's BOS/EOS
  std::string tiktoken_pattern = "v2";
  int64_t tiktoken_num_special_tokens = 1000;
  int64_t vocab_size = 0;  // NullTokenizer; TikTokenizer (0: 131072, Megatron-LM's default)
  // --tokenizer-special-tokens: TikTokenizer's special tokens in id order (the seven defaults
  // among them); added to a HuggingFaceTokenizer or GPT2BPETokenizer; refused by the others.
  std::vector<std::string> special_tokens;
};

MEGATRON_API std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options);

}  // namespace megatron::tokenizer
