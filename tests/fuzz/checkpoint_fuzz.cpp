// A model_optim_rng.pt (a torch.save zip archive) without checksums.txt: its records' CRC-32s
// are checked, then LibTorch unpickles it (without running code from it).
#include "fuzz_util.h"
#include "megatron/training/checkpoint_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const std::string path = fuzz::write_file("model_optim_rng.pt", data, size);
  fuzz::expect_clean([&] { training::read_checkpoint_file(path); });
  return 0;
}
