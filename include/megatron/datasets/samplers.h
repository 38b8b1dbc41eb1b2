// Megatron-LM's pretraining samplers: which sample indices this data-parallel rank reads in
// each micro-batch, resumable from consumed_samples (the global count across all DP ranks).
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace megatron::datasets {

class MEGATRON_API BatchSampler {
 public:
  virtual ~BatchSampler() = default;
  // This rank's next micro-batch of sample indices, nullopt when the data is exhausted.
  virtual std::optional<std::vector<int64_t>> next() = 0;
  // Samples consumed by all DP ranks so far (the checkpointed quantity).
  virtual int64_t consumed_samples() const = 0;
};

// dataloader_type "single": global micro-batches of micro_batch_size * dp_size consecutive
// indices starting at consumed_samples; rank r takes [r * mbs, (r + 1) * mbs) of each.
class MEGATRON_API MegatronPretrainingSampler : public BatchSampler {
 public:
  MegatronPretrainingSampler(int64_t total_samples, int64_t consumed_samples, int64_t micro_batch_size,
                             int64_t data_parallel_rank, int64_t data_parallel_size, bool drop_last = true);
  std::optional<std::vector<int64_t>> next() override;
  int64_t consumed_samples() const override { return consumed_; }

 private:
  int64_t total_, consumed_, micro_batch_size_, rank_, dp_size_;
  bool drop_last_;
};

// dataloader_type "cyclic": each epoch a torch.randperm (CPU generator seeded with the epoch
// number) of the full buckets, dealt round-robin to the ranks (or, with data_sharding, a
// per-rank bucket shuffled independently). Cycles through epochs without end.
class MEGATRON_API MegatronPretrainingRandomSampler : public BatchSampler {
 public:
  MegatronPretrainingRandomSampler(int64_t total_samples, int64_t consumed_samples, int64_t micro_batch_size,
                                   int64_t data_parallel_rank, int64_t data_parallel_size, bool data_sharding);
  std::optional<std::vector<int64_t>> next() override;
  int64_t consumed_samples() const override { return consumed_; }

 private:
  void start_epoch();

  int64_t total_, consumed_, micro_batch_size_, rank_, dp_size_;
  bool data_sharding_;
  std::vector<int64_t> order_;  // this rank's indices for the current epoch
  size_t pos_ = 0;
  bool started_ = false;
};

}  // namespace megatron::datasets
