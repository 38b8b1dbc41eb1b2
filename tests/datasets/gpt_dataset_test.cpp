#include "megatron/datasets/gpt_dataset.h"

#include "datasets/test_util.h"
#include "megatron/datasets/data_iterator.h"
#include "megatron/datasets/numpy_random.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace megatron::datasets {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::make_temp_dir;

// Documents of varied lengths whose tokens encode (document, position), ending in EOD = 0.
std::string write_corpus(const std::string& dir, int num_docs = 50, DType dtype = DType::kInt32) {
  const std::string prefix = dir + "/corpus";
  IndexedDatasetBuilder builder(bin_path(prefix), dtype);
  std::mt19937 gen(7);
  for (int d = 0; d < num_docs; ++d) {
    const int len = 1 + static_cast<int>(gen() % 40);
    std::vector<int32_t> tokens;
    for (int i = 0; i + 1 < len; ++i) tokens.push_back(1000 * (d + 1) + i);
    tokens.push_back(0);
    builder.add_item(tokens);
    builder.end_document();
  }
  builder.finalize(idx_path(prefix));
  return prefix;
}

std::shared_ptr<IndexedLowLevelDataset> open(const std::string& prefix) {
  return std::make_shared<IndexedLowLevelDataset>(std::make_shared<IndexedDataset>(prefix));
}

TEST(NumpyRandomState, MatchesTheMT19937Reference) {
  // The C++ standard's check value: the 10000th draw of mt19937 seeded with 5489.
  NumpyRandomState rng(5489);
  uint32_t v = 0;
  for (int i = 0; i < 10000; ++i) v = rng.next_uint32();
  EXPECT_EQ(v, 4123659995u);
}

TEST(NumpyRandomState, ShuffleIsAPermutation) {
  NumpyRandomState rng(3);
  std::vector<int64_t> x(1000);
  std::iota(x.begin(), x.end(), 0);
  rng.shuffle(x.data(), 1000);
  auto sorted = x;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(x, sorted);
}

TEST(Split, ParseAndNormalize) {
  auto s = parse_and_normalize_split("969,30,1");
  EXPECT_DOUBLE_EQ(s[0], 0.969);
  EXPECT_DOUBLE_EQ(s[2], 0.001);
  auto t = parse_and_normalize_split("98");
  EXPECT_EQ(t[0], 1.0);
  EXPECT_EQ(t[1], 0.0);
  EXPECT_THAT(error_of([] { parse_and_normalize_split("1.2.3,4"); }), HasSubstr("1.2.3"));
  EXPECT_THAT(error_of([] { parse_and_normalize_split("0,0,0"); }), HasSubstr("must not all be 0"));
  EXPECT_THAT(error_of([] { parse_and_normalize_split("-1,2,0"); }), HasSubstr("found '-1'"));
  EXPECT_THAT(error_of([] { parse_and_normalize_split("inf,1"); }), HasSubstr("found 'inf'"));
  EXPECT_THAT(error_of([] { parse_and_normalize_split("1,2,3,4"); }), HasSubstr("found 4"));
  EXPECT_DOUBLE_EQ(parse_and_normalize_split(" 3 / 1")[0], 0.75);
}

TEST(Split, RangesRoundHalfToEven) {
  // 0.5 * 5 = 2.5 rounds to 2 in Python.
  auto r = split_ranges(parse_and_normalize_split("1,1"), 5);
  ASSERT_TRUE(r[0] && r[1]);
  EXPECT_EQ(r[0]->second, 2);
  EXPECT_EQ(r[1]->first, 2);
  EXPECT_FALSE(r[2].has_value());
}

TEST(GPTDataset, SamplesAreConsecutiveWindowsOfTheDocumentStream) {
  const std::string dir = make_temp_dir();
  auto low = open(write_corpus(dir));
  GPTDatasetConfig config;
  config.sequence_length = 16;
  config.path_to_cache = dir + "/cache";
  GPTDataset ds(low, {0, 50}, 40, Split::kTrain, config);
  ASSERT_GE(ds.size(), 40);
  // Flatten the documents in document_index order; sample k (unshuffled) is the window
  // [16 k, 16 k + 17) of that stream.
  std::vector<int64_t> stream;
  for (int32_t doc : ds.document_index()) {
    auto t = low->dataset().get(doc).to_vector();
    stream.insert(stream.end(), t.begin(), t.end());
  }
  for (int64_t i = 0; i < ds.size(); ++i) {
    const int64_t k = ds.shuffle_index()[i];
    auto [text, docs] = ds.get(i);
    ASSERT_EQ(text.size(), 17u);
    EXPECT_TRUE(std::equal(text.begin(), text.end(), stream.begin() + 16 * k)) << "sample " << i;
  }
}

TEST(GPTDataset, EpochsAndSeparateFinalEpoch) {
  const std::string dir = make_temp_dir();
  auto low = open(write_corpus(dir));
  GPTDatasetConfig config;
  config.sequence_length = 16;
  config.path_to_cache = dir + "/cache";
  const int64_t tokens = low->dataset().num_tokens();
  const int64_t per_epoch = (tokens - 1) / 16;
  // A little more than one epoch: the second epoch is shuffled on its own.
  GPTDataset a(low, {0, 50}, per_epoch + 2, Split::kTrain, config);
  EXPECT_EQ(a.num_epochs(), 2);
  EXPECT_TRUE(a.separate_final_epoch());
  // The first epoch's documents are shuffled on their own, and its per_epoch samples only among
  // themselves: the final epoch's samples all come after them.
  auto first_docs = a.document_index().to_vector();
  ASSERT_EQ(first_docs.size(), 100u);
  first_docs.resize(50);
  std::sort(first_docs.begin(), first_docs.end());
  std::vector<int32_t> every_doc(50);
  std::iota(every_doc.begin(), every_doc.end(), 0);
  EXPECT_EQ(first_docs, every_doc);
  const auto shuffle = a.shuffle_index().to_vector();
  ASSERT_GT(static_cast<int64_t>(shuffle.size()), per_epoch);
  for (size_t i = 0; i < shuffle.size(); ++i)
    EXPECT_EQ(shuffle[i] < per_epoch, static_cast<int64_t>(i) < per_epoch) << "shuffle_index[" << i << "]";
  // Nearly two epochs: one shuffle over both, so second-epoch samples come early too.
  GPTDataset b(low, {0, 50}, 2 * per_epoch - 1, Split::kTrain, config);
  EXPECT_EQ(b.num_epochs(), 2);
  EXPECT_FALSE(b.separate_final_epoch());
  const auto mixed = b.shuffle_index().to_vector();
  EXPECT_TRUE(std::any_of(mixed.begin(), mixed.begin() + per_epoch, [&](int64_t x) { return x >= per_epoch; }));
}

TEST(GPTDataset, CacheIsWrittenOnceAndReused) {
  const std::string dir = make_temp_dir();
  auto low = open(write_corpus(dir));
  GPTDatasetConfig config;
  config.sequence_length = 8;
  config.path_to_cache = dir + "/cache";
  GPTDataset built(low, {0, 50}, 100, Split::kTrain, config);
  EXPECT_FALSE(built.loaded_from_cache());
  config.build_cache = false;
  GPTDataset loaded(low, {0, 50}, 100, Split::kTrain, config);
  EXPECT_TRUE(loaded.loaded_from_cache());
  EXPECT_TRUE(loaded.shuffle_index().mapped());
  EXPECT_EQ(built.shuffle_index().to_vector(), loaded.shuffle_index().to_vector());
  EXPECT_EQ(built.sample_index().to_vector(), loaded.sample_index().to_vector());
  EXPECT_EQ(built.document_index().to_vector(), loaded.document_index().to_vector());
  EXPECT_EQ(built.num_epochs(), loaded.num_epochs());
  EXPECT_EQ(built.separate_final_epoch(), loaded.separate_final_epoch());
  // A damaged cache file is refused, not trusted.
  auto bytes = testing::read_bytes(built.cache_prefix() + "shuffle_index.npy");
  bytes.resize(bytes.size() - 8);
  testing::write_bytes(built.cache_prefix() + "shuffle_index.npy", bytes);
  EXPECT_THAT(error_of([&] { GPTDataset x(low, {0, 50}, 100, Split::kTrain, config); }), HasSubstr("truncated"));
  // Another seed is another cache entry, which this rank may not build.
  config.random_seed = 99;
  EXPECT_THAT(error_of([&] {
                GPTDataset x(low, {0, 50}, 100, Split::kTrain, config);
              }),
              HasSubstr("index cache missing"));
}

TEST(GPTDataset, EmptySplitIsAnError) {
  const std::string dir = make_temp_dir();
  auto low = open(write_corpus(dir, 3));
  GPTDatasetConfig config;
  config.sequence_length = 8;
  config.path_to_cache = dir + "/cache";
  EXPECT_THAT(error_of([&] {
                GPTDataset x(low, {2, 2}, 10, Split::kTest, config);
              }),
              HasSubstr("non-empty sequence range"));
}

TEST(GPTDataset, TokenIdOutsideTheVocabularyNamesFileDocumentAndId) {
  const std::string dir = make_temp_dir();
  auto low = open(write_corpus(dir));  // document d holds 1000 (d + 1) + i
  GPTDatasetConfig config;
  config.sequence_length = 16;
  config.path_to_cache = dir + "/cache";
  config.vocab_size = 60000;
  GPTDataset fits(low, {0, 50}, 40, Split::kTrain, config);
  for (int64_t i = 0; i < fits.size(); ++i) fits.get(i);
  config.vocab_size = 5000;  // documents 4 and up hold ids >= 5000
  GPTDataset small(low, {0, 50}, 40, Split::kTrain, config);
  std::string error;
  for (int64_t i = 0; i < small.size() && error.empty(); ++i) error = error_of([&] { small.get(i); });
  EXPECT_THAT(error, HasSubstr("[gpt_dataset] " + dir + "/corpus.bin: document "));
  EXPECT_THAT(error, ::testing::MatchesRegex(".*document ([4-9]|[1-4][0-9]) holds token id [0-9]+ at position [0-9]+, "
                                             "outside the vocabulary \\[0, 5000\\).*"));
}

TEST(GPTDataset, AUInt16FileBeyondTheVocabularyIsRefusedBeforeAnySample) {
  const std::string dir = make_temp_dir();
  auto low = open(write_corpus(dir, 50, DType::kUInt16));
  GPTDatasetConfig config;
  config.sequence_length = 16;
  config.path_to_cache = dir + "/cache";
  config.vocab_size = 5000;  // documents 4 and up hold ids >= 5000
  EXPECT_THAT(error_of([&] {
                GPTDataset ds(low, {0, 50}, 40, Split::kTrain, config);
              }),
              ::testing::MatchesRegex(".*corpus.bin: document ([4-9]|[1-4][0-9]) holds token id [0-9]+ at position 0, "
                                      "outside the vocabulary \\[0, 5000\\).*"));
  config.vocab_size = 50257;  // GPT-2's: every id fits
  GPTDataset fits(low, {0, 50}, 40, Split::kTrain, config);
  EXPECT_GE(fits.size(), 40);
}

TEST(GPTDataset, ValidationKeepsThePaddedLastSample) {
  const std::string dir = make_temp_dir();
  auto low = open(write_corpus(dir));
  GPTDatasetConfig config;
  config.sequence_length = 16;
  config.path_to_cache = dir + "/cache";
  config.drop_last_partial_validation_sequence = false;
  GPTDataset ds(low, {0, 50}, std::nullopt, Split::kValid, config);
  const int64_t tokens = low->dataset().num_tokens();
  ASSERT_NE((tokens - 1) % 16, 0);
  EXPECT_EQ(ds.size(), (tokens - 1 + 15) / 16);
  // The sample holding the tail ends in padding (-1).
  bool saw_pad = false;
  for (int64_t i = 0; i < ds.size(); ++i) saw_pad |= ds.get(i).first.back() == -1;
  EXPECT_TRUE(saw_pad);
}

TEST(BuildBatch, MasksAndPositionIdsFollowMegatron) {
  // One hand-made sample: tokens 5 0 6 7 0 8 | label token 9, EOD = 0.
  struct Fixed : MegatronDataset {
    int64_t size() const override { return 1; }
    int64_t sample_length() const override { return 7; }
    void read_sample(int64_t, int64_t* t) const override {
      const int64_t v[7] = {5, 0, 6, 7, 0, 8, 9};
      std::copy(v, v + 7, t);
    }
    std::string description() const override { return "fixed"; }
  } ds;
  BatchOptions o;
  o.eod_token = 0;
  o.reset_position_ids = true;
  o.reset_attention_mask = true;
  o.eod_mask_loss = true;
  auto b = build_batch(ds, {0}, o);
  EXPECT_TRUE(at::equal(b.at("tokens"), at::tensor({5, 0, 6, 7, 0, 8}, at::kLong).view({1, 6})));
  EXPECT_TRUE(at::equal(b.at("labels"), at::tensor({0, 6, 7, 0, 8, 9}, at::kLong).view({1, 6})));
  EXPECT_TRUE(at::equal(b.at("position_ids"), at::tensor({0, 1, 0, 1, 2, 0}, at::kLong).view({1, 6})));
  EXPECT_TRUE(at::equal(b.at("loss_mask"), at::tensor({1, 0, 1, 1, 0, 1}, at::kFloat).view({1, 6})));
  // Reference: Megatron's construction with torch ops.
  auto mask = at::tril(at::ones({6, 6}));
  for (int64_t i : {1, 4}) mask.slice(0, i + 1).slice(1, 0, i + 1).zero_();
  EXPECT_TRUE(at::equal(b.at("attention_mask"), (mask < 0.5).view({1, 1, 6, 6})));
  // Without resets: plain causal masks and positions, for every row of the batch.
  BatchOptions plain;
  auto c = build_batch(ds, {0, 0}, plain);
  EXPECT_TRUE(at::equal(c.at("attention_mask").contiguous(),
                        (at::tril(at::ones({6, 6})) < 0.5).view({1, 1, 6, 6}).expand({2, 1, 6, 6})));
  EXPECT_TRUE(at::equal(c.at("position_ids")[1], at::arange(6, at::kLong)));
  EXPECT_TRUE(at::equal(c.at("loss_mask"), at::ones({2, 6})));
  plain.sequence_length = 8;
  EXPECT_THAT(error_of([&] { build_batch(ds, {0}, plain); }),
              HasSubstr("sequences of 6 tokens, expected --seq-length 8"));
}

}  // namespace
}  // namespace megatron::datasets

namespace megatron::datasets {
namespace {

TEST(DataIterator, PrefetchGivesTheSameBatchesAndCountsConsumedSamples) {
  const std::string dir = testing::make_temp_dir();
  auto low = open(write_corpus(dir));
  GPTDatasetConfig config;
  config.sequence_length = 8;
  config.path_to_cache = dir + "/cache";
  auto ds = std::make_shared<GPTDataset>(low, std::make_pair<int64_t, int64_t>(0, 50), 64, Split::kTrain, config);
  BatchOptions options;
  options.eod_token = 0;
  options.create_attention_mask = false;
  auto make = [&](int prefetch, int64_t consumed) {
    return std::make_unique<DataIterator>(ds, std::make_unique<MegatronPretrainingSampler>(64, consumed, 4, 1, 2),
                                          options, prefetch);
  };
  auto plain = make(0, 0), ahead = make(3, 0);
  int n = 0;
  while (auto a = plain->next()) {
    auto b = ahead->next();
    ASSERT_TRUE(b.has_value());
    EXPECT_TRUE(at::equal(a->at("tokens"), b->at("tokens")));
    EXPECT_TRUE(at::equal(a->at("labels"), b->at("labels")));
    EXPECT_EQ(plain->consumed_samples(), ahead->consumed_samples());
    ++n;
  }
  EXPECT_EQ(n, 8);
  EXPECT_FALSE(ahead->next().has_value());
  EXPECT_EQ(plain->consumed_samples(), 64);
  // Resuming from a checkpointed consumed_samples gives the rest of the same stream.
  auto first = make(0, 0);
  for (int i = 0; i < 3; ++i) first->next();
  auto resumed = make(2, first->consumed_samples());
  EXPECT_TRUE(at::equal(first->next()->at("tokens"), resumed->next()->at("tokens")));
}

}  // namespace
}  // namespace megatron::datasets
