// A checkpoint folder's latest_checkpointed_iteration.txt.
#include "fuzz_util.h"
#include "megatron/training/checkpoint_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  fuzz::write_file(training::kTrackerFileName, data, size);
  fuzz::expect_clean([&] { training::read_tracker(fuzz::work_dir()); });
  return 0;
}
