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
  virtual std::vector<int32_t> tokenize(std::string_view text) const = 0;
  // Appends text's ids to out, for callers that reuse one buffer (preprocess_data's workers).
  virtual void tokenize_into(std::string_view text, std::vector<int32_t>& out) const {
    const std::vector<int32_t> ids = tokenize(text);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  virtual std::string detokenize(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  // The end-of-document id appended by --append-eod.
  virtual int32_t eod() const = 0;
};

struct MEGATRON_API TokenizerOptions {
  std::string tokenizer_type;  // "GPT2BPETokenizer" | "HuggingFaceTokenizer" | "NullTokenizer"
  std::string vocab_file;
  std::string merge_file;
  std::string tokenizer_model;         // HuggingFaceTokenizer: a tokenizer.json or its folder
  bool include_special_tokens = true;  // HuggingFaceTokenizer: add the post-processor's BOS/EOS
  int64_t vocab_size = 0;              // NullTokenizer
};

MEGATRON_API std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options);

}  // namespace megatron::tokenizer
