// Megatron-LM's GPTDataset: fixed-length samples cut from a token stream of shuffled documents.
// Three indices, built exactly as Megatron-LM builds them (same numpy RandomState draws):
//   document_index [E * N] int32  documents of E epochs, shuffled (the last epoch apart when
//                                 less than 80 % of it is needed)
//   sample_index   [S + 1, 2]     (position in document_index, token offset) of each sample
//   shuffle_index  [S]            permutation of the samples
// Caches the indices as .npy files keyed by a hash of everything they depend on; loaded caches
// are memory-mapped, so the ranks of a node share one copy.
#pragma once

#include "megatron/export.h"

#include "megatron/datasets/index_array.h"
#include "megatron/datasets/indexed_dataset.h"
#include "megatron/datasets/megatron_dataset.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace megatron::datasets {

// "969,30,1" -> [0.969, 0.030, 0.001]: the numbers in the string (missing ones 0), normalised.
MEGATRON_API std::array<double, 3> parse_and_normalize_split(const std::string& split);
// Sequence ranges [begin, end) per split (round half to even, as Python's round), or nullopt for
// a split of weight 0.
MEGATRON_API std::array<std::optional<std::pair<int64_t, int64_t>>, 3> split_ranges(const std::array<double, 3>& split,
                                                                                    int64_t num_elements);

// The token source a GPTDataset cuts samples from: sequences with lengths.
class MEGATRON_API LowLevelDataset {
 public:
  virtual ~LowLevelDataset() = default;
  virtual int64_t num_sequences() const = 0;
  virtual const int32_t* sequence_lengths() const = 0;
  // Tokens [offset, offset + length) of sequence idx into out.
  virtual void read(int64_t idx, int64_t offset, int64_t length, int64_t* out) const = 0;
  virtual std::string description() const = 0;
  // What an error names: the .bin file.
  virtual std::string name() const { return description(); }
  virtual void check_unchanged() const {}
};

// An IndexedDataset (.bin/.idx pair) as a token source.
class MEGATRON_API IndexedLowLevelDataset : public LowLevelDataset {
 public:
  explicit IndexedLowLevelDataset(std::shared_ptr<const IndexedDataset> dataset);
  int64_t num_sequences() const override { return dataset_->num_sequences(); }
  const int32_t* sequence_lengths() const override;
  void read(int64_t idx, int64_t offset, int64_t length, int64_t* out) const override;
  std::string description() const override;
  std::string name() const override;
  void check_unchanged() const override { dataset_->check_unchanged(); }
  const IndexedDataset& dataset() const { return *dataset_; }

 private:
  std::shared_ptr<const IndexedDataset> dataset_;
  // The .idx's lengths are unaligned in the mapping; a copy gives an aligned int32 array.
  std::vector<int32_t> lengths_;
};

// Synthetic documents for --mock-data, as Megatron-LM's MockGPTLowLevelDataset: document i has
// L_i tokens 1, 2, ..., L_i - 1 (mod vocab) then EOD, with L = np.random.default_rng(0)
// .integers(1, 4096, num_sequences, int32).
class MEGATRON_API MockLowLevelDataset : public LowLevelDataset {
 public:
  MockLowLevelDataset(int64_t vocab_size, int64_t eod_token, int64_t num_sequences = 100000);
  int64_t num_sequences() const override { return static_cast<int64_t>(lengths_.size()); }
  const int32_t* sequence_lengths() const override { return lengths_.data(); }
  void read(int64_t idx, int64_t offset, int64_t length, int64_t* out) const override;
  std::string description() const override;

 private:
  int64_t vocab_size_, eod_token_;
  std::vector<int32_t> lengths_;
};

struct MEGATRON_API GPTDatasetConfig {
  uint32_t random_seed = 1234;
  int64_t sequence_length = 0;
  std::string split = "969,30,1";
  // Use one more token than sequence_length so inputs and labels both have sequence_length.
  bool add_extra_token_to_sequence = true;
  // Validation keeps its last, padded sample when false.
  bool drop_last_partial_validation_sequence = true;
  int64_t pad_token = -1;
  // Token ids must lie in [0, vocab_size): a sample holding another is an error naming the file,
  // document and id (the vocab-parallel embedding would silently zero it). 0: unchecked.
  int64_t vocab_size = 0;
  // Folder for the index caches. Empty: "{prefix}/cache/GPTDataset_indices" as Megatron-LM
  // (no caching for mock data).
  std::string path_to_cache;
  // Build (and save) missing caches. Ranks other than the builder pass false and only load.
  bool build_cache = true;
  // false: the .bin files are read with pread instead of mapped (--no-mmap-bin-files).
  bool mmap_bin_files = true;
};

class MEGATRON_API GPTDataset : public MegatronDataset {
 public:
  // Samples from sequences [range.first, range.second) of `dataset`. num_samples: the minimum
  // number of samples (more epochs are added until reached); nullopt: one epoch.
  GPTDataset(std::shared_ptr<const LowLevelDataset> dataset, std::pair<int64_t, int64_t> range,
             std::optional<int64_t> num_samples, Split split, GPTDatasetConfig config);

  int64_t size() const override { return static_cast<int64_t>(shuffle_index_.size()); }
  int64_t sample_length() const override {
    return config_.sequence_length + (config_.add_extra_token_to_sequence ? 1 : 0);
  }
  void read_sample(int64_t idx, int64_t* text) const override;
  int64_t pad_token() const override { return config_.pad_token; }
  void check_unchanged() const override { dataset_->check_unchanged(); }
  std::string description() const override { return description_; }

  // Sample idx as (tokens, the document ids it spans).
  std::pair<std::vector<int64_t>, std::vector<int64_t>> get(int64_t idx) const;

  // Built here, or memory-mapped from the cache files when loaded.
  const IndexArray<int32_t>& document_index() const { return document_index_; }
  const IndexArray<int64_t>& sample_index() const { return sample_index_; }  // [S + 1, 2]
  const IndexArray<int64_t>& shuffle_index() const { return shuffle_index_; }
  int64_t num_epochs() const { return num_epochs_; }
  bool separate_final_epoch() const { return separate_final_epoch_; }
  // Whether the indices came from the cache (false: built in this process).
  bool loaded_from_cache() const { return loaded_from_cache_; }
  const std::string& cache_prefix() const { return cache_prefix_; }

 private:
  // Epoch count and the separate-final-epoch decision (cheap; also done when loading a cache).
  void plan_epochs();
  void build_indices();
  bool load_cache();
  void save_cache() const;
  void check_token_ids(const int64_t* tokens, int64_t length, int64_t doc, int64_t offset) const;

  std::shared_ptr<const LowLevelDataset> dataset_;
  std::pair<int64_t, int64_t> range_;
  std::optional<int64_t> num_samples_;
  Split split_;
  GPTDatasetConfig config_;
  std::string description_;
  std::string cache_prefix_;
  IndexArray<int32_t> document_index_;
  IndexArray<int64_t> sample_index_;
  IndexArray<int64_t> shuffle_index_;
  int64_t tokens_per_epoch_ = 0;
  int64_t num_samples_sans_final_epoch_ = 0;
  int64_t num_epochs_ = 0;
  bool separate_final_epoch_ = false;
  bool loaded_from_cache_ = false;
};

}  // namespace megatron::datasets
