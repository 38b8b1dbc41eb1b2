// The data.pkl inside a torch.save archive, which the checkpoint target rarely reaches (its CRC
// checks refuse almost every mutation): the input is wrapped in a well-formed archive with two
// storages (data/0: 64 bytes, data/1: 32 bytes) and read the way checkpoints are.
#include <caffe2/serialize/inline_container.h>

#include "fuzz_util.h"
#include "megatron/models/common/serialization.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const std::string path = fuzz::work_dir() + "/archive.pt";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) -> size_t {
      out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
      return n;
    });
    const std::string storage0(64, '\1'), storage1(32, '\2');
    writer.writeRecord("data.pkl", data, size);
    writer.writeRecord("data/0", storage0.data(), storage0.size());
    writer.writeRecord("data/1", storage1.data(), storage1.size());
    writer.writeEndOfFile();
  }
  fuzz::expect_clean([&] { models::common::read_archive(path); });
  return 0;
}
