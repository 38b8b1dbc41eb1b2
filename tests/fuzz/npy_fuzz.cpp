// A .npy file (the dataset index caches): read, mapped, and converted to int64.
#include "fuzz_util.h"
#include "megatron/datasets/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const std::string path = fuzz::write_file("index.npy", data, size);
  fuzz::expect_clean([&] { datasets::read_npy(path).to_int64(); });
  fuzz::expect_clean([&] { datasets::map_npy(path).numel(); });
  return 0;
}
