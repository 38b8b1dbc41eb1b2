#include "megatron/datasets/gpt_dataset.h"

#include "input_files.h"
#include "megatron/datasets/helpers.h"
#include "megatron/datasets/npy.h"
#include "megatron/datasets/numpy_random.h"
#include "megatron/logging.h"

#include <c10/util/Exception.h>

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace megatron::datasets {
namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void make_dirs(const std::string& path) {
  std::string partial;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') partial = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    partial += part + "/";
    ::mkdir(partial.c_str(), 0755);
  }
  struct stat st;
  TORCH_CHECK(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "[gpt_dataset] ", path,
              ": cannot create the index cache folder");
}

std::string read_text_file(const std::string& path) {
  megatron::detail::check_regular_file(path, "[gpt_dataset] " + path);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Python's round(): half to even, which nearbyint gives in the default rounding mode.
int64_t py_round(double x) {
  return static_cast<int64_t>(std::nearbyint(x));
}

// The number of samples covered by `tokens` tokens (Megatron's drop-last count).
int64_t samples_in(int64_t tokens, int64_t seq_length, int64_t extra) {
  return (tokens - extra) / seq_length;
}

}  // namespace

const char* split_name(Split split) {
  switch (split) {
    case Split::kTrain: return "train";
    case Split::kValid: return "valid";
    case Split::kTest: return "test";
  }
  return "unknown";
}

// Megatron-LM's parse_and_normalize_split: "969,30,1" or "969/30/1", each part a float() >= 0.
std::array<double, 3> parse_and_normalize_split(const std::string& split) {
  const char separator = split.find(',') != std::string::npos ? ',' : '/';
  std::vector<double> values;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(split.find(separator, begin), split.size());
    std::string part = split.substr(begin, end - begin);
    part.erase(0, part.find_first_not_of(" \t"));  // Python's float() takes surrounding spaces
    part.erase(part.find_last_not_of(" \t") + 1);
    char* stop = nullptr;
    const double v = part.empty() ? 0 : std::strtod(part.c_str(), &stop);
    TORCH_CHECK(!part.empty() && stop == part.c_str() + part.size() && std::isfinite(v) && v >= 0, "--split '", split,
                "': expected 1 to 3 numbers >= 0 like \"969,30,1\", found '", part, "'");
    values.push_back(v);
    if (end == split.size()) break;
    begin = end + 1;
  }
  TORCH_CHECK(values.size() <= 3, "--split '", split, "': expected 1 to 3 weights (train,valid,test), found ",
              values.size());
  values.resize(3, 0.0);
  const double sum = values[0] + values[1] + values[2];
  TORCH_CHECK(sum > 0, "--split '", split, "': the weights must not all be 0");
  return {values[0] / sum, values[1] / sum, values[2] / sum};
}

std::array<std::optional<std::pair<int64_t, int64_t>>, 3> split_ranges(const std::array<double, 3>& split,
                                                                       int64_t num_elements) {
  // Book-ends [0, a, a+b, a+b+c], accumulated as Megatron-LM does.
  const double ends[4] = {0.0, split[0], split[0] + split[1], split[0] + split[1] + split[2]};
  std::array<std::optional<std::pair<int64_t, int64_t>>, 3> out;
  for (int s = 0; s < 3; ++s) {
    if (ends[s + 1] <= ends[s]) continue;
    out[s] = std::make_pair(py_round(ends[s] * static_cast<double>(num_elements)),
                            py_round(ends[s + 1] * static_cast<double>(num_elements)));
  }
  return out;
}

IndexedLowLevelDataset::IndexedLowLevelDataset(std::shared_ptr<const IndexedDataset> dataset)
    : dataset_(std::move(dataset)), lengths_(dataset_->sequence_lengths()) {
  const DType d = dataset_->dtype();
  TORCH_CHECK(d != DType::kFloat32 && d != DType::kFloat64, "[gpt_dataset] ", idx_path(dataset_->path_prefix()),
              ": expected integer token ids, found dtype ", dtype_name(d));
}

const int32_t* IndexedLowLevelDataset::sequence_lengths() const {
  return lengths_.data();
}

void IndexedLowLevelDataset::read(int64_t idx, int64_t offset, int64_t length, int64_t* out) const {
  dataset_->read(idx, offset, length, out);
}

std::string IndexedLowLevelDataset::name() const {
  return bin_path(dataset_->path_prefix());
}

std::string IndexedLowLevelDataset::description() const {
  const auto& d = *dataset_;
  std::ostringstream ss;
  ss << "indexed:" << d.path_prefix() << " sequences=" << d.num_sequences() << " documents=" << d.num_documents()
     << " tokens=" << d.num_tokens() << " dtype=" << dtype_name(d.dtype());
  return ss.str();
}

MockLowLevelDataset::MockLowLevelDataset(int64_t vocab_size, int64_t eod_token, int64_t num_sequences)
    : vocab_size_(vocab_size), eod_token_(eod_token) {
  TORCH_CHECK(vocab_size > 1, "[gpt_dataset] mock data needs a vocabulary size > 1, got ", vocab_size);
  lengths_.resize(static_cast<size_t>(num_sequences));
  // Megatron-LM's MockGPTLowLevelDataset: np.random.default_rng(0).integers(1, 4096, n, int32).
  NumpyPCG64Generator rng(0);
  for (auto& len : lengths_) len = static_cast<int32_t>(rng.integers32(1, 4096));
}

void MockLowLevelDataset::read(int64_t idx, int64_t offset, int64_t length, int64_t* out) const {
  const int64_t len = lengths_.at(static_cast<size_t>(idx));
  TORCH_CHECK(offset >= 0 && length >= 0 && offset + length <= len, "[gpt_dataset] mock sequence ", idx, " has ", len,
              " tokens, asked for [", offset, ", ", offset + length, ")");
  for (int64_t i = 0; i < length; ++i) {
    const int64_t pos = offset + i;
    out[i] = pos == len - 1 ? eod_token_ : (pos + 1) % vocab_size_;
  }
}

std::string MockLowLevelDataset::description() const {
  return "mock: sequences=" + std::to_string(lengths_.size()) + " vocab=" + std::to_string(vocab_size_) +
         " eod=" + std::to_string(eod_token_);
}

GPTDataset::GPTDataset(std::shared_ptr<const LowLevelDataset> dataset, std::pair<int64_t, int64_t> range,
                       std::optional<int64_t> num_samples, Split split, GPTDatasetConfig config)
    : dataset_(std::move(dataset)),
      range_(range),
      num_samples_(num_samples),
      split_(split),
      config_(std::move(config)) {
  TORCH_CHECK(config_.sequence_length > 1, "[gpt_dataset] --seq-length must be > 1, got ", config_.sequence_length);
  TORCH_CHECK(range_.first >= 0 && range_.second <= dataset_->num_sequences() && range_.first < range_.second,
              "[gpt_dataset] ", split_name(split_), " split of ", dataset_->description(),
              ": expected a non-empty sequence range inside [0, ", dataset_->num_sequences(), "), found [",
              range_.first, ", ", range_.second, ") (too few documents for --split?)");
  TORCH_CHECK(!num_samples_ || *num_samples_ >= 0, "[gpt_dataset] negative sample count ", *num_samples_);
  std::ostringstream desc;
  desc << "class: GPTDataset\n"
       << "dataset: " << dataset_->description() << "\n"
       << "range: [" << range_.first << ", " << range_.second << ")\n"
       << "num_samples: " << (num_samples_ ? std::to_string(*num_samples_) : "None") << "\n"
       << "index_split: " << split_name(split_) << "\n"
       << "random_seed: " << config_.random_seed << "\n"
       << "sequence_length: " << config_.sequence_length << "\n"
       << "add_extra_token_to_sequence: " << config_.add_extra_token_to_sequence << "\n"
       << "drop_last_partial_sequence: " << (split_ != Split::kValid || config_.drop_last_partial_validation_sequence)
       << "\n";
  description_ = desc.str();

  std::string cache_dir = config_.path_to_cache;
  auto* indexed = dynamic_cast<const IndexedLowLevelDataset*>(dataset_.get());
  if (cache_dir.empty() && indexed != nullptr) {
    cache_dir = indexed->dataset().path_prefix() + "/cache/GPTDataset_indices";
  }
  if (!cache_dir.empty()) {
    cache_prefix_ = cache_dir + "/" + hex(fnv1a(description_)) + "-GPTDataset-" + split_name(split_) + "-";
  }
  plan_epochs();
  if (!cache_prefix_.empty() && load_cache()) {
    loaded_from_cache_ = true;
    return;
  }
  TORCH_CHECK(config_.build_cache || cache_prefix_.empty(), "[gpt_dataset] ", cache_prefix_,
              "*.npy: index cache missing and this rank does not build it (build_cache=false); "
              "build it on rank 0 first");
  // A uint16 file outgrows a vocabulary under 65,536 only by a tokenizer mix-up; its documents are
  // checked once, as the index cache is built, before any step (samples are also checked as read).
  if (indexed && config_.vocab_size > 0 && config_.vocab_size < 65536 && indexed->dataset().dtype() == DType::kUInt16) {
    const int32_t* sizes = dataset_->sequence_lengths();
    std::vector<int64_t> tokens;
    for (int64_t doc = range_.first; doc < range_.second; ++doc) {
      tokens.resize(static_cast<size_t>(sizes[doc]));
      dataset_->read(doc, 0, sizes[doc], tokens.data());
      check_token_ids(tokens.data(), sizes[doc], doc, 0);
    }
  }
  build_indices();
  if (!cache_prefix_.empty()) save_cache();
}

void GPTDataset::plan_epochs() {
  const int64_t seq_length = config_.sequence_length;
  const int64_t extra = config_.add_extra_token_to_sequence ? 1 : 0;
  const int32_t* sizes = dataset_->sequence_lengths();
  const int64_t num_docs = range_.second - range_.first;

  tokens_per_epoch_ = 0;
  for (int64_t i = range_.first; i < range_.second; ++i) tokens_per_epoch_ += sizes[i];
  TORCH_CHECK(tokens_per_epoch_ > extra, "[gpt_dataset] ", split_name(split_), " split of ", dataset_->description(),
              ": expected more than ", extra, " tokens per epoch, found ", tokens_per_epoch_);

  num_epochs_ = 1;
  if (num_samples_) {
    const int64_t requested = *num_samples_ * seq_length + extra;
    int64_t tokens = tokens_per_epoch_;
    while (tokens < requested) {
      ++num_epochs_;
      tokens += tokens_per_epoch_;
    }
  }
  TORCH_CHECK(num_epochs_ <= std::numeric_limits<int32_t>::max() &&
                  num_epochs_ * num_docs <= std::numeric_limits<int32_t>::max(),
              "[gpt_dataset] ", num_epochs_, " epochs of ", num_docs,
              " documents overflow the int32 document index; use more data or fewer samples");

  num_samples_sans_final_epoch_ = 0;
  separate_final_epoch_ = false;
  if (num_epochs_ > 1) {
    num_samples_sans_final_epoch_ = samples_in((num_epochs_ - 1) * tokens_per_epoch_, seq_length, extra);
    const int64_t from_final = *num_samples_ - num_samples_sans_final_epoch_;
    const int64_t per_epoch = samples_in(tokens_per_epoch_, seq_length, extra);
    TORCH_INTERNAL_ASSERT(from_final >= 0 && from_final <= per_epoch + 1);
    // Megatron-LM shuffles a final epoch needed for less than 80 % on its own.
    separate_final_epoch_ = from_final < static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
  }
}

void GPTDataset::build_indices() {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t seq_length = config_.sequence_length;
  const int64_t extra = config_.add_extra_token_to_sequence ? 1 : 0;
  const int32_t* sizes = dataset_->sequence_lengths();
  const int64_t num_docs = range_.second - range_.first;
  const int64_t tokens_per_epoch = tokens_per_epoch_;
  const int64_t num_samples_sans_final_epoch = num_samples_sans_final_epoch_;

  NumpyRandomState rng(config_.random_seed);
  // Document index: epochs of [range) in order, shuffled as one block, or as two blocks (all but
  // the last epoch, then the last) when the final epoch is separate.
  std::vector<int32_t> document_index(static_cast<size_t>(num_epochs_ * num_docs));
  for (int64_t e = 0; e < num_epochs_; ++e) {
    for (int64_t i = 0; i < num_docs; ++i) {
      document_index[e * num_docs + i] = static_cast<int32_t>(range_.first + i);
    }
  }
  if (!separate_final_epoch_) {
    rng.shuffle(document_index.data(), static_cast<int64_t>(document_index.size()));
  } else {
    rng.shuffle(document_index.data(), (num_epochs_ - 1) * num_docs);
    rng.shuffle(document_index.data() + (num_epochs_ - 1) * num_docs, num_docs);
  }

  const bool drop_last = split_ != Split::kValid || config_.drop_last_partial_validation_sequence;
  std::vector<int64_t> sample_index = build_sample_idx(
      sizes, document_index.data(), static_cast<int64_t>(document_index.size()), static_cast<int32_t>(seq_length),
      static_cast<int32_t>(num_epochs_), tokens_per_epoch, drop_last, static_cast<int>(extra));
  const int64_t total = static_cast<int64_t>(sample_index.size()) / 2 - 1;
  const int64_t first = separate_final_epoch_ ? num_samples_sans_final_epoch : total;
  std::vector<int64_t> shuffle_index(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) shuffle_index[i] = i;
  rng.shuffle(shuffle_index.data(), first);
  if (first < total) rng.shuffle(shuffle_index.data() + first, total - first);

  document_index_ = IndexArray<int32_t>(std::move(document_index));
  sample_index_ = IndexArray<int64_t>(std::move(sample_index));
  shuffle_index_ = IndexArray<int64_t>(std::move(shuffle_index));

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ostringstream msg;
  msg << "[gpt_dataset] built " << split_name(split_) << " indices: " << total << " samples, " << num_epochs_
      << " epoch(s)" << (separate_final_epoch_ ? " (final epoch separate)" : "") << " in " << secs << " s";
  log_rank_0(LogLevel::kInfo, msg.str());
}

bool GPTDataset::load_cache() {
  const std::string desc_path = cache_prefix_ + "description.txt";
  const std::string doc_path = cache_prefix_ + "document_index.npy";
  const std::string sample_path = cache_prefix_ + "sample_index.npy";
  const std::string shuffle_path = cache_prefix_ + "shuffle_index.npy";
  if (!is_file(desc_path) || !is_file(doc_path) || !is_file(sample_path) || !is_file(shuffle_path)) {
    return false;
  }
  TORCH_CHECK(read_text_file(desc_path) == description_, "[gpt_dataset] ", desc_path,
              ": the cached description differs from this dataset's (hash collision or an "
              "edited cache); delete the cache folder");
  auto doc = map_npy(doc_path);
  auto sample = map_npy(sample_path);
  auto shuffle = map_npy(shuffle_path);
  TORCH_CHECK(doc.descr == "<i4" && doc.shape.size() == 1, "[gpt_dataset] ", doc_path,
              ": expected a 1-D int32 array, found descr '", doc.descr, "'");
  TORCH_CHECK(sample.descr == "<i8" && sample.shape.size() == 2 && sample.shape[1] == 2, "[gpt_dataset] ", sample_path,
              ": expected an int64 array of shape [S + 1, 2]");
  TORCH_CHECK(shuffle.descr == "<i8" && shuffle.shape.size() == 1, "[gpt_dataset] ", shuffle_path,
              ": expected a 1-D int64 array, found descr '", shuffle.descr, "'");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(doc.data) % alignof(int32_t) == 0 &&
                  reinterpret_cast<uintptr_t>(sample.data) % alignof(int64_t) == 0 &&
                  reinterpret_cast<uintptr_t>(shuffle.data) % alignof(int64_t) == 0,
              "[gpt_dataset] ", cache_prefix_, "*.npy: array data not aligned to its type");
  const int64_t total = sample.shape[0] - 1;
  TORCH_CHECK(shuffle.numel() == total, "[gpt_dataset] ", shuffle_path, ": expected ", total, " entries, found ",
              shuffle.numel());
  TORCH_CHECK(doc.numel() == num_epochs_ * (range_.second - range_.first), "[gpt_dataset] ", doc_path, ": expected ",
              num_epochs_, " epochs of ", range_.second - range_.first, " documents, found ", doc.numel(),
              " entries (corrupted cache)");
  document_index_ =
      IndexArray<int32_t>(doc.file, reinterpret_cast<const int32_t*>(doc.data), static_cast<size_t>(doc.numel()));
  sample_index_ = IndexArray<int64_t>(sample.file, reinterpret_cast<const int64_t*>(sample.data),
                                      static_cast<size_t>(sample.numel()));
  shuffle_index_ =
      IndexArray<int64_t>(shuffle.file, reinterpret_cast<const int64_t*>(shuffle.data), static_cast<size_t>(total));
  // One pass over the indices so that a damaged cache fails here, not mid-training.
  const int64_t num_doc_entries = static_cast<int64_t>(document_index_.size());
  for (int64_t i = 0; i <= total; ++i) {
    TORCH_CHECK(sample_index_[2 * i] >= 0 && sample_index_[2 * i] < num_doc_entries, "[gpt_dataset] ", sample_path,
                ": sample ", i, " points outside the document index (corrupted cache)");
  }
  for (int64_t v : shuffle_index_) {
    TORCH_CHECK(v >= 0 && v < total, "[gpt_dataset] ", shuffle_path, ": entry ", v, " outside [0, ", total,
                ") (corrupted cache)");
  }
  for (int32_t d : document_index_) {
    TORCH_CHECK(d >= range_.first && d < range_.second, "[gpt_dataset] ", doc_path, ": document ", d,
                " outside the split [", range_.first, ", ", range_.second, ") (corrupted cache)");
  }
  log_rank_0(LogLevel::kInfo,
             "[gpt_dataset] loaded " + std::string(split_name(split_)) + " indices from " + cache_prefix_ + "*.npy");
  return true;
}

void GPTDataset::save_cache() const {
  make_dirs(cache_prefix_.substr(0, cache_prefix_.rfind('/')));
  write_npy(cache_prefix_ + "document_index.npy", "<i4", {static_cast<int64_t>(document_index_.size())},
            document_index_.data(), document_index_.size() * sizeof(int32_t));
  write_npy(cache_prefix_ + "sample_index.npy", "<i8", {static_cast<int64_t>(sample_index_.size() / 2), 2},
            sample_index_.data(), sample_index_.size() * sizeof(int64_t));
  write_npy(cache_prefix_ + "shuffle_index.npy", "<i8", {static_cast<int64_t>(shuffle_index_.size())},
            shuffle_index_.data(), shuffle_index_.size() * sizeof(int64_t));
  // The description last: its presence marks a complete cache.
  const std::string path = cache_prefix_ + "description.txt";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << description_;
    TORCH_CHECK(out, "[gpt_dataset] ", tmp, ": write failed");
  }
  TORCH_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[gpt_dataset] ", path, ": rename failed");
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> GPTDataset::get(int64_t idx) const {
  TORCH_CHECK(idx >= 0 && idx < size(), "[gpt_dataset] sample ", idx, " out of range [0, ", size(), ")");
  const int64_t extra = config_.add_extra_token_to_sequence ? 1 : 0;
  const int64_t s = shuffle_index_[idx];
  const int64_t doc_beg = sample_index_[2 * s], off_beg = sample_index_[2 * s + 1];
  const int64_t doc_end = sample_index_[2 * s + 2], off_end = sample_index_[2 * s + 3];
  const int32_t* sizes = dataset_->sequence_lengths();
  std::vector<int64_t> text;
  std::vector<int64_t> docs;
  text.reserve(static_cast<size_t>(sample_length()));
  for (int64_t i = doc_beg; i <= doc_end; ++i) {
    const int64_t doc = document_index_[i];
    const int64_t offset = i == doc_beg ? off_beg : 0;
    const int64_t length = i < doc_end ? sizes[doc] - offset : off_end + extra - offset;
    const size_t at = text.size();
    text.resize(at + static_cast<size_t>(length));
    dataset_->read(doc, offset, length, text.data() + at);
    if (config_.vocab_size > 0) check_token_ids(text.data() + at, length, doc, offset);
    docs.push_back(doc);
  }
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(text.size()) <= sample_length());
  text.resize(static_cast<size_t>(sample_length()), config_.pad_token);
  return {std::move(text), std::move(docs)};
}

void GPTDataset::check_token_ids(const int64_t* tokens, int64_t length, int64_t doc, int64_t offset) const {
  for (int64_t k = 0; k < length; ++k) {
    TORCH_CHECK(tokens[k] >= 0 && tokens[k] < config_.vocab_size, "[gpt_dataset] ", dataset_->name(), ": document ",
                doc, " holds token id ", tokens[k], " at position ", offset + k, ", outside the vocabulary [0, ",
                config_.vocab_size, "); was the data tokenized for another vocabulary?");
  }
}

void GPTDataset::read_sample(int64_t idx, int64_t* text) const {
  auto sample = get(idx).first;
  std::copy(sample.begin(), sample.end(), text);
}

}  // namespace megatron::datasets
