// Inspect datasets and their index building from the command line (also what the Python tests
// compare against numpy, torch and HF tokenizers):
//   dataset_tool info PREFIX
//   dataset_tool shuffle --seed S --sizes 10,1000       successive
//   RandomState(S).shuffle(arange(n)) dataset_tool gpt-indices --data-path P --seq-length L --seed
//   S --split 969,30,1
//                --num-samples 100,10,10 --out DIR      .npy indices and samples per split
//                (several --data-path words: a blend, samples only)
//   dataset_tool tokenize --vocab-file V --merge-file M --input F   (F: one JSON string per line)
//   dataset_tool tokenize --tokenizer-type HuggingFaceTokenizer --tokenizer-model T --input F
//   dataset_tool sampler --type single|cyclic --total N --consumed C --micro-batch-size B
//                --dp-rank R --dp-size D --batches K [--data-sharding]
#include "cli.h"
#include "json_lines.h"
#include "megatron/datasets/blended_dataset.h"
#include "megatron/datasets/gpt_dataset.h"
#include "megatron/datasets/indexed_dataset.h"
#include "megatron/datasets/npy.h"
#include "megatron/datasets/numpy_random.h"
#include "megatron/datasets/samplers.h"
#include "megatron/tokenizer/tokenizer.h"

#include <c10/util/Exception.h>

#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>

namespace {

namespace ds = megatron::datasets;

std::vector<std::optional<int64_t>> parse_counts(const std::string& text) {
  std::vector<std::optional<int64_t>> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "none" || item == "None")
      out.emplace_back();
    else
      out.emplace_back(std::stoll(item));
  }
  return out;
}

void print_list(const std::vector<int64_t>& v) {
  for (size_t i = 0; i < v.size(); ++i) std::cout << (i ? " " : "") << v[i];
  std::cout << "\n";
}

int info(const std::string& prefix) {
  ds::IndexedDataset d(prefix);
  std::cout << "dtype " << ds::dtype_name(d.dtype()) << "\nsequences " << d.num_sequences() << "\ndocuments "
            << d.num_documents() << "\ntokens " << d.num_tokens() << "\n";
  return 0;
}

int shuffle(uint32_t seed, const std::string& sizes) {
  ds::NumpyRandomState rng(seed);
  for (auto n : parse_counts(sizes)) {
    std::vector<int64_t> v(static_cast<size_t>(*n));
    std::iota(v.begin(), v.end(), 0);
    rng.shuffle(v.data(), *n);
    print_list(v);
  }
  return 0;
}

// A blend (several prefixes, optionally weighted): only the samples, through build_gpt_datasets.
int blend_samples(const std::vector<std::string>& words, ds::GPTDatasetConfig config, const std::string& counts,
                  const std::string& out, int64_t max_samples, int64_t mock_vocab = 0) {
  auto c = parse_counts(counts);
  c.resize(3);
  auto sets = mock_vocab > 0 ? ds::build_mock_gpt_datasets(mock_vocab, mock_vocab - 1, {c[0], c[1], c[2]}, config)
                             : ds::build_gpt_datasets(ds::parse_data_path(words), {c[0], c[1], c[2]}, config);
  for (int s = 0; s < 3; ++s) {
    if (!sets[s]) continue;
    const auto& d = *sets[s];
    const int64_t n = std::min(max_samples, d.size());
    std::vector<int64_t> samples(static_cast<size_t>(n * d.sample_length()));
    for (int64_t i = 0; i < n; ++i) d.read_sample(i, samples.data() + i * d.sample_length());
    const std::string name = out + "/" + ds::split_name(static_cast<ds::Split>(s));
    ds::write_npy(name + "_samples.npy", samples, {n, d.sample_length()});
    std::cout << ds::split_name(static_cast<ds::Split>(s)) << " samples " << d.size() << "\n";
  }
  return 0;
}

// np.random.default_rng(seed).integers(low, high, size=n, dtype=np.int32)
int integers(uint64_t seed, int64_t low, int64_t high, int64_t n) {
  ds::NumpyPCG64Generator gen(seed);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = gen.integers32(low, high);
  print_list(v);
  return 0;
}

int gpt_indices(const std::vector<std::string>& data_path, int64_t seq_length, uint32_t seed, const std::string& split,
                const std::string& counts, const std::string& out, int64_t max_samples, bool keep_partial_valid,
                int64_t mock_vocab) {
  ds::GPTDatasetConfig config;
  config.sequence_length = seq_length;
  config.random_seed = seed;
  config.split = split;
  config.path_to_cache = out + "/cache";
  config.drop_last_partial_validation_sequence = !keep_partial_valid;
  if (mock_vocab > 0) {
    config.path_to_cache.clear();
    return blend_samples({}, config, counts, out, max_samples, mock_vocab);
  }
  if (data_path.size() > 1) return blend_samples(data_path, config, counts, out, max_samples);
  const std::string& prefix = data_path.at(0);
  auto c = parse_counts(counts);
  c.resize(3);
  auto low = std::make_shared<ds::IndexedLowLevelDataset>(std::make_shared<ds::IndexedDataset>(prefix));
  const auto ranges = ds::split_ranges(ds::parse_and_normalize_split(split), low->num_sequences());
  for (int s = 0; s < 3; ++s) {
    if (!ranges[s]) continue;
    ds::GPTDataset d(low, *ranges[s], c[s], static_cast<ds::Split>(s), config);
    const std::string name = out + "/" + ds::split_name(static_cast<ds::Split>(s));
    ds::write_npy(name + "_document_index.npy", d.document_index().to_vector());
    ds::write_npy(name + "_sample_index.npy", d.sample_index().to_vector(),
                  {static_cast<int64_t>(d.sample_index().size() / 2), 2});
    ds::write_npy(name + "_shuffle_index.npy", d.shuffle_index().to_vector());
    const int64_t n = std::min(max_samples, d.size());
    std::vector<int64_t> samples(static_cast<size_t>(n * d.sample_length()));
    for (int64_t i = 0; i < n; ++i) d.read_sample(i, samples.data() + i * d.sample_length());
    ds::write_npy(name + "_samples.npy", samples, {n, d.sample_length()});
    std::cout << ds::split_name(static_cast<ds::Split>(s)) << " range " << ranges[s]->first << " " << ranges[s]->second
              << " samples " << d.size() << " epochs " << d.num_epochs() << " separate_final_epoch "
              << d.separate_final_epoch() << "\n";
  }
  return 0;
}

int tokenize(const megatron::tokenizer::TokenizerOptions& options, const std::string& input) {
  const auto built = megatron::tokenizer::build_tokenizer(options);
  const megatron::tokenizer::Tokenizer& tok = *built;
  std::ifstream in(input, std::ios::binary);
  TORCH_CHECK(in, "[dataset_tool] ", input, ": cannot open");
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      TORCH_CHECK(false, "[dataset_tool] ", input, ": malformed JSON: ", json_error_text(e));
    }
    TORCH_CHECK(value.is_string(), "[dataset_tool] ", input, ": expected one JSON string per line");
    const std::string& text = value.get_ref<const std::string&>();
    const auto ids = tok.tokenize(text);
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    // Mark lines whose decoding does not give the text back.
    std::cout << (tok.detokenize(ids) == text ? "" : " !roundtrip") << "\n";
  }
  return 0;
}

int sampler(const std::string& type, int64_t total, int64_t consumed, int64_t mbs, int64_t rank, int64_t size,
            int64_t batches, bool sharding) {
  std::unique_ptr<ds::BatchSampler> s;
  if (type == "single") {
    s = std::make_unique<ds::MegatronPretrainingSampler>(total, consumed, mbs, rank, size);
  } else {
    TORCH_CHECK(type == "cyclic", "[dataset_tool] --type: single or cyclic, found ", type);
    s = std::make_unique<ds::MegatronPretrainingRandomSampler>(total, consumed, mbs, rank, size, sharding);
  }
  for (int64_t b = 0; b < batches; ++b) {
    auto batch = s->next();
    if (!batch) break;
    print_list(*batch);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Inspect Megatron datasets and index building"};
  app.require_subcommand(1);
  std::vector<std::string> data_path;
  std::string prefix, sizes, split = "969,30,1", counts = "none,none,none", out, input, type = "single";
  int64_t seq_length = 0, max_samples = 1000, total = 0, consumed = 0, mbs = 1, rank = 0, dp = 1, batches = 10;
  uint32_t seed = 1234;
  bool sharding = false, keep_partial = false;
  auto* info_cmd = app.add_subcommand("info", "counts and dtype of a dataset");
  info_cmd->add_option("prefix", prefix)->required();
  auto* shuffle_cmd = app.add_subcommand("shuffle", "numpy RandomState shuffles of aranges");
  shuffle_cmd->add_option("--seed", seed);
  shuffle_cmd->add_option("--sizes", sizes)->required();
  int64_t low = 0, high = 2;
  uint64_t pcg_seed = 0;
  auto* ints = app.add_subcommand("integers", "numpy default_rng(seed).integers, int32");
  ints->add_option("--seed", pcg_seed);
  ints->add_option("--low", low);
  ints->add_option("--high", high);
  ints->add_option("--n", batches);
  auto* gpt = app.add_subcommand("gpt-indices", "build GPTDataset indices and dump them");
  int64_t mock_vocab = 0;
  gpt->add_option("--data-path", data_path, "a prefix, or a blend: [weight] prefix ...");
  gpt->add_option("--mock-vocab-size", mock_vocab, "mock data of this vocabulary (EOD = V - 1)");
  gpt->add_option("--seq-length", seq_length)->required();
  gpt->add_option("--seed", seed);
  gpt->add_option("--split", split);
  gpt->add_option("--num-samples", counts, "train,valid,test (none: one epoch)");
  gpt->add_option("--out", out)->required();
  gpt->add_option("--max-samples", max_samples);
  gpt->add_flag("--keep-partial-valid", keep_partial);
  auto* tok = app.add_subcommand("tokenize", "token ids per JSON string line");
  megatron::tokenizer::TokenizerOptions tok_options;
  tok_options.tokenizer_type = "GPT2BPETokenizer";
  tok->add_option("--tokenizer-type", tok_options.tokenizer_type);
  tok->add_option("--vocab-file", tok_options.vocab_file);
  tok->add_option("--merge-file", tok_options.merge_file);
  tok->add_option("--tokenizer-model", tok_options.tokenizer_model);
  tok->add_option("--tiktoken-pattern", tok_options.tiktoken_pattern);
  tok->add_option("--tiktoken-num-special-tokens", tok_options.tiktoken_num_special_tokens);
  tok->add_option("--tokenizer-special-tokens", tok_options.special_tokens);
  tok->add_option("--vocab-size", tok_options.vocab_size);
  tok->add_option("--input", input)->required();
  auto* smp = app.add_subcommand("sampler", "micro-batches of a pretraining sampler");
  smp->add_option("--type", type);
  smp->add_option("--total", total)->required();
  smp->add_option("--consumed", consumed);
  smp->add_option("--micro-batch-size", mbs);
  smp->add_option("--dp-rank", rank);
  smp->add_option("--dp-size", dp);
  smp->add_option("--batches", batches);
  smp->add_flag("--data-sharding", sharding);
  return run_tool(app, "dataset_tool", argc, argv, [&] {
    if (*info_cmd) return info(prefix);
    if (*shuffle_cmd) return shuffle(seed, sizes);
    if (*ints) return integers(pcg_seed, low, high, batches);
    if (*gpt)
      return gpt_indices(data_path, seq_length, seed, split, counts, out, max_samples, keep_partial, mock_vocab);
    if (*tok) return tokenize(tok_options, input);
    if (*smp) return sampler(type, total, consumed, mbs, rank, dp, batches, sharding);
    return 1;
  });
}
