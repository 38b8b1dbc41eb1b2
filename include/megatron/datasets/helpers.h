// Index-building kernels of Megatron-LM's datasets/helpers.cpp, with the same arithmetic.
#pragma once

#include "megatron/export.h"

#include <cstdint>
#include <vector>

namespace megatron::datasets {

// The sample index of a GPT dataset: [num_samples + 1, 2] (flattened, row major) of
// (position in document_index, token offset in that document) where each sample starts.
// num_samples = (num_epochs * tokens_per_epoch - extra) / seq_length when dropping the last
// partial sample, else ceil(float(...) / seq_length) (single precision, as Megatron's).
MEGATRON_API std::vector<int64_t> build_sample_idx(const int32_t* sizes, const int32_t* document_index,
                                                   int64_t document_index_size, int32_t seq_length, int32_t num_epochs,
                                                   int64_t tokens_per_epoch, bool drop_last_partial_sequence,
                                                   int add_extra_token_to_sequence);

// Blends `size` samples: each goes to the dataset whose achieved count lags its weight most
// (greatest sampling error, ties to the lowest index). dataset_index[i] and
// dataset_sample_index[i] name the dataset and its running sample counter.
MEGATRON_API void build_blending_indices(const std::vector<double>& weights, int64_t size,
                                         std::vector<int16_t>& dataset_index,
                                         std::vector<int64_t>& dataset_sample_index);

// Exactly sizes[i] samples from dataset i, interleaved by the same error rule.
MEGATRON_API void build_exhaustive_blending_indices(const std::vector<int64_t>& sizes,
                                                    std::vector<int16_t>& dataset_index,
                                                    std::vector<int64_t>& dataset_sample_index);

}  // namespace megatron::datasets
