// A torch_dist checkpoint's .metadata (PyTorch Distributed Checkpoint's pickle), read as a load
// reads it: the checked unpickler, then every chunk against its tensor and its storage.
#include "fuzz_util.h"
#include "megatron/training/checkpointing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  fuzz::write_file(".metadata", data, size);
  fuzz::expect_clean([&] { training::torch_dist_tensor_shapes(fuzz::work_dir()); });
  return 0;
}
