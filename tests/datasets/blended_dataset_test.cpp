#include "megatron/datasets/blended_dataset.h"

#include "datasets/test_util.h"
#include "megatron/datasets/helpers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megatron::datasets {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// n samples whose tokens all equal `tag`.
struct Constant : MegatronDataset {
  Constant(int64_t n, int64_t tag) : n_(n), tag_(tag) {}
  int64_t size() const override { return n_; }
  int64_t sample_length() const override { return 4; }
  void read_sample(int64_t idx, int64_t* t) const override {
    EXPECT_LT(idx, n_);
    std::fill(t, t + 4, tag_ * 1000 + idx);
  }
  std::string description() const override { return "constant " + std::to_string(tag_); }
  int64_t n_, tag_;
};

TEST(BlendingIndices, GreatestErrorSelection) {
  std::vector<int16_t> index;
  std::vector<int64_t> sample;
  build_blending_indices({0.3, 0.7}, 10, index, sample);
  // Worked by hand from the rule: error_d = w_d * max(i, 1) - count_d, ties to the lower d.
  EXPECT_EQ(index, (std::vector<int16_t>{1, 0, 1, 1, 0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(sample, (std::vector<int64_t>{0, 0, 1, 2, 1, 3, 4, 2, 5, 6}));
}

TEST(BlendingIndices, ExhaustiveDrawsExactCounts) {
  std::vector<int16_t> index;
  std::vector<int64_t> sample;
  build_exhaustive_blending_indices({3, 1}, index, sample);
  EXPECT_EQ(index.size(), 4u);
  EXPECT_EQ(std::count(index.begin(), index.end(), 0), 3);
}

TEST(BlendedDataset, ReadsFromTheChosenDatasets) {
  auto a = std::make_shared<Constant>(100, 1), b = std::make_shared<Constant>(100, 2);
  BlendedDataset blend({a, b}, {30, 70}, 100);
  EXPECT_EQ(std::count(blend.dataset_index().begin(), blend.dataset_index().end(), 0), 30);
  int64_t t[4];
  blend.read_sample(1, t);
  EXPECT_EQ(t[0], 1000);  // second sample: dataset 0's first
}

TEST(BlendedDataset, RefusesToOversample) {
  auto a = std::make_shared<Constant>(5, 1), b = std::make_shared<Constant>(100, 2);
  EXPECT_THAT(error_of([&] {
                BlendedDataset x({a, b}, {0.5, 0.5}, 20);
              }),
              HasSubstr("draws 10 samples from dataset 0"));
}

TEST(DataPath, WeightsAndPrefixes) {
  auto w = parse_data_path({"0.3", "a", "0.7", "b"});
  EXPECT_EQ(w.prefixes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(w.weights, (std::vector<double>{0.3, 0.7}));
  auto p = parse_data_path({"a", "b"});
  EXPECT_EQ(p.prefixes.size(), 2u);
  EXPECT_TRUE(p.weights.empty());
}

TEST(DataPath, BadWeightsAreOneClearError) {
  auto error_for = [](std::vector<std::string> words) { return error_of([&] { parse_data_path(words); }); };
  EXPECT_THAT(error_for({"inf", "a", "1", "b"}), HasSubstr("the weight of a must be a finite number > 0 (got inf)"));
  EXPECT_THAT(error_for({"0.3", "a", "-2", "b"}), HasSubstr("the weight of b must be a finite number > 0 (got -2)"));
  EXPECT_THAT(error_for({"0.3", "a", "0.7"}), HasSubstr("pairs of weight and prefix, but 3 items"));
  EXPECT_THAT(error_for({"0.3", "a", "b", "c"}), HasSubstr("'b' stands where a weight belongs"));
  EXPECT_THAT(error_for({}), HasSubstr("found nothing"));
}

}  // namespace
}  // namespace megatron::datasets

namespace megatron::datasets {
namespace {

std::string write_prefix(const std::string& dir, const std::string& name, int docs, int32_t tag) {
  const std::string prefix = dir + "/" + name;
  IndexedDatasetBuilder builder(bin_path(prefix), DType::kInt32);
  for (int d = 0; d < docs; ++d) {
    builder.add_item(std::vector<int32_t>(7 + d % 5, tag));
    builder.end_document();
  }
  builder.finalize(idx_path(prefix));
  return prefix;
}

TEST(BuildGPTDatasets, WeightedBlendFollowsMegatronSizes) {
  const std::string dir = testing::make_temp_dir();
  DataBlend blend = parse_data_path({"0.3", write_prefix(dir, "a", 200, 1), "0.7", write_prefix(dir, "b", 200, 2)});
  GPTDatasetConfig config;
  config.sequence_length = 8;
  config.split = "90,10";
  config.path_to_cache = dir + "/cache";
  auto sets = build_gpt_datasets(blend, {100, 10, 10}, config);
  ASSERT_TRUE(sets[0] && sets[1]);
  EXPECT_EQ(sets[2], nullptr);      // split weight 0
  EXPECT_EQ(sets[0]->size(), 100);  // ceil(100 * 0.3) + ceil(100 * 0.7)
  EXPECT_EQ(sets[1]->size(), 10);   // ceil(10 * 0.3) + ceil(10 * 0.7)
  int ones = 0;
  std::vector<int64_t> text(9);
  for (int64_t i = 0; i < 100; ++i) {
    sets[0]->read_sample(i, text.data());
    ones += text[0] == 1;
  }
  EXPECT_EQ(ones, 30);
}

TEST(BuildGPTDatasets, RankZeroBuildsTheCachesOthersLoadThem) {
  const std::string dir = testing::make_temp_dir();
  DataBlend blend = parse_data_path({write_prefix(dir, "a", 100, 1)});
  GPTDatasetConfig config;
  config.sequence_length = 8;
  config.split = "100";
  config.path_to_cache = dir + "/cache";
  int barriers = 0;
  // Another rank first: without rank 0's caches it must refuse rather than build.
  EXPECT_THAT(error_of([&] {
                build_gpt_datasets_on_ranks(blend, {50, 0, 0}, config, 1, [&] { ++barriers; });
              }),
              HasSubstr("index cache missing"));
  auto built = build_gpt_datasets_on_ranks(blend, {50, 0, 0}, config, 0, [&] { ++barriers; });
  auto loaded = build_gpt_datasets_on_ranks(blend, {50, 0, 0}, config, 1, [&] { ++barriers; });
  EXPECT_EQ(barriers, 3);
  EXPECT_TRUE(dynamic_cast<const GPTDataset&>(*loaded[0]).loaded_from_cache());
  EXPECT_EQ(dynamic_cast<const GPTDataset&>(*built[0]).shuffle_index().to_vector(),
            dynamic_cast<const GPTDataset&>(*loaded[0]).shuffle_index().to_vector());
}

TEST(BuildGPTDatasets, SampleRequestFollowsMegatron) {
  auto n = train_valid_test_num_samples(1000, 32, 100, 10);
  EXPECT_EQ(*n[0], 32000);
  EXPECT_EQ(*n[1], 11 * 10 * 32);
  EXPECT_EQ(*n[2], 320);
}

TEST(BuildGPTDatasets, MockDataHasRampsEndingInEod) {
  GPTDatasetConfig config;
  config.sequence_length = 16;
  auto sets = build_mock_gpt_datasets(1000, 999, {50, 5, 5}, config);
  ASSERT_TRUE(sets[0] && sets[1] && sets[2]);
  EXPECT_GE(sets[0]->size(), 50);
  std::vector<int64_t> text(17);
  sets[0]->read_sample(0, text.data());
  for (int i = 1; i < 17; ++i) {
    // Within a document tokens count up by one; a document ends with EOD.
    EXPECT_TRUE(text[i] == text[i - 1] + 1 || text[i] == 999 || text[i - 1] == 999 || text[i] == 1) << i;
  }
}

}  // namespace
}  // namespace megatron::datasets
