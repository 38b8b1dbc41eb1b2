#include "megatron/tokenizer/tokenizer.h"

#include "megatron/tokenizer/gpt2_bpe.h"
#include "megatron/tokenizer/hf_tokenizer.h"
#include "megatron/tokenizer/null_tokenizer.h"
#include "megatron/tokenizer/sentencepiece.h"
#include "megatron/tokenizer/tiktoken.h"

#include <c10/util/Exception.h>

namespace megatron::tokenizer {

std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options) {
  if (options.tokenizer_type == "GPT2BPETokenizer") {
    TORCH_CHECK(!options.vocab_file.empty() && !options.merge_file.empty(),
                "[tokenizer] GPT2BPETokenizer needs --vocab-file and --merge-file");
    return std::make_unique<GPT2BPETokenizer>(options.vocab_file, options.merge_file, options.special_tokens);
  }
  if (options.tokenizer_type == "HuggingFaceTokenizer") {
    TORCH_CHECK(!options.tokenizer_model.empty(),
                "[tokenizer] HuggingFaceTokenizer needs --tokenizer-model (a tokenizer.json or its folder)");
    return std::make_unique<HuggingFaceTokenizer>(options.tokenizer_model, options.include_special_tokens,
                                                  options.special_tokens);
  }
  if (options.tokenizer_type == "TikTokenizer") {
    TORCH_CHECK(!options.tokenizer_model.empty(),
                "[tokenizer] TikTokenizer needs --tokenizer-model (Megatron-LM's tiktoken JSON)");
    return std::make_unique<TikTokenizer>(options.tokenizer_model, options.tiktoken_pattern,
                                          options.tiktoken_num_special_tokens,
                                          options.vocab_size > 0 ? options.vocab_size : 131072, options.special_tokens);
  }
  if (options.tokenizer_type == "SentencePieceTokenizer" || options.tokenizer_type == "GPTSentencePieceTokenizer" ||
      options.tokenizer_type == "Llama2Tokenizer") {
    // As Megatron-LM's SentencePiece tokenizer refuses them outside its legacy mode (which this
    // one does not have).
    TORCH_CHECK(options.special_tokens.empty(), "[tokenizer] --tokenizer-special-tokens: ", options.tokenizer_type,
                " takes none (GPT2BPETokenizer, HuggingFaceTokenizer and TikTokenizer do), found ",
                options.special_tokens.size());
    TORCH_CHECK(!options.tokenizer_model.empty(), "[tokenizer] ", options.tokenizer_type,
                " needs --tokenizer-model (a SentencePiece .model file)");
    return std::make_unique<SentencePieceTokenizer>(options.tokenizer_model);
  }
  // NullTokenizer has no text to find them in; Megatron-LM ignores the list there, and so do we
  // (a launch script that passes it to every run keeps working with --mock-data).
  if (options.tokenizer_type == "NullTokenizer") {
    return std::make_unique<NullTokenizer>(options.vocab_size);
  }
  TORCH_CHECK(false,
              "[tokenizer] --tokenizer-type: expected GPT2BPETokenizer, HuggingFaceTokenizer, TikTokenizer, "
              "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer or NullTokenizer, "
              "found '",
              options.tokenizer_type, "'");
}

}  // namespace megatron::tokenizer
