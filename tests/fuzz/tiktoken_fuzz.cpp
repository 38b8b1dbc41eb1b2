// Megatron-LM's tiktoken JSON and text: [2-byte JSON length][JSON][1-byte pattern: v1 if odd]
// [text]. Loaded with 7 special tokens and the whole list, then the text encoded and decoded.
#include "fuzz_util.h"
#include "megatron/tokenizer/tiktoken.h"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const size_t json_size = fuzz::take_length(data, size, 2);
  const std::string path = fuzz::write_file("tiktoken.json", data, json_size);
  data += json_size, size -= json_size;
  const std::string pattern = size > 0 && (data[0] & 1) ? "v1" : "v2";
  const std::string text(reinterpret_cast<const char*>(data + (size > 0)), size - (size > 0));
  // The vocabulary size the file implies (a count of its top-level list), as a user would pass it.
  int64_t entries = 0;
  try {
    const auto list = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(data - json_size), json_size));
    entries = list.is_array() ? static_cast<int64_t>(list.size()) : 0;
  } catch (const nlohmann::json::exception&) {
  }
  fuzz::expect_clean([&] {
    tokenizer::TikTokenizer tok(path, pattern, 7, 7 + (entries > 0 ? entries : 1));
    fuzz::encode_and_decode(tok, text);
  });
  return 0;
}
