#include "megatron/logging.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace megatron {
namespace {

std::string captured(const LoggingOptions& options, void (*emit)()) {
  init_logging(options);
  testing::internal::CaptureStdout();
  emit();
  std::fflush(stdout);
  return testing::internal::GetCapturedStdout();
}

TEST(Logging, EveryLineCarriesRankAndWorldSize) {
  auto out = captured({2, 4, "info"}, [] { log_info("hello"); });
  EXPECT_NE(out.find("[rank 2/4] [info] hello"), std::string::npos) << out;
  EXPECT_EQ(logging_rank(), 2);
  EXPECT_EQ(logging_world_size(), 4);
}

TEST(Logging, RankZeroAndLastRankHelpers) {
  auto emit = [] {
    log_rank_0(LogLevel::kInfo, "from rank 0");
    log_rank_last(LogLevel::kInfo, "from last");
  };
  auto first = captured({0, 4, "info"}, emit);
  EXPECT_NE(first.find("from rank 0"), std::string::npos) << first;
  EXPECT_EQ(first.find("from last"), std::string::npos) << first;

  auto middle = captured({1, 4, "info"}, emit);
  EXPECT_EQ(middle, "");

  auto last = captured({3, 4, "info"}, emit);
  EXPECT_EQ(last.find("from rank 0"), std::string::npos) << last;
  EXPECT_NE(last.find("[rank 3/4] [info] from last"), std::string::npos) << last;
}

TEST(Logging, LevelFiltersLines) {
  auto out = captured({0, 1, "warn"}, [] {
    log_info("quiet");
    log_warn("loud");
  });
  EXPECT_EQ(out.find("quiet"), std::string::npos) << out;
  EXPECT_NE(out.find("[warning] loud"), std::string::npos) << out;
  EXPECT_FALSE(log_enabled(LogLevel::kInfo));
  EXPECT_TRUE(log_enabled(LogLevel::kError));
}

TEST(Logging, BadOptionsAreRejected) {
  try {
    init_logging({0, 1, "verbose"});
    FAIL() << "expected an error for an unknown level";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown log level 'verbose'"), std::string::npos);
  }
  EXPECT_THROW(init_logging({4, 4, "info"}), std::invalid_argument);
  EXPECT_THROW(init_logging({0, 0, "info"}), std::invalid_argument);
}

}  // namespace
}  // namespace megatron
