#include "megatron/datasets/samplers.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

namespace megatron::datasets {
namespace {

void check_common(int64_t total, int64_t mbs, int64_t rank, int64_t size) {
  TORCH_CHECK(total > 0, "[samplers] no samples to consume: the dataset has ", total);
  TORCH_CHECK(mbs > 0, "[samplers] --micro-batch-size must be > 0, got ", mbs);
  TORCH_CHECK(size > 0 && rank >= 0 && rank < size, "[samplers] data-parallel rank ", rank,
              " outside a data-parallel group of ", size);
}

std::vector<int64_t> randperm(int64_t n, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor perm = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
  const int64_t* p = perm.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + n);
}

}  // namespace

MegatronPretrainingSampler::MegatronPretrainingSampler(int64_t total_samples, int64_t consumed_samples,
                                                       int64_t micro_batch_size, int64_t data_parallel_rank,
                                                       int64_t data_parallel_size, bool drop_last)
    : total_(total_samples),
      consumed_(consumed_samples),
      micro_batch_size_(micro_batch_size),
      rank_(data_parallel_rank),
      dp_size_(data_parallel_size),
      drop_last_(drop_last) {
  check_common(total_, micro_batch_size_, rank_, dp_size_);
  TORCH_CHECK(consumed_ >= 0 && consumed_ < total_, "[samplers] consumed_samples ", consumed_,
              " leaves no samples to consume out of ", total_,
              " (resuming past the end of the dataset? raise --train-samples/--train-iters "
              "only together with the data)");
}

std::optional<std::vector<int64_t>> MegatronPretrainingSampler::next() {
  const int64_t global = micro_batch_size_ * dp_size_;
  const int64_t left = total_ - consumed_;
  if (left <= 0) return std::nullopt;
  if (left < global && drop_last_) return std::nullopt;
  std::vector<int64_t> batch;
  // The last partial global batch (drop_last = false) is sliced like a full one.
  const int64_t begin = consumed_ + rank_ * micro_batch_size_;
  const int64_t end = std::min(begin + micro_batch_size_, consumed_ + std::min(left, global));
  for (int64_t i = begin; i < end; ++i) batch.push_back(i);
  consumed_ += std::min(left, global);
  return batch;
}

MegatronPretrainingRandomSampler::MegatronPretrainingRandomSampler(int64_t total_samples, int64_t consumed_samples,
                                                                   int64_t micro_batch_size, int64_t data_parallel_rank,
                                                                   int64_t data_parallel_size, bool data_sharding)
    : total_(total_samples),
      consumed_(consumed_samples),
      micro_batch_size_(micro_batch_size),
      rank_(data_parallel_rank),
      dp_size_(data_parallel_size),
      data_sharding_(data_sharding) {
  check_common(total_, micro_batch_size_, rank_, dp_size_);
  TORCH_CHECK(total_ >= micro_batch_size_ * dp_size_, "[samplers] ", total_,
              " samples do not fill one global micro-batch of ", micro_batch_size_ * dp_size_);
}

void MegatronPretrainingRandomSampler::start_epoch() {
  const int64_t global = micro_batch_size_ * dp_size_;
  const int64_t active_total = total_ - total_ % global;
  const int64_t epoch = consumed_ / active_total;
  const int64_t in_epoch = consumed_ % active_total;
  TORCH_CHECK(in_epoch % global == 0, "[samplers] consumed_samples ", consumed_,
              " is not a multiple of micro_batch_size * data_parallel_size = ", global);
  order_.clear();
  if (data_sharding_) {
    const int64_t bucket_size = (total_ / global) * micro_batch_size_;
    const int64_t bucket_offset = in_epoch / dp_size_;
    const int64_t start = rank_ * bucket_size;
    auto perm = randperm(bucket_size, static_cast<uint64_t>(epoch));
    for (size_t i = static_cast<size_t>(bucket_offset); i < perm.size(); ++i) {
      order_.push_back(start + perm[i]);
    }
  } else {
    const int64_t full_bucket = (total_ / micro_batch_size_) * micro_batch_size_;
    auto perm = randperm(full_bucket, static_cast<uint64_t>(epoch));
    for (int64_t i = in_epoch + rank_; i < full_bucket; i += dp_size_) order_.push_back(perm[i]);
  }
  pos_ = 0;
  started_ = true;
}

std::optional<std::vector<int64_t>> MegatronPretrainingRandomSampler::next() {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!started_) start_epoch();
    if (pos_ + static_cast<size_t>(micro_batch_size_) <= order_.size()) {
      std::vector<int64_t> batch(order_.begin() + static_cast<int64_t>(pos_),
                                 order_.begin() + static_cast<int64_t>(pos_) + micro_batch_size_);
      pos_ += static_cast<size_t>(micro_batch_size_);
      consumed_ += micro_batch_size_ * dp_size_;
      return batch;
    }
    // Epoch exhausted: Megatron's cyclic iterator starts the next one from consumed_samples.
    started_ = false;
  }
  return std::nullopt;
}

}  // namespace megatron::datasets
