#include "megatron/datasets/blended_dataset.h"

#include "megatron/datasets/helpers.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <sstream>

namespace megatron::datasets {
namespace {

std::vector<double> normalize(const std::vector<double>& w) {
  double sum = 0;
  for (double x : w) sum += x;
  std::vector<double> out;
  for (double x : w) out.push_back(x / sum);
  return out;
}

std::array<std::shared_ptr<const MegatronDataset>, 3> build_splits(const std::shared_ptr<const LowLevelDataset>& low,
                                                                   const std::array<std::optional<int64_t>, 3>& sizes,
                                                                   const GPTDatasetConfig& config) {
  const auto ranges = split_ranges(parse_and_normalize_split(config.split), low->num_sequences());
  std::array<std::shared_ptr<const MegatronDataset>, 3> out;
  for (int s = 0; s < 3; ++s) {
    if (!ranges[s]) continue;
    // A split asked for no samples (--eval-iters 0) is not built: its indices would cost a shuffle
    // of a whole epoch that nothing reads, and it may get no documents (Mixtral's 99990,8,2).
    if (sizes[s] == 0) continue;
    out[s] = std::make_shared<GPTDataset>(low, *ranges[s], sizes[s], static_cast<Split>(s), config);
  }
  return out;
}

}  // namespace

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const MegatronDataset>> datasets,
                               std::vector<double> weights, std::optional<int64_t> size)
    : datasets_(std::move(datasets)), weights_(std::move(weights)) {
  TORCH_CHECK(!datasets_.empty() && datasets_.size() == weights_.size(),
              "[blended_dataset] expected one weight per dataset, found ", weights_.size(), " weights for ",
              datasets_.size(), " datasets");
  for (size_t i = 0; i < weights_.size(); ++i) {
    TORCH_CHECK(datasets_[i] != nullptr, "[blended_dataset] dataset ", i, " is missing");
    TORCH_CHECK(weights_[i] > 0, "[blended_dataset] expected positive weights, dataset ", i, " has ", weights_[i]);
    TORCH_CHECK(datasets_[i]->sample_length() == datasets_[0]->sample_length(), "[blended_dataset] dataset ", i,
                " has samples of ", datasets_[i]->sample_length(), " tokens, dataset 0 of ",
                datasets_[0]->sample_length());
  }
  if (size) {
    weights_ = normalize(weights_);
    build_blending_indices(weights_, *size, dataset_index_, dataset_sample_index_);
  } else {
    std::vector<int64_t> counts;
    for (double w : weights_) {
      TORCH_CHECK(w == std::floor(w),
                  "[blended_dataset] without a size the weights are sample "
                  "counts and must be whole numbers, found ",
                  w);
      counts.push_back(static_cast<int64_t>(w));
    }
    build_exhaustive_blending_indices(counts, dataset_index_, dataset_sample_index_);
  }
  std::vector<int64_t> used(datasets_.size(), 0);
  for (int16_t d : dataset_index_) ++used[static_cast<size_t>(d)];
  for (size_t d = 0; d < datasets_.size(); ++d) {
    TORCH_CHECK(used[d] <= datasets_[d]->size(), "[blended_dataset] the blend draws ", used[d],
                " samples from dataset ", d, " (", datasets_[d]->description().substr(0, 200), "...) which has only ",
                datasets_[d]->size(), "; raise the mid-level surplus or the dataset's sample count");
  }
}

void BlendedDataset::read_sample(int64_t idx, int64_t* text) const {
  TORCH_CHECK(idx >= 0 && idx < size(), "[blended_dataset] sample ", idx, " out of range [0, ", size(), ")");
  datasets_[static_cast<size_t>(dataset_index_[idx])]->read_sample(dataset_sample_index_[idx], text);
}

void BlendedDataset::check_unchanged() const {
  for (const auto& d : datasets_) d->check_unchanged();
}

std::string BlendedDataset::description() const {
  std::ostringstream ss;
  ss << "class: BlendedDataset\nsize: " << size() << "\n";
  for (size_t i = 0; i < datasets_.size(); ++i) {
    ss << "weight: " << weights_[i] << "\n" << datasets_[i]->description();
  }
  return ss.str();
}

// Megatron-LM's get_blend_from_list: "prefix ...", or "weight prefix weight prefix ..." when every
// other word is a number. Half numbers, or numbers in an odd-length list, are a mistake, not paths.
DataBlend parse_data_path(const std::vector<std::string>& words) {
  DataBlend blend;
  TORCH_CHECK(!words.empty(), "--data-path: expected prefixes or weight/prefix pairs, found nothing");
  auto as_number = [](const std::string& w) -> std::optional<double> {
    char* end = nullptr;
    const double v = std::strtod(w.c_str(), &end);
    if (w.empty() || end != w.c_str() + w.size()) return std::nullopt;
    return v;
  };
  size_t numbers = 0;
  for (size_t i = 0; i < words.size(); i += 2) numbers += as_number(words[i]).has_value();
  if (words.size() == 1 || numbers == 0) {
    blend.prefixes = words;
    return blend;
  }
  TORCH_CHECK(words.size() % 2 == 0, "--data-path: a weighted blend is pairs of weight and prefix, but ", words.size(),
              " items were given");
  for (size_t i = 0; i < words.size(); i += 2) {
    const auto weight = as_number(words[i]);
    TORCH_CHECK(weight, "--data-path: '", words[i], "' stands where a weight belongs (before ", words[i + 1],
                "); give a weight before every prefix or none at all");
    TORCH_CHECK(std::isfinite(*weight) && *weight > 0, "--data-path: the weight of ", words[i + 1],
                " must be a finite number > 0 (got ", words[i], ")");
    blend.weights.push_back(*weight);
    blend.prefixes.push_back(words[i + 1]);
  }
  return blend;
}

std::array<std::shared_ptr<const MegatronDataset>, 3> build_gpt_datasets(
    const DataBlend& blend, const std::array<std::optional<int64_t>, 3>& sizes, const GPTDatasetConfig& config,
    double mid_level_surplus) {
  TORCH_CHECK(!blend.prefixes.empty(), "[gpt_dataset] --data-path: no dataset prefixes");
  auto low_level = [&config](const std::string& prefix) {
    return std::make_shared<IndexedLowLevelDataset>(std::make_shared<IndexedDataset>(prefix, config.mmap_bin_files));
  };
  if (blend.prefixes.size() == 1 && blend.weights.empty()) {
    return build_splits(low_level(blend.prefixes[0]), sizes, config);
  }
  std::vector<std::array<std::shared_ptr<const MegatronDataset>, 3>> per_prefix;
  std::array<std::shared_ptr<const MegatronDataset>, 3> out;
  if (!blend.weights.empty()) {
    const auto weights = normalize(blend.weights);
    for (size_t d = 0; d < blend.prefixes.size(); ++d) {
      std::array<std::optional<int64_t>, 3> buffer;
      for (int s = 0; s < 3; ++s) {
        TORCH_CHECK(sizes[s].has_value(),
                    "[blended_dataset] weighted --data-path needs a "
                    "sample count for every split");
        buffer[s] = static_cast<int64_t>(std::ceil(std::ceil(*sizes[s] * weights[d]) * (1 + mid_level_surplus)));
      }
      per_prefix.push_back(build_splits(low_level(blend.prefixes[d]), buffer, config));
    }
    for (int s = 0; s < 3; ++s) {
      if (!per_prefix[0][s]) continue;
      int64_t size = 0;
      std::vector<std::shared_ptr<const MegatronDataset>> parts;
      for (size_t d = 0; d < blend.prefixes.size(); ++d) {
        size += static_cast<int64_t>(std::ceil(*sizes[s] * weights[d]));
        parts.push_back(per_prefix[d][s]);
      }
      out[s] = std::make_shared<BlendedDataset>(parts, weights, size);
    }
    return out;
  }
  // Several prefixes without weights: blend by their sizes.
  std::array<std::optional<int64_t>, 3> whole;  // each prefix's whole split, unless none is asked for
  for (int s = 0; s < 3; ++s)
    if (sizes[s] == 0) whole[s] = 0;
  for (const auto& prefix : blend.prefixes) per_prefix.push_back(build_splits(low_level(prefix), whole, config));
  for (int s = 0; s < 3; ++s) {
    if (!per_prefix[0][s]) continue;
    std::vector<std::shared_ptr<const MegatronDataset>> parts;
    std::vector<double> weights;
    double total = 0;
    for (auto& p : per_prefix) {
      parts.push_back(p[s]);
      weights.push_back(static_cast<double>(p[s]->size()));
      total += weights.back();
    }
    std::optional<int64_t> size;
    if (sizes[s]) size = std::min<int64_t>(*sizes[s], static_cast<int64_t>(total));
    out[s] = std::make_shared<BlendedDataset>(parts, weights, size);
  }
  return out;
}

std::array<std::shared_ptr<const MegatronDataset>, 3> build_gpt_datasets_on_ranks(
    const DataBlend& blend, const std::array<std::optional<int64_t>, 3>& sizes, const GPTDatasetConfig& config,
    int rank, const std::function<void()>& barrier, double mid_level_surplus) {
  std::array<std::shared_ptr<const MegatronDataset>, 3> out;
  std::exception_ptr error;
  if (rank == 0) {
    // A failure on rank 0 still reaches the barrier, so the other ranks do not hang in it.
    try {
      out = build_gpt_datasets(blend, sizes, config, mid_level_surplus);
    } catch (...) {
      error = std::current_exception();
    }
  }
  barrier();
  if (error) std::rethrow_exception(error);
  if (rank != 0) {
    GPTDatasetConfig load = config;
    load.build_cache = false;
    out = build_gpt_datasets(blend, sizes, load, mid_level_surplus);
  }
  return out;
}

std::array<std::shared_ptr<const MegatronDataset>, 3> build_gpt_datasets_per_split_on_ranks(
    const std::array<std::optional<DataBlend>, 3>& blends, const std::array<std::optional<int64_t>, 3>& sizes,
    const GPTDatasetConfig& config, int rank, const std::function<void()>& barrier, double mid_level_surplus) {
  // Megatron-LM's split spoof: the split's whole range, no samples asked of the other two.
  static const char* const kWhole[3] = {"1,0,0", "0,1,0", "0,0,1"};
  std::array<std::shared_ptr<const MegatronDataset>, 3> out;
  for (int s = 0; s < 3; ++s) {
    if (!blends[s] || sizes[s] == 0) continue;
    GPTDatasetConfig whole = config;
    whole.split = kWhole[s];
    std::array<std::optional<int64_t>, 3> only = {0, 0, 0};
    only[s] = sizes[s];
    out[s] = build_gpt_datasets_on_ranks(*blends[s], only, whole, rank, barrier, mid_level_surplus)[s];
  }
  return out;
}

std::array<std::optional<int64_t>, 3> train_valid_test_num_samples(int64_t train_iters, int64_t global_batch_size,
                                                                   int64_t eval_interval, int64_t eval_iters) {
  TORCH_CHECK(train_iters >= 0 && global_batch_size > 0 && eval_interval > 0 && eval_iters >= 0,
              "[gpt_dataset] expected --train-iters >= 0, --global-batch-size > 0, "
              "--eval-interval > 0, --eval-iters >= 0; found ",
              train_iters, ", ", global_batch_size, ", ", eval_interval, ", ", eval_iters);
  return {train_iters * global_batch_size, (train_iters / eval_interval + 1) * eval_iters * global_batch_size,
          eval_iters * global_batch_size};
}

std::array<std::shared_ptr<const MegatronDataset>, 3> build_mock_gpt_datasets(
    int64_t vocab_size, int64_t eod_token, const std::array<std::optional<int64_t>, 3>& sizes,
    const GPTDatasetConfig& config) {
  // Megatron-LM splits mock data evenly whatever --split says, and caches nothing.
  GPTDatasetConfig mock = config;
  mock.split = "1,1,1";
  mock.path_to_cache.clear();
  return build_splits(std::make_shared<MockLowLevelDataset>(vocab_size, eod_token), sizes, mock);
}

}  // namespace megatron::datasets
