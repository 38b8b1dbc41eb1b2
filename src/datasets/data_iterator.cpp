#include "megatron/datasets/data_iterator.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>

namespace megatron::datasets {
namespace {

// The causal mask [1, 1, s, s] (true above the diagonal), memoised for the last s: it is a
// constant, and building 4 M booleans per batch at s = 2048 would dominate the batch time.
at::Tensor causal_mask(int64_t s) {
  static std::mutex mutex;
  static at::Tensor mask;
  std::lock_guard<std::mutex> lock(mutex);
  if (!mask.defined() || mask.size(-1) != s) {
    mask = at::ones({s, s}, at::kBool).triu(1).view({1, 1, s, s});
  }
  return mask;
}

// One sample's loss mask, position ids and (when `attention` is given) attention mask from its
// tokens t[0, s). Positions restart after each EOD with reset_position_ids; attention stops at
// EODs with reset_attention_mask (tokens after position i never see tokens <= i). last_eod is
// scratch of s entries.
void ltor_row(const int64_t* t, int64_t s, const BatchOptions& options, float* m, int64_t* p, bool* attention,
              int64_t* last_eod) {
  const int64_t eod = options.eod_token;
  const bool need_eod = options.reset_position_ids || options.reset_attention_mask || options.eod_mask_loss;
  int64_t prev_eod = -1, position = 0;
  for (int64_t i = 0; i < s; ++i) {
    last_eod[i] = prev_eod;
    m[i] = (options.eod_mask_loss && t[i] == eod) ? 0.0f : 1.0f;
    p[i] = position++;
    if (need_eod && t[i] == eod) {
      prev_eod = i;
      if (options.reset_position_ids) position = 0;
    }
  }
  if (attention == nullptr) return;
  for (int64_t row = 0; row < s; ++row) {
    // Row attends to [first, row]: the tokens since the last EOD before it.
    const int64_t first = last_eod[row] + 1;
    std::memset(attention + row * s, 1, static_cast<size_t>(s));
    std::memset(attention + row * s + first, 0, static_cast<size_t>(row - first + 1));
  }
}

}  // namespace

Batch ltor_masks_and_position_ids(const at::Tensor& tokens, int64_t eod_token, bool reset_position_ids,
                                  bool reset_attention_mask, bool eod_mask_loss) {
  TORCH_CHECK(tokens.dim() == 2, "[data_iterator] get_ltor_masks_and_position_ids expects tokens [b, s], found ",
              tokens.sizes());
  const bool need_eod = reset_position_ids || reset_attention_mask || eod_mask_loss;
  TORCH_CHECK(!need_eod || eod_token >= 0, "[data_iterator] EOD-based masking needs the tokenizer's EOD id, got ",
              eod_token);
  const auto t = tokens.to(at::kCPU, at::kLong).contiguous();
  const int64_t b = t.size(0), s = t.size(1);
  BatchOptions options;
  options.eod_token = eod_token;
  options.reset_position_ids = reset_position_ids;
  options.reset_attention_mask = reset_attention_mask;
  options.eod_mask_loss = eod_mask_loss;
  auto loss_mask = at::empty({b, s}, at::kFloat);
  auto position_ids = at::empty({b, s}, at::kLong);
  // One causal mask for the whole batch unless masks differ per sample (Megatron-LM's shapes).
  auto attention_mask = reset_attention_mask ? at::empty({b, 1, s, s}, at::kBool) : causal_mask(s).clone();
  std::vector<int64_t> last_eod(static_cast<size_t>(s));
  for (int64_t r = 0; r < b; ++r) {
    ltor_row(t.data_ptr<int64_t>() + r * s, s, options, loss_mask.data_ptr<float>() + r * s,
             position_ids.data_ptr<int64_t>() + r * s,
             reset_attention_mask ? attention_mask.data_ptr<bool>() + r * s * s : nullptr, last_eod.data());
  }
  const auto device = tokens.device();
  return {{"attention_mask", attention_mask.to(device)},
          {"loss_mask", loss_mask.to(device)},
          {"position_ids", position_ids.to(device)}};
}

Batch build_batch(const MegatronDataset& dataset, const std::vector<int64_t>& indices, const BatchOptions& options) {
  const int64_t b = static_cast<int64_t>(indices.size());
  const int64_t len = dataset.sample_length();
  const int64_t extra = options.add_extra_token_to_sequence ? 1 : 0;
  const int64_t s = len - extra;
  TORCH_CHECK(b > 0 && s > 0, "[data_iterator] empty batch or sequence (batch ", b, ", sample length ", len, ")");
  TORCH_CHECK(options.sequence_length <= 0 || options.sequence_length == s,
              "[data_iterator] the dataset's samples give sequences of ", s, " tokens, expected --seq-length ",
              options.sequence_length, " (", dataset.description().substr(0, 300), ")");
  const int64_t pad = dataset.pad_token();
  const int64_t eod = options.eod_token;
  const bool need_eod = options.reset_position_ids || options.reset_attention_mask || options.eod_mask_loss;
  TORCH_CHECK(!need_eod || eod >= 0,
              "[data_iterator] EOD-based masking needs the tokenizer's "
              "EOD id, got ",
              eod);

  auto batch_text = at::empty({b, len}, at::kLong);
  auto batch_tokens = at::empty({b, s}, at::kLong);
  auto batch_labels = at::empty({b, s}, at::kLong);
  auto batch_loss_mask = at::empty({b, s}, at::kFloat);
  auto batch_position_ids = at::empty({b, s}, at::kLong);
  at::Tensor batch_attention_mask;
  // Without resets every sample has the same causal mask: one [1, 1, s, s] expanded to
  // [b, 1, s, s] (a view, as Megatron-LM caches its mask).
  const bool per_sample_mask = options.create_attention_mask && options.reset_attention_mask;
  if (per_sample_mask) {
    batch_attention_mask = at::empty({b, 1, s, s}, at::kBool);
  } else if (options.create_attention_mask) {
    batch_attention_mask = causal_mask(s).expand({b, 1, s, s});
  }
  int64_t* tokens = batch_tokens.data_ptr<int64_t>();
  int64_t* labels = batch_labels.data_ptr<int64_t>();
  float* loss_mask = batch_loss_mask.data_ptr<float>();
  int64_t* position_ids = batch_position_ids.data_ptr<int64_t>();
  bool* attention = per_sample_mask ? batch_attention_mask.data_ptr<bool>() : nullptr;

  std::vector<int64_t> last_eod(static_cast<size_t>(s));  // last EOD position < row, or -1
  for (int64_t r = 0; r < b; ++r) {
    int64_t* text = batch_text.data_ptr<int64_t>() + r * len;
    dataset.read_sample(indices[r], text);
    int64_t* t = tokens + r * s;
    int64_t* l = labels + r * s;
    float* m = loss_mask + r * s;
    int64_t* p = position_ids + r * s;
    for (int64_t i = 0; i < s; ++i) {
      t[i] = text[i];
      l[i] = extra ? text[i + 1] : (i + 1 < s ? text[i + 1] : pad);
    }
    ltor_row(t, s, options, m, p, attention != nullptr ? attention + r * s * s : nullptr, last_eod.data());
    // Padding: never a loss target, and mapped to id 0 so the embedding can look it up.
    for (int64_t i = 0; i < s; ++i) {
      if (l[i] == pad) m[i] = 0.0f;
      if (t[i] == pad) t[i] = 0;
      if (l[i] == pad) l[i] = 0;
    }
  }
  return {{"text", batch_text},
          {"tokens", batch_tokens},
          {"labels", batch_labels},
          {"loss_mask", batch_loss_mask},
          {"attention_mask", batch_attention_mask},
          {"position_ids", batch_position_ids}};
}

DataIterator::DataIterator(std::shared_ptr<const MegatronDataset> dataset, std::unique_ptr<BatchSampler> sampler,
                           BatchOptions options, int prefetch, int64_t check_files_every)
    : dataset_(std::move(dataset)),
      sampler_(std::move(sampler)),
      options_(options),
      prefetch_(prefetch),
      check_every_(check_files_every) {
  TORCH_CHECK(dataset_ && sampler_, "[data_iterator] needs a dataset and a sampler");
  consumed_ = sampler_->consumed_samples();
  if (prefetch_ > 0) thread_ = std::thread([this] { worker(); });
}

DataIterator::~DataIterator() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

DataIterator::Item DataIterator::produce() {
  Item item;
  auto indices = sampler_->next();
  item.consumed = sampler_->consumed_samples();
  if (!indices) return item;
  if (check_every_ > 0 && produced_++ % check_every_ == 0) dataset_->check_unchanged();
  item.batch = build_batch(*dataset_, *indices, options_);
  if (options_.pin_memory) {
    for (auto& [name, t] : *item.batch)
      if (t.defined()) t = t.contiguous().pin_memory();
  }
  return item;
}

void DataIterator::worker() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || static_cast<int>(queue_.size()) < prefetch_; });
      if (stop_) return;
    }
    Item item;
    try {
      item = produce();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      done_ = true;
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const bool end = !item.batch.has_value();
    queue_.push_back(std::move(item));
    cv_.notify_all();
    if (end) {
      done_ = true;
      return;
    }
  }
}

std::optional<Batch> DataIterator::next() {
  Item item;
  if (prefetch_ <= 0) {
    item = produce();
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return !queue_.empty() || done_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return std::nullopt;
    }
    item = std::move(queue_.front());
    if (item.batch) queue_.pop_front();  // keep the end marker for later calls
    cv_.notify_all();
  }
  if (item.batch) consumed_ = item.consumed;
  return std::move(item.batch);
}

}  // namespace megatron::datasets
