// What samplers and the data iterator draw from: a fixed-length list of token samples
// (GPTDataset, MockGPTDataset, BlendedDataset).
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <string>

namespace megatron::datasets {

enum class Split { kTrain = 0, kValid = 1, kTest = 2 };
MEGATRON_API const char* split_name(Split split);

class MEGATRON_API MegatronDataset {
 public:
  virtual ~MegatronDataset() = default;
  // Number of samples.
  virtual int64_t size() const = 0;
  // Tokens per sample: sequence_length + 1 when the extra (label) token is drawn.
  virtual int64_t sample_length() const = 0;
  // Writes sample idx's tokens to text[0 .. sample_length()); padding uses pad_token().
  virtual void read_sample(int64_t idx, int64_t* text) const = 0;
  virtual int64_t pad_token() const { return -1; }
  // Throws if files under the dataset changed since they were opened.
  virtual void check_unchanged() const {}
  // Identifies the dataset and its configuration (index caches are keyed by it).
  virtual std::string description() const = 0;
};

}  // namespace megatron::datasets
