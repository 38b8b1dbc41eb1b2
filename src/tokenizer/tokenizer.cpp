#include "megatron/tokenizer/tokenizer.h"

#include "megatron/tokenizer/gpt2_bpe.h"
#include "megatron/tokenizer/null_tokenizer.h"
#include "megatron/tokenizer/sentencepiece_tokenizer.h"

#include <c10/util/Exception.h>

namespace megatron::tokenizer {

std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options) {
  if (options.tokenizer_type == "GPT2BPETokenizer") {
    TORCH_CHECK(!options.vocab_file.empty() && !options.merge_file.empty(),
                "[tokenizer] GPT2BPETokenizer needs --vocab-file and --merge-file");
    return std::make_unique<GPT2BPETokenizer>(options.vocab_file, options.merge_file);
  }
  if (options.tokenizer_type == "NullTokenizer") {
    return std::make_unique<NullTokenizer>(options.vocab_size);
  }
  // Megatron-LM's three SentencePiece types share one wrapper, which encodes as the library does.
  if (options.tokenizer_type == "SentencePieceTokenizer" || options.tokenizer_type == "GPTSentencePieceTokenizer" ||
      options.tokenizer_type == "Llama2Tokenizer") {
    TORCH_CHECK(!options.tokenizer_model.empty(), "[tokenizer] ", options.tokenizer_type,
                " needs --tokenizer-model (a SentencePiece .model file)");
    return std::make_unique<SentencePieceTokenizer>(options.tokenizer_model);
  }
  TORCH_CHECK(false,
              "[tokenizer] --tokenizer-type: expected GPT2BPETokenizer, NullTokenizer, SentencePieceTokenizer, "
              "GPTSentencePieceTokenizer or Llama2Tokenizer, found '",
              options.tokenizer_type, "'");
}

}  // namespace megatron::tokenizer
