// GPT-2 BPE files and text: [2-byte vocab.json length][2-byte merges.txt length][vocab.json]
// [merges.txt][text]. Loaded, then the text encoded and decoded.
#include "fuzz_util.h"
#include "megatron/tokenizer/gpt2_bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const size_t vocab_size = fuzz::take_length(data, size, 2);
  const std::string vocab = fuzz::write_file("vocab.json", data, vocab_size);
  data += vocab_size, size -= vocab_size;
  const size_t merges_size = fuzz::take_length(data, size, 2);
  const std::string merges = fuzz::write_file("merges.txt", data, merges_size);
  const std::string text(reinterpret_cast<const char*>(data + merges_size), size - merges_size);
  fuzz::expect_clean([&] {
    tokenizer::GPT2BPETokenizer tok(vocab, merges);
    tok.detokenize(tok.tokenize(text));
  });
  return 0;
}
