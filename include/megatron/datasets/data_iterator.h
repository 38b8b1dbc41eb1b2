// Batches of tensors from a dataset and a sampler: what forward_step consumes. Masks and
// position ids follow Megatron-LM's GPT sample construction (_get_ltor_masks_and_position_ids).
#pragma once

#include "megatron/export.h"

#include "megatron/datasets/batch_iterator.h"
#include "megatron/datasets/megatron_dataset.h"
#include "megatron/datasets/samplers.h"

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace megatron::datasets {

struct MEGATRON_API BatchOptions {
  int64_t eod_token = -1;
  // The model's sequence length; > 0: samples of another length are an error.
  int64_t sequence_length = 0;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  bool create_attention_mask = true;
  // Samples carry seq_length + 1 tokens (labels are the inputs shifted); else labels roll over
  // and the last label is padding.
  bool add_extra_token_to_sequence = true;
  // Page-locked batches (CUDA runs), so that the copy to the GPU can be asynchronous; built on
  // the prefetch thread when there is one.
  bool pin_memory = false;
};

// The samples `indices` of `dataset` as one GPT batch:
//   text [b, sample length] int64, the samples as read (s + 1 tokens with the extra token: what
//   Megatron-LM's legacy get_batch splits into tokens and labels);
//   tokens [b, s] int64; labels [b, s] int64, the tokens shifted left by one; loss_mask [b, s]
//   float32; position_ids [b, s] int64; attention_mask [b, 1, s, s] bool, true = masked out,
//   undefined when not created (without reset_attention_mask one causal [1, 1, s, s] expanded,
//   a view: .contiguous() to own).
MEGATRON_API Batch build_batch(const MegatronDataset& dataset, const std::vector<int64_t>& indices,
                               const BatchOptions& options);

// Megatron-LM's get_ltor_masks_and_position_ids for tokens [b, s], as build_batch makes them:
// "attention_mask" [b, 1, s, s] with reset_attention_mask, else [1, 1, s, s] (bool, true = masked
// out), "loss_mask" [b, s] float32, "position_ids" [b, s] int64; on the tokens' device.
MEGATRON_API Batch ltor_masks_and_position_ids(const at::Tensor& tokens, int64_t eod_token, bool reset_position_ids,
                                               bool reset_attention_mask, bool eod_mask_loss);

// Pulls micro-batches of indices from the sampler and builds batches, optionally `prefetch`
// batches ahead on a background thread. Checks every `check_files_every` batches that the files
// under the dataset have not changed.
class MEGATRON_API DataIterator : public BatchIterator {
 public:
  DataIterator(std::shared_ptr<const MegatronDataset> dataset, std::unique_ptr<BatchSampler> sampler,
               BatchOptions options, int prefetch = 0, int64_t check_files_every = 100);
  ~DataIterator() override;
  DataIterator(const DataIterator&) = delete;
  DataIterator& operator=(const DataIterator&) = delete;

  // The next batch, nullopt once the sampler is exhausted. Rethrows a background failure.
  std::optional<Batch> next() override;
  // consumed_samples after the batches handed out so far (what a checkpoint stores).
  int64_t consumed_samples() const { return consumed_; }

 private:
  struct Item {
    std::optional<Batch> batch;
    int64_t consumed = 0;
  };
  Item produce();
  void worker();

  std::shared_ptr<const MegatronDataset> dataset_;
  std::unique_ptr<BatchSampler> sampler_;
  BatchOptions options_;
  int prefetch_;
  int64_t check_every_, produced_ = 0, consumed_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::exception_ptr error_;
  bool stop_ = false, done_ = false;
  std::thread thread_;
};

}  // namespace megatron::datasets
