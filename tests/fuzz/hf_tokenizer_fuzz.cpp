// A Hugging Face tokenizer.json and text: [2-byte tokenizer.json length][tokenizer.json][text].
// Loaded, then the text encoded and the ids decoded.
#include "fuzz_util.h"
#include "megatron/tokenizer/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const size_t json_size = fuzz::take_length(data, size, 2);
  const std::string path = fuzz::write_file("tokenizer.json", data, json_size);
  const std::string text(reinterpret_cast<const char*>(data + json_size), size - json_size);
  fuzz::expect_clean([&] {
    tokenizer::HuggingFaceTokenizer tok(path);
    fuzz::encode_and_decode(tok, text);
  });
  return 0;
}
