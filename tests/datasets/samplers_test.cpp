#include "megatron/datasets/samplers.h"

#include "datasets/test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace megatron::datasets {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

std::vector<std::vector<int64_t>> drain(BatchSampler& s, int max_batches = 1 << 20) {
  std::vector<std::vector<int64_t>> out;
  while (max_batches-- > 0) {
    auto b = s.next();
    if (!b) break;
    out.push_back(*b);
  }
  return out;
}

TEST(MegatronPretrainingSampler, RanksTakeTheirSliceOfEachGlobalMicroBatch) {
  MegatronPretrainingSampler r0(10, 0, 2, 0, 2), r1(10, 0, 2, 1, 2);
  auto b0 = drain(r0), b1 = drain(r1);
  EXPECT_EQ(b0, (std::vector<std::vector<int64_t>>{{0, 1}, {4, 5}}));
  EXPECT_EQ(b1, (std::vector<std::vector<int64_t>>{{2, 3}, {6, 7}}));  // 8, 9 dropped
  EXPECT_EQ(r0.consumed_samples(), 8);
}

TEST(MegatronPretrainingSampler, ResumingContinuesTheSameStream) {
  MegatronPretrainingSampler full(100, 0, 3, 1, 2);
  auto all = drain(full);
  MegatronPretrainingSampler resumed(100, 24, 3, 1, 2);  // after 4 global micro-batches
  auto rest = drain(resumed);
  EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(all.begin() + 4, all.end()));
}

TEST(MegatronPretrainingSampler, ChecksItsArguments) {
  EXPECT_THAT(error_of([] { MegatronPretrainingSampler s(10, 10, 1, 0, 1); }), HasSubstr("consumed_samples 10"));
  EXPECT_THAT(error_of([] { MegatronPretrainingSampler s(10, 0, 1, 2, 2); }), HasSubstr("data-parallel rank 2"));
  EXPECT_THAT(error_of([] { MegatronPretrainingSampler s(0, 0, 1, 0, 1); }), HasSubstr("no samples"));
}

TEST(MegatronPretrainingRandomSampler, EpochIsAPermutationSplitAcrossRanks) {
  MegatronPretrainingRandomSampler r0(12, 0, 2, 0, 2, false), r1(12, 0, 2, 1, 2, false);
  std::set<int64_t> seen;
  for (auto* s : {&r0, &r1}) {
    for (auto& b : drain(*s, 3)) seen.insert(b.begin(), b.end());
  }
  EXPECT_EQ(seen.size(), 12u);
}

TEST(MegatronPretrainingRandomSampler, ResumingContinuesTheSameStreamAcrossEpochs) {
  for (bool sharding : {false, true}) {
    MegatronPretrainingRandomSampler full(20, 0, 2, 1, 2, sharding);
    auto all = drain(full, 25);  // five epochs of five micro-batches
    MegatronPretrainingRandomSampler resumed(20, 28, 2, 1, 2, sharding);
    auto rest = drain(resumed, 18);
    EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(all.begin() + 7, all.end())) << "sharding " << sharding;
    // Epochs differ.
    EXPECT_NE(std::vector<std::vector<int64_t>>(all.begin(), all.begin() + 5),
              std::vector<std::vector<int64_t>>(all.begin() + 5, all.begin() + 10));
  }
}

}  // namespace
}  // namespace megatron::datasets
