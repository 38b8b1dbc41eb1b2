#include "megatron/datasets/helpers.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace megatron::datasets {

std::vector<int64_t> build_sample_idx(const int32_t* sizes, const int32_t* document_index, int64_t document_index_size,
                                      int32_t seq_length, int32_t num_epochs, int64_t tokens_per_epoch,
                                      bool drop_last_partial_sequence, int add_extra_token_to_sequence) {
  TORCH_CHECK(seq_length > 1, "[gpt_dataset] sequence length must be > 1, got ", seq_length);
  TORCH_CHECK(num_epochs > 0 && tokens_per_epoch > 1 && document_index_size > 0,
              "[gpt_dataset] cannot build samples from ", tokens_per_epoch, " tokens per epoch over ", num_epochs,
              " epochs");
  const int64_t extra = add_extra_token_to_sequence;
  int64_t num_samples;
  if (drop_last_partial_sequence) {
    num_samples = (num_epochs * tokens_per_epoch - extra) / seq_length;
  } else {
    num_samples =
        static_cast<int64_t>(std::ceil(static_cast<float>(num_epochs * tokens_per_epoch - extra) / seq_length));
  }
  std::vector<int64_t> sample_idx(2 * (num_samples + 1));
  int64_t sample = 0, doc = 0, doc_offset = 0;
  sample_idx[0] = 0;
  sample_idx[1] = 0;
  ++sample;
  while (sample <= num_samples) {
    int64_t remaining = seq_length + extra;
    while (remaining != 0) {
      const int64_t doc_length = sizes[document_index[doc]] - doc_offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        // The next sample starts inside this document, overlapping by the extra token.
        doc_offset += remaining + doc_length - extra;
        remaining = 0;
      } else if (doc == document_index_size - 1) {
        // Out of documents: only the last, partial sample may end here.
        TORCH_INTERNAL_ASSERT(sample == num_samples);
        doc_offset = sizes[document_index[doc]] - extra;
        break;
      } else {
        ++doc;
        doc_offset = 0;
      }
    }
    sample_idx[2 * sample] = doc;
    sample_idx[2 * sample + 1] = doc_offset;
    ++sample;
  }
  return sample_idx;
}

void build_blending_indices(const std::vector<double>& weights, int64_t size, std::vector<int16_t>& dataset_index,
                            std::vector<int64_t>& dataset_sample_index) {
  const size_t n = weights.size();
  TORCH_CHECK(n > 0 && n < 32767, "[blended_dataset] expected 1..32766 datasets, got ", n);
  dataset_index.assign(size, 0);
  dataset_sample_index.assign(size, 0);
  std::vector<int64_t> current(n, 0);
  for (int64_t i = 0; i < size; ++i) {
    const double x = std::max(static_cast<double>(i), 1.0);
    size_t best = 0;
    double best_error = weights[0] * x - static_cast<double>(current[0]);
    for (size_t d = 1; d < n; ++d) {
      const double error = weights[d] * x - static_cast<double>(current[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    dataset_index[i] = static_cast<int16_t>(best);
    dataset_sample_index[i] = current[best]++;
  }
}

void build_exhaustive_blending_indices(const std::vector<int64_t>& sizes, std::vector<int16_t>& dataset_index,
                                       std::vector<int64_t>& dataset_sample_index) {
  const size_t n = sizes.size();
  TORCH_CHECK(n > 0 && n < 32767, "[blended_dataset] expected 1..32766 datasets, got ", n);
  int64_t total = 0;
  std::set<size_t> unspent;
  for (size_t d = 0; d < n; ++d) {
    total += sizes[d];
    if (sizes[d] > 0) unspent.insert(d);
  }
  std::vector<double> weights(n);
  for (size_t d = 0; d < n; ++d) weights[d] = sizes[d] / static_cast<double>(total);
  dataset_index.assign(total, 0);
  dataset_sample_index.assign(total, 0);
  std::vector<int64_t> counts(n, 0);
  int64_t i = 0;
  while (!unspent.empty()) {
    const double x = std::max(static_cast<double>(i), 1.0);
    size_t best = n;
    double best_error = std::numeric_limits<double>::lowest();
    for (size_t d : unspent) {
      const double error = weights[d] * x - static_cast<double>(counts[d]);
      if (error > best_error) {
        best = d;
        best_error = error;
      }
    }
    dataset_index[i] = static_cast<int16_t>(best);
    dataset_sample_index[i] = counts[best]++;
    if (counts[best] == sizes[best]) unspent.erase(best);
    ++i;
  }
}

}  // namespace megatron::datasets
