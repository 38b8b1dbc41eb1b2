// A torch_dist checkpoint's .metadata as torch.distributed.checkpoint writes it (protocol 4,
// memoised; tests/fuzz/corpus/dcp_metadata/torch_dcp, made by make_seed_corpus.py with torch 2.11)
// and as Python pickles the same object at protocol 2: both read to the tensors torch saved; a
// chunk outside its tensor is one error naming it.
#include <gtest/gtest.h>

#include <c10/util/Exception.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "megatron/training/checkpointing.h"
#include "temp_dir.h"

namespace {
namespace fs = std::filesystem;

std::string folder_with(const std::string& corpus_file) {
  const std::string dir = megatron::testing::TempDirs::instance().make("dcp");
  fs::copy_file(std::string(MEGATRON_SOURCE_DIR) + "/tests/fuzz/corpus/dcp_metadata/" + corpus_file,
                fs::path(dir) / ".metadata");
  return dir;
}

TEST(TorchDistMetadata, ReadsWhatTorchDistributedCheckpointWrites) {
  const std::map<std::string, std::vector<int64_t>> saved = {{"b", {2}}, {"w", {2, 3}}};
  EXPECT_EQ(megatron::training::torch_dist_tensor_shapes(folder_with("torch_dcp")), saved);
  EXPECT_EQ(megatron::training::torch_dist_tensor_shapes(folder_with("protocol2")), saved);
}

TEST(TorchDistMetadata, AChunkOutsideItsTensorIsNamed) {
  try {
    megatron::training::torch_dist_tensor_shapes(folder_with("outside"));
    FAIL() << "no error";
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    EXPECT_NE(what.find("'w' has a chunk at [5, 0] of [2, 3], outside its global shape [2, 3]"), std::string::npos)
        << what;
  }
}

}  // namespace
