// A SentencePiece .model and text: [4-byte .model length][.model][text]. Loaded, then the text
// encoded and the ids decoded.
#include "fuzz_util.h"
#include "megatron/tokenizer/sentencepiece.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const size_t model_size = fuzz::take_length(data, size, 4);
  const std::string path = fuzz::write_file("tokenizer.model", data, model_size);
  const std::string text(reinterpret_cast<const char*>(data + model_size), size - model_size);
  fuzz::expect_clean([&] {
    tokenizer::SentencePieceTokenizer tok(path);
    fuzz::encode_and_decode(tok, text);
  });
  return 0;
}
