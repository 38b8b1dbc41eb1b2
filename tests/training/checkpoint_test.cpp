// Checkpoints through pretrain() under mpirun (1, 2 and 8 ranks): a run stopped by SIGTERM
// (--exit-signal-handler) saves, and the run resumed from that checkpoint continues with exactly
// the per-iteration losses, gradient norms, validation losses and final weights of an
// uninterrupted run, with dropout on (so the RNG states matter), for TP/PP/DP mixes, the
// interleaved schedule and the distributed optimizer. On one rank: corrupt, truncated and
// missing files, mismatched arguments and layouts give one error naming the file or flag, and
// --load-fallback loads the previous checkpoint. Every rank asserts.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "distributed_test.h"
#include "error_of.h"
#include "megatron/training/checkpointing.h"
#include "subgroup_pretrain.h"
#include "tiny_gpt_args.h"

namespace {

using namespace megatron;
namespace fs = std::filesystem;
using megatron::testing::error_of;
using ::testing::HasSubstr;

constexpr int kIterations = 6;

using megatron::testing::Layout;

training::Arguments resume_args(const Layout& l) {
  auto a = megatron::testing::tiny_gpt_args();
  a.num_layers = 4;
  a.train_iters = kIterations;
  a.global_batch_size = 8;
  a.hidden_dropout = 0.1;  // dropout draws from the CPU generator and the TP tracker
  a.attention_dropout = 0.1;
  a.eval_interval = 2;  // validation reads on between checkpoints
  a.eval_iters = 1;
  a.log_interval = 100;
  l.apply(a);
  return a;
}

struct Run {
  bool member = false;
  training::TrainingResult result;
  double weight_checksum = 0;  // sum over this rank's parameters of sum(|p| * (index + 1))
};

// pretrain on the first n ranks of the world.
Run run_on(const training::Arguments& a, int n, const std::string& group_name) {
  auto sub = megatron::testing::pretrain_on_first_ranks(a, n, group_name);
  Run run{sub.member, sub.result, 0.0};
  for (const auto& m : sub.built) {
    for (const auto& p : m->parameters()) {
      auto flat = p.detach().reshape({-1}).to(at::kDouble);
      run.weight_checksum += (flat.abs() * at::arange(1, flat.numel() + 1, flat.options())).sum().item<double>();
    }
  }
  return run;
}

// A fresh folder that every rank sees under the same name.
std::string shared_temp_dir(const std::string& tag) {
  auto world = megatron::testing::world();
  std::string path;
  auto buffer = at::zeros({256}, at::kByte);
  if (world->rank() == 0) {
    std::string pattern = (fs::temp_directory_path() / ("megatron_ckpt_" + tag + "_XXXXXX")).string();
    TORCH_CHECK(mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
    std::memcpy(buffer.data_ptr(), pattern.data(), pattern.size());
  }
  world->broadcast(buffer, 0);
  return std::string(static_cast<const char*>(buffer.data_ptr()));
}

struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name_); }
  const char* name_;
};

void expect_same_runs(const Layout& l, const std::string& dir, const Run& full, const Run& stopped, const Run& resumed);

void expect_resume_is_bit_identical(const Layout& l) {
  SCOPED_TRACE(l.name());
  const int n = l.ranks();
  const std::string dir = shared_temp_dir(l.name());
  auto a = resume_args(l);

  Run full = run_on(a, n, "full_" + l.name());

  // Stopped by SIGTERM after iteration 3 (on the last rank only: the flag reaches every rank).
  Run stopped;
  {
    auto s = resume_args(l);
    s.save = dir;
    s.exit_signal_handler = true;
    ScopedEnv fault("MEGATRON_FAULT_INJECTION", "train:sigterm_after_iteration_3@" + std::to_string(n - 1));
    stopped = run_on(s, n, "stopped_" + l.name());
  }
  auto r = a;
  r.load = dir;
  r.save = dir;
  Run resumed = run_on(r, n, "resumed_" + l.name());
  if (full.member) expect_same_runs(l, dir, full, stopped, resumed);
  megatron::testing::world()->barrier();
  if (megatron::testing::world()->rank() == 0) training::remove_tree(dir);
}

void expect_same_runs(const Layout& l, const std::string& dir, const Run& full, const Run& stopped,
                      const Run& resumed) {
  ASSERT_TRUE(stopped.result.exited_on_signal);
  EXPECT_EQ(stopped.result.saved_iterations, std::vector<int64_t>{3});
  ASSERT_EQ(stopped.result.iterations.size(), 3u);
  ASSERT_EQ(resumed.result.loaded_iteration, std::optional<int64_t>(3));
  ASSERT_EQ(resumed.result.iterations.size(), static_cast<size_t>(kIterations - 3));
  ASSERT_EQ(full.result.iterations.size(), static_cast<size_t>(kIterations));
  for (int i = 0; i < kIterations; ++i) {
    const auto& want = full.result.iterations[i];
    const auto& got = i < 3 ? stopped.result.iterations[i] : resumed.result.iterations[i - 3];
    EXPECT_EQ(got.iteration, want.iteration);
    EXPECT_EQ(got.metrics, want.metrics) << "iteration " << i + 1;  // loss on the last stage only
    EXPECT_EQ(got.grad_norm, want.grad_norm) << "iteration " << i + 1;
    EXPECT_EQ(got.learning_rate, want.learning_rate) << "iteration " << i + 1;
  }
  // Validation at 2 (stopped run), 4 and 6, then the test split: the same samples and losses.
  ASSERT_EQ(full.result.evaluations.size(), 4u);
  ASSERT_EQ(resumed.result.evaluations.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(resumed.result.evaluations[i].metrics, full.result.evaluations[i + 1].metrics);
  EXPECT_EQ(resumed.result.consumed_train_samples, full.result.consumed_train_samples);
  EXPECT_EQ(resumed.weight_checksum, full.weight_checksum);
  EXPECT_TRUE(
      fs::is_regular_file(dir + "/iter_0000006/" + training::rank_dir_name(0, l.pp - 1, l.pp) + "/model_optim_rng.pt"));
  if (l.distributed_optimizer)
    EXPECT_TRUE(
        fs::is_regular_file(dir + "/iter_0000003/" + training::rank_dir_name(0, 0, l.pp) + "/distrib_optim.pt"));
}

TEST(Checkpoint, ResumeIsBitIdenticalOnOneRank) {
  expect_resume_is_bit_identical({1, 1, 1});
}

TEST(Checkpoint, ResumeIsBitIdenticalOnTwoRanks) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  expect_resume_is_bit_identical({2, 1, 1});
  expect_resume_is_bit_identical({1, 2, 1});
  expect_resume_is_bit_identical({1, 1, 2, std::nullopt, false, true});
}

TEST(Checkpoint, ResumeIsBitIdenticalOnEightRanks) {
  MEGATRON_REQUIRE_WORLD_SIZE(8);
  expect_resume_is_bit_identical({2, 2, 2, 1, false, true});
  expect_resume_is_bit_identical({2, 1, 4});
}

// --- failures, on one rank

training::Arguments small_args() {
  auto a = megatron::testing::tiny_gpt_args();
  a.train_iters = 2;
  a.lr_warmup_iters = 1;
  a.lr_decay_iters = 8;  // the same schedule however long a test trains
  a.eval_iters = 0;
  return a;
}

// A folder with checkpoints at iterations 1 and 2 (tracker: 2).
std::string two_checkpoints(const std::string& tag) {
  const std::string dir = shared_temp_dir(tag);
  auto a = small_args();
  a.save = dir;
  a.save_interval = 1;
  run_on(a, 1, "save_" + tag);
  return dir;
}

std::string load_error(const std::string& dir, training::Arguments a = small_args()) {
  a.load = dir;
  a.train_iters = 3;
  return error_of([&] { run_on(a, 1, "load"); });
}

void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

class CheckpointFailures : public ::testing::Test {
 protected:
  void SetUp() override {
    // Single-process checks: under mpirun the 1-rank job runs them.
    if (megatron::testing::world()->size() != 1) GTEST_SKIP() << "runs in the single-rank job";
    dir_ = two_checkpoints("fail");
    file_ = dir_ + "/iter_0000002/mp_rank_00/model_optim_rng.pt";
  }
  void TearDown() override {
    if (!dir_.empty()) training::remove_tree(dir_);
  }
  std::string dir_, file_;
};

TEST_F(CheckpointFailures, SavedLayoutIsMegatrons) {
  std::ifstream tracker(dir_ + "/latest_checkpointed_iteration.txt");
  std::string text;
  tracker >> text;
  EXPECT_EQ(text, "2");
  EXPECT_TRUE(fs::is_regular_file(dir_ + "/iter_0000001/mp_rank_00/model_optim_rng.pt"));
  EXPECT_TRUE(fs::is_regular_file(file_));
  EXPECT_TRUE(fs::is_regular_file(dir_ + "/iter_0000002/mp_rank_00/checksums.txt"));
  for (const auto& e : fs::directory_iterator(dir_))  // no temporary folders are left
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST_F(CheckpointFailures, TruncatedFileIsNamed) {
  fs::resize_file(file_, fs::file_size(file_) / 2);
  const auto msg = load_error(dir_);
  EXPECT_THAT(msg, HasSubstr(file_));
  EXPECT_THAT(msg, HasSubstr("truncated"));
}

TEST_F(CheckpointFailures, CorruptByteIsFoundByTheChecksum) {
  flip_byte(file_, fs::file_size(file_) / 2);
  const auto msg = load_error(dir_);
  EXPECT_THAT(msg, HasSubstr(file_));
  EXPECT_THAT(msg, HasSubstr("is corrupt: CRC32"));
}

TEST_F(CheckpointFailures, TruncatedFileWithoutChecksumsIsNamed) {
  fs::remove(dir_ + "/iter_0000002/mp_rank_00/checksums.txt");
  fs::resize_file(file_, fs::file_size(file_) - 100);
  const auto msg = load_error(dir_);
  EXPECT_THAT(msg, HasSubstr(file_));
  EXPECT_THAT(msg, HasSubstr("cannot be read"));
}

TEST_F(CheckpointFailures, MissingFileIsNamed) {
  fs::remove(file_);
  EXPECT_THAT(load_error(dir_), HasSubstr(file_ + " does not exist"));
}

TEST_F(CheckpointFailures, BadTrackerIsNamed) {
  std::ofstream(dir_ + "/latest_checkpointed_iteration.txt") << "two";
  const auto msg = load_error(dir_);
  EXPECT_THAT(msg, HasSubstr("latest_checkpointed_iteration.txt should hold an iteration number"));
  EXPECT_THAT(msg, HasSubstr("'two'"));
}

TEST_F(CheckpointFailures, FallbackLoadsThePreviousCheckpoint) {
  fs::resize_file(file_, 100);
  auto a = small_args();
  a.load = dir_;
  a.load_fallback = true;
  a.train_iters = 3;
  auto run = run_on(a, 1, "fallback");
  EXPECT_EQ(run.result.loaded_iteration, std::optional<int64_t>(1));
  EXPECT_EQ(run.result.iterations.size(), 2u);
}

TEST_F(CheckpointFailures, MismatchedArgumentIsNamed) {
  auto a = small_args();
  a.hidden_size = 64;
  const auto msg = load_error(dir_, a);
  EXPECT_THAT(msg, HasSubstr(file_ + " was saved with --hidden-size 32, this run has 64"));
}

TEST_F(CheckpointFailures, OtherLayoutPointsToTheConverter) {
  fs::rename(dir_ + "/iter_0000002/mp_rank_00", dir_ + "/iter_0000002/mp_rank_01");
  fs::create_directories(dir_ + "/iter_0000002/mp_rank_00_x");
  const auto msg = load_error(dir_);
  EXPECT_THAT(msg, HasSubstr(dir_ + "/iter_0000002/mp_rank_00 does not exist"));
  EXPECT_THAT(msg, HasSubstr("convert_checkpoint"));
}

TEST_F(CheckpointFailures, FinetuneStartsAtIterationZero) {
  auto a = small_args();
  a.load = dir_;
  a.finetune = true;
  a.train_iters = 1;
  auto run = run_on(a, 1, "finetune");
  EXPECT_EQ(run.result.iterations.size(), 1u);
  EXPECT_EQ(run.result.consumed_train_samples, 8);
}

TEST_F(CheckpointFailures, UnwritableSaveFolderStopsTraining) {
  auto a = small_args();
  a.save = "/proc/megatron_cannot_write_here";
  a.save_interval = 1;
  const auto msg = error_of([&] { run_on(a, 1, "unwritable"); });
  EXPECT_THAT(msg, HasSubstr("/proc/megatron_cannot_write_here"));
}

TEST_F(CheckpointFailures, KeepLastDeletesOlderCheckpoints) {
  auto a = small_args();
  a.load = dir_;
  a.save = dir_;
  a.save_interval = 1;
  a.train_iters = 4;
  a.keep_last_checkpoints = 2;
  run_on(a, 1, "keep");
  EXPECT_EQ(training::list_iterations(dir_), (std::vector<int64_t>{3, 4}));
}

}  // namespace
