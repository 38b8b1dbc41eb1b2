// A Megatron .idx/.bin pair: [4-byte .idx length][.idx][.bin]. Opened and read in full.
#include "fuzz_util.h"
#include "megatron/datasets/indexed_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  const size_t idx_size = fuzz::take_length(data, size, 4);
  const std::string prefix = fuzz::work_dir() + "/data";
  fuzz::write_file("data.idx", data, idx_size);
  fuzz::write_file("data.bin", data + idx_size, size - idx_size);
  fuzz::expect_clean([&] {
    datasets::IndexedDataset ds(prefix);
    for (int64_t i = 0; i < ds.num_sequences(); ++i) ds.get(i).to_vector();
    for (int64_t d = 0; d < ds.num_documents(); ++d) ds.get_document(d).to_vector();
  });
  return 0;
}
