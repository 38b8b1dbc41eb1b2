// Every value that enters through a flag or the --config file is checked where it enters: each
// numeric flag of the table fed 0, -1, nan, inf and 2^63 is refused by name or accepted within
// its documented range, and a config file that does not parse never trains a partly read value.
#include "megatron/training/arguments.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "error_of.h"
#include "training/argument_flags.h"

namespace megatron::training {
namespace {

using test_flags::base;
using test_flags::error_of;

// Whether v lies in the range the table documents (written out here, not taken from validate()).
bool documented(double v, const ArgCheck& c) {
  if (std::isnan(v)) return c.kind == ArgCheck::Kind::kAny;
  switch (c.kind) {
    case ArgCheck::Kind::kRequired: return v > 0 && v <= 1e308;
    case ArgCheck::Kind::kRange: return (c.lo_open ? v > c.lo : v >= c.lo) && (c.hi_open ? v < c.hi : v <= c.hi);
    default: return true;
  }
}

TEST(ArgumentValidation, EveryNumericFlagRefusesOutOfRangeValuesByName) {
  const std::vector<std::pair<std::string, double>> values = {
      {"0", 0}, {"-1", -1}, {"nan", NAN}, {"inf", INFINITY}, {"9223372036854775808", 9223372036854775808.0}};
  int numeric = 0;
  for (const auto& f : argument_fields()) {
    const std::string type = f.python_type;
    if (f.flag.empty() || (type.find("int") == std::string::npos && type.find("float") == std::string::npos)) continue;
    ++numeric;
    const bool integer = type.find("int") != std::string::npos;
    for (const auto& [word, v] : values) {
      auto args = base();
      if (f.flag == "--train-iters") {  // given once, below
        auto at = std::find(args.begin(), args.end(), f.flag);
        args.erase(at, at + 2);
      }
      args.insert(args.end(), {f.flag, word});
      const std::string error = error_of(args);
      // An integer flag never takes nan, inf or 2^63 (Python's int() takes none of them as int64).
      const bool valid = documented(v, f.check) && !(integer && (!std::isfinite(v) || v >= 9.2e18));
      if (!valid) {
        EXPECT_NE(error, "") << f.flag << " " << word << " was accepted, outside its range";
      }
      if (!error.empty()) {
        EXPECT_NE(error.find(f.flag), std::string::npos) << f.flag << " " << word << ": " << error;
        EXPECT_EQ(error.find('\n'), std::string::npos) << f.flag << " " << word << ": " << error;
      }
    }
  }
  EXPECT_GT(numeric, 50);  // the table's numeric flags were all walked
}

std::string config_error(const std::string& text) {
  const std::string path = ::testing::TempDir() + "/megatron_strict.toml";
  {
    std::ofstream f(path);
    f << text;
  }
  auto args = base();
  args.insert(args.end(), {"--config", path});
  std::string error = error_of(args);
  std::remove(path.c_str());
  const std::string prefix = "--config " + path + ":";
  EXPECT_NE(error.find(prefix), std::string::npos) << error;
  return error.substr(error.find(prefix) + prefix.size());
}

TEST(ArgumentValidation, ConfigFileIsReadStrictly) {
  // A line that does not parse names the file, line and column: nothing is read from it.
  EXPECT_EQ(config_error("seed = 1\nhidden-size = [128\n").rfind("2:", 0), 0u);
  EXPECT_NE(config_error("hidden-size = [128\n").find("not valid TOML"), std::string::npos);
  EXPECT_NE(config_error("hidden-size = \"128\"\n").find("1: 'hidden-size' must be an integer (got a string)"),
            std::string::npos);
  EXPECT_NE(config_error("seed = 3\nnum-layerz = 4\n").find("2: unknown setting 'num-layerz'"), std::string::npos);
  EXPECT_NE(config_error("bf16 = 1\n").find("'bf16' must be true or false (got an integer)"), std::string::npos);
  EXPECT_NE(config_error("data-path = []\n").find("must be a list of strings (got a list)"), std::string::npos);
  EXPECT_NE(config_error("[training]\nlr = 1\n").find("unknown setting 'training'"), std::string::npos);
  // Non-ASCII text outside strings and comments, where toml++ 3.3 would reach undefined behaviour.
  EXPECT_EQ(config_error("seed = 1\xC3\xA9\n"),
            "1:9: not valid TOML: a non-ASCII character outside a string or comment");
  EXPECT_EQ(config_error("# \xC3\xA9\n\xC3\xA9 = 1\n").rfind("2:1: not valid TOML", 0), 0u);
  EXPECT_NE(config_error("save = \"\"\"\\\n  \xC3\xA9\"\"\"\n")
                .find("2:3: not valid TOML: a non-ASCII character after a "
                      "backslash"),
            std::string::npos);
  // A missing file is named too.
  auto args = base();
  args.insert(args.end(), {"--config", "/nonexistent/run.toml"});
  EXPECT_NE(error_of(args).find("--config /nonexistent/run.toml: cannot be read: No such file or directory"),
            std::string::npos);
}

TEST(ArgumentValidation, ConfigFileValuesKeepTheirTypesAndFlagsWin) {
  const std::string path = ::testing::TempDir() + "/megatron_types.toml";
  {
    std::ofstream f(path);
    f << "init_method_std = 0.0125\nlr = 1\nuse-distributed-optimizer = true\nsplit = \"98, 1, 1\"\n"
         "hidden-dropout = 0\nsave = '/tmp/caf\xC3\xA9 \"\"' # \xC3\xA9 \xE3\x80\x81\n"
         "load = \"\"\"/tmp/\\\"\xC3\xA9\"\"\"\"\n";
  }
  auto args = base();
  args.insert(args.begin(), {"--config", path});
  args.insert(args.end(), {"--lr", "2e-3"});
  const Arguments a = *parse_arguments(args, 1);
  std::remove(path.c_str());
  EXPECT_DOUBLE_EQ(a.init_method_std, 0.0125);  // underscores spell the same key
  EXPECT_DOUBLE_EQ(*a.lr, 2e-3);                // the flag wins over the file
  EXPECT_TRUE(a.use_distributed_optimizer);
  EXPECT_EQ(a.split, "98, 1, 1");
  EXPECT_EQ(a.hidden_dropout, 0.0);            // an integer where a float is expected
  EXPECT_EQ(a.save, "/tmp/caf\xC3\xA9 \"\"");  // non-ASCII in strings and comments is read as written
  EXPECT_EQ(a.load, "/tmp/\"\xC3\xA9\"");
}

TEST(ArgumentValidation, SplitBlendAndSampleCountsAtParseTime) {
  auto with = [](std::vector<std::string> more) {
    auto args = base();
    args.insert(args.end(), more.begin(), more.end());
    return error_of(args);
  };
  EXPECT_NE(with({"--split", "-1,2,0"}).find("--split '-1,2,0': expected 1 to 3 numbers >= 0"), std::string::npos);
  EXPECT_NE(with({"--split", "0,0,0"}).find("--split '0,0,0': the weights must not all be 0"), std::string::npos);
  auto blend = base();
  blend.erase(blend.end() - 3);  // --mock-data
  blend.insert(blend.end(), {"--tokenizer-type", "NullTokenizer", "--data-path", "inf", "a", "1", "b"});
  EXPECT_NE(error_of(blend).find("--data-path: the weight of a must be a finite number > 0 (got inf)"),
            std::string::npos);
  EXPECT_NE(with({"--train-iters", "4611686018427387904"})
                .find("--train-iters (4611686018427387904) x --global-batch-size (2) does not fit"),
            std::string::npos);
  EXPECT_NE(with({"--eval-interval", "1", "--eval-iters", "4611686018427387904"})
                .find("--eval-iters (4611686018427387904) x 11 evaluations"),
            std::string::npos);
  EXPECT_NE(
      with({"--lr-warmup-samples", "100"}).find("--lr-warmup-samples (100) must be smaller than the decay length"),
      std::string::npos);
  EXPECT_NE(with({"--layernorm-epsilon", "0"}).find("--layernorm-epsilon must be positive"), std::string::npos);
}

}  // namespace
}  // namespace megatron::training
