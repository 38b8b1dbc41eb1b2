#include "megatron/tokenizer/sentencepiece_tokenizer.h"

#include <c10/util/Exception.h>

#include "build_config.h"

#if MEGATRON_WITH_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace megatron::tokenizer {

#if MEGATRON_WITH_SENTENCEPIECE

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file) : impl_(std::make_unique<Impl>()) {
  const auto status = impl_->processor.Load(model_file);
  TORCH_CHECK(status.ok(), "[tokenizer] --tokenizer-model ", model_file,
              ": not a SentencePiece model: ", status.ToString());
  // Megatron-LM re-inserts the spaces of a model that removes extra whitespace with a placeholder
  // symbol; these ids would differ from its own, so such a model is refused (found as it finds it).
  std::vector<std::string> two_spaces, one_space;
  TORCH_CHECK(impl_->processor.Encode("x  y", &two_spaces).ok() && impl_->processor.Encode("x y", &one_space).ok(),
              "[tokenizer] ", model_file, ": the model cannot encode plain text");
  TORCH_CHECK(two_spaces != one_space, "[tokenizer] ", model_file,
              ": the model removes extra whitespace (normalizer remove_extra_whitespaces), which Megatron-LM "
              "works around with a placeholder symbol that this reader does not; train it with "
              "--remove_extra_whitespaces=false, as Llama's and Mistral's models are");
  TORCH_CHECK(impl_->processor.eos_id() >= 0, "[tokenizer] ", model_file, ": the model has no </s> (EOD) piece");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::tokenize(std::string_view text) const {
  std::vector<int> ids;
  const auto status = impl_->processor.Encode(text, &ids);
  TORCH_CHECK(status.ok(), "[tokenizer] SentencePiece: ", status.ToString());
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::detokenize(const std::vector<int32_t>& ids) const {
  std::string text;
  const auto status = impl_->processor.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  TORCH_CHECK(status.ok(), "[tokenizer] SentencePiece: ", status.ToString());
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const {
  return impl_->processor.GetPieceSize();
}

int32_t SentencePieceTokenizer::eod() const {
  return impl_->processor.eos_id();
}

#else

struct SentencePieceTokenizer::Impl {};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file) {
  TORCH_CHECK(false, "[tokenizer] --tokenizer-model ", model_file,
              ": this build has no SentencePiece (Debian: libsentencepiece-dev; scripts/setup.sh installs it)");
}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;
std::vector<int32_t> SentencePieceTokenizer::tokenize(std::string_view) const {
  return {};
}
std::string SentencePieceTokenizer::detokenize(const std::vector<int32_t>&) const {
  return {};
}
int64_t SentencePieceTokenizer::vocab_size() const {
  return 0;
}
int32_t SentencePieceTokenizer::eod() const {
  return -1;
}

#endif

}  // namespace megatron::tokenizer
