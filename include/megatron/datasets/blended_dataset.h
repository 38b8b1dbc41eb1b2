// Weighted blend of several datasets (Megatron-LM's BlendedDataset): sample i comes from the
// dataset whose share lags its weight the most, so every prefix of the stream is near the weights.
#pragma once

#include "megatron/export.h"

#include "megatron/datasets/gpt_dataset.h"
#include "megatron/datasets/megatron_dataset.h"

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace megatron::datasets {

class MEGATRON_API BlendedDataset : public MegatronDataset {
 public:
  // size: samples to draw by the weights (normalised here); nullopt: exactly weights[i] samples
  // from dataset i (the weights must then be whole numbers).
  BlendedDataset(std::vector<std::shared_ptr<const MegatronDataset>> datasets, std::vector<double> weights,
                 std::optional<int64_t> size);

  int64_t size() const override { return static_cast<int64_t>(dataset_index_.size()); }
  int64_t sample_length() const override { return datasets_[0]->sample_length(); }
  void read_sample(int64_t idx, int64_t* text) const override;
  int64_t pad_token() const override { return datasets_[0]->pad_token(); }
  void check_unchanged() const override;
  std::string description() const override;

  const std::vector<int16_t>& dataset_index() const { return dataset_index_; }
  const std::vector<int64_t>& dataset_sample_index() const { return dataset_sample_index_; }

 private:
  std::vector<std::shared_ptr<const MegatronDataset>> datasets_;
  std::vector<double> weights_;
  std::vector<int16_t> dataset_index_;
  std::vector<int64_t> dataset_sample_index_;
};

// "--data-path": either prefixes, or weight/prefix pairs ("0.3 a 0.7 b").
struct MEGATRON_API DataBlend {
  std::vector<std::string> prefixes;
  std::vector<double> weights;  // empty: no weights given
};
MEGATRON_API DataBlend parse_data_path(const std::vector<std::string>& words);

// Megatron-LM's BlendedMegatronDatasetBuilder for GPT: train/valid/test datasets for the split
// in config.split and the requested sample counts (nullopt: one epoch). A split of weight 0 is
// nullptr. With weights each prefix is over-built by mid_level_surplus (0.5 %) and blended.
MEGATRON_API std::array<std::shared_ptr<const MegatronDataset>, 3> build_gpt_datasets(
    const DataBlend& blend, const std::array<std::optional<int64_t>, 3>& sizes, const GPTDatasetConfig& config,
    double mid_level_surplus = 0.005);

// The same in a distributed job, index caches built once: rank 0 builds (and saves) first, all
// ranks meet in `barrier`, then the other ranks load the caches (a missing cache is an error).
// barrier is the caller's (e.g. the world group's), which keeps this layer free of comm.
MEGATRON_API std::array<std::shared_ptr<const MegatronDataset>, 3> build_gpt_datasets_on_ranks(
    const DataBlend& blend, const std::array<std::optional<int64_t>, 3>& sizes, const GPTDatasetConfig& config,
    int rank, const std::function<void()>& barrier, double mid_level_surplus = 0.005);

// Megatron-LM's blend_per_split (--train/valid/test-data-path): each split from a blend of its own
// (nullopt: no such split), over its datasets' whole documents, built as build_gpt_datasets_on_ranks.
MEGATRON_API std::array<std::shared_ptr<const MegatronDataset>, 3> build_gpt_datasets_per_split_on_ranks(
    const std::array<std::optional<DataBlend>, 3>& blends, const std::array<std::optional<int64_t>, 3>& sizes,
    const GPTDatasetConfig& config, int rank, const std::function<void()>& barrier, double mid_level_surplus = 0.005);

// Megatron's sample request per split: train_iters * gbs, (train_iters / eval_interval + 1) *
// eval_iters * gbs, eval_iters * gbs.
MEGATRON_API std::array<std::optional<int64_t>, 3> train_valid_test_num_samples(int64_t train_iters,
                                                                                int64_t global_batch_size,
                                                                                int64_t eval_interval,
                                                                                int64_t eval_iters);

// --mock-data: the same over MockLowLevelDataset, split "1,1,1" (as Megatron-LM), no cache.
MEGATRON_API std::array<std::shared_ptr<const MegatronDataset>, 3> build_mock_gpt_datasets(
    int64_t vocab_size, int64_t eod_token, const std::array<std::optional<int64_t>, 3>& sizes,
    const GPTDatasetConfig& config);

}  // namespace megatron::datasets
