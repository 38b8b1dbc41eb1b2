// Megatron-LM's HuggingFaceTokenizer: a Hugging Face tokenizer.json with a BPE model, encoding
// as the tokenizers package does. That covers byte-level BPE (GPT-2, Llama 3, Qwen 2,
// Mistral-Nemo: their pre-tokenizer regexes, NFC, ignore_merges) and metaspace BPE with byte
// fallback (Llama 2, Mistral), with added and special tokens and the post-processor's BOS/EOS.
// Text that is not valid UTF-8 is read as Python's bytes.decode("utf-8", errors="replace") reads it.
#pragma once

#include "megatron/export.h"

#include "megatron/tokenizer/tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::tokenizer {

class MEGATRON_API HuggingFaceTokenizer : public Tokenizer {
 public:
  // model: a tokenizer.json, a folder holding one, or a Hugging Face Hub name found in the local
  // Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub; nothing is
  // downloaded). A tokenizer_config.json beside it names the eos/bos tokens (as transformers reads
  // them). include_special_tokens: add the post-processor's tokens (Megatron-LM's default;
  // --tokenizer-hf-no-include-special-tokens turns it off). special_tokens
  // (--tokenizer-special-tokens): added as Hugging Face's add_special_tokens adds them, after the
  // vocabulary unless they are in it, matched whole in the text.
  explicit HuggingFaceTokenizer(const std::string& model, bool include_special_tokens = true,
                                const std::vector<std::string>& special_tokens = {});
  ~HuggingFaceTokenizer() override;

  void tokenize_into(std::string_view text, std::vector<int32_t>& out) const override;
  // Runs the ids' tokens through the tokenizer.json's decoder, as Megatron-LM's detokenize does.
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override;  // the largest id (vocabulary or added token) + 1
  int32_t eod() const override;         // the eos token; -1 when none is known
  int32_t bos() const;                  // -1 when none is known

  int32_t token_to_id(const std::string& token) const;  // -1 when absent
  const std::string& id_to_token(int32_t id) const;     // the token's spelling in tokenizer.json
  // The files this tokenizer was read from: the tokenizer.json, and the tokenizer_config.json
  // beside it ("" when there is none). The Hugging Face export copies them.
  const std::string& tokenizer_json() const;
  const std::string& tokenizer_config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron::tokenizer
