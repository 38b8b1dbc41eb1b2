// A model.safetensors file: header and tensors read.
#include "fuzz_util.h"
#include "megatron/models/common/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const std::string path = fuzz::write_file("model.safetensors", data, size);
  fuzz::expect_clean([&] { models::common::load_safetensors(path); });
  return 0;
}
