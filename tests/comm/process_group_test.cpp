// ProcessGroup under mpirun at several world sizes: every collective on every rank, checked
// against closed forms of what each rank contributed.
#include "megatron/comm/process_group.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "distributed_test.h"
#include "error_of.h"

namespace megatron::comm {
namespace {

using testing::error_of;
using testing::world;

const std::vector<at::ScalarType> kDtypes = {at::kFloat, at::kBFloat16, at::kHalf, at::kLong};
const std::vector<int64_t> kSizes = {0, 1, 7, 1000};

// Small integers, exact in every dtype under test even after summing over 8 ranks.
at::Tensor pattern(int64_t n, int rank, at::ScalarType dtype) {
  return (at::arange(n, at::kLong).remainder(16) + rank).to(dtype);
}

TEST(ProcessGroup, AllReduceEveryOpDtypeAndSize) {
  auto& pg = *world();
  const int n = pg.size(), r = pg.rank();
  for (auto dtype : kDtypes) {
    for (int64_t size : kSizes) {
      auto base = at::arange(size, at::kLong).remainder(16).to(at::kDouble);
      auto t = pattern(size, r, dtype);
      pg.all_reduce(t, ReduceOp::kSum);
      EXPECT_TRUE(at::equal(t.to(at::kDouble), base * n + n * (n - 1) / 2.0)) << dtype << " " << size;

      t = pattern(size, r, dtype);
      pg.all_reduce(t, ReduceOp::kMax);
      EXPECT_TRUE(at::equal(t.to(at::kDouble), base + (n - 1))) << dtype << " " << size;

      t = pattern(size, r, dtype);
      pg.all_reduce(t, ReduceOp::kMin);
      EXPECT_TRUE(at::equal(t.to(at::kDouble), base)) << dtype << " " << size;

      if (at::isFloatingType(dtype)) {
        t = pattern(size, r, dtype);
        pg.all_reduce(t, ReduceOp::kAvg);
        auto expected = (base * n + n * (n - 1) / 2.0) / n;
        EXPECT_TRUE(at::allclose(t.to(at::kDouble), expected, 1e-2, 1e-2)) << dtype << " " << size;
        EXPECT_EQ(t.scalar_type(), dtype);
      }
    }
  }
}

TEST(ProcessGroup, AllReduceNonContiguousTensor) {
  auto& pg = *world();
  auto t = at::full({3, 5}, pg.rank() + 1.0).t();  // [5, 3] view, not contiguous
  ASSERT_FALSE(t.is_contiguous());
  pg.all_reduce(t);
  EXPECT_TRUE(at::equal(t, at::full({5, 3}, pg.size() * (pg.size() + 1) / 2.0)));
}

TEST(ProcessGroup, AllGatherConcatenatesAlongDimZero) {
  auto& pg = *world();
  for (auto dtype : kDtypes) {
    for (int64_t rows : {0, 1, 5}) {
      auto input = (at::arange(rows * 3, at::kLong).view({rows, 3}) + 100 * pg.rank()).to(dtype);
      auto output = at::empty({pg.size() * rows, 3}, input.options());
      pg.all_gather(output, input);
      for (int src = 0; src < pg.size(); ++src) {
        auto expected = (at::arange(rows * 3, at::kLong).view({rows, 3}) + 100 * src).to(dtype);
        EXPECT_TRUE(at::equal(output.narrow(0, src * rows, rows), expected))
            << dtype << " rows " << rows << " from rank " << src;
      }
    }
  }
}

TEST(ProcessGroup, ReduceScatterGivesEachRankItsSlice) {
  auto& pg = *world();
  const int n = pg.size();
  for (auto dtype : {at::kFloat, at::kLong, at::kBFloat16}) {
    for (int64_t chunk : {0, 1, 3}) {
      // Rank r contributes (r + 1) * i at position i; the sum over ranks is n(n+1)/2 * i.
      auto input = (at::arange(n * chunk, at::kLong).remainder(8) * (pg.rank() + 1)).to(dtype);
      auto output = at::empty({chunk}, input.options());
      pg.reduce_scatter(output, input, ReduceOp::kSum);
      auto mine = at::arange(pg.rank() * chunk, (pg.rank() + 1) * chunk, at::kLong).remainder(8);
      EXPECT_TRUE(at::equal(output.to(at::kLong), mine * (n * (n + 1) / 2))) << dtype << " " << chunk;
    }
  }
}

// Rank src sends (src + 2 dst) % 3 rows to rank dst (zero for some pairs), each row [16 src + dst, k]:
// small integers, exact in every dtype under test.
int64_t rows_between(int src, int dst) {
  return (src + 2 * dst) % 3;
}
at::Tensor rows_from(int src, int dst, at::ScalarType dtype) {
  const int64_t n = rows_between(src, dst);
  return at::stack({at::full({n}, 16 * src + dst, at::kLong), at::arange(n, at::kLong)}, 1).to(dtype);
}

TEST(ProcessGroup, AllToAllSendsEachRankItsRowsInRankOrder) {
  auto& pg = *world();
  const int n = pg.size(), r = pg.rank();
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong, at::kShort}) {
    std::vector<at::Tensor> sent, expected;
    std::vector<int64_t> input_splits, output_splits;
    for (int peer = 0; peer < n; ++peer) {
      sent.push_back(rows_from(r, peer, dtype));
      input_splits.push_back(rows_between(r, peer));
      expected.push_back(rows_from(peer, r, dtype));
      output_splits.push_back(rows_between(peer, r));
    }
    auto input = at::cat(sent), want = at::cat(expected);
    auto output = at::full(want.sizes(), -1, want.options());
    pg.all_to_all(output, input, output_splits, input_splits);
    EXPECT_TRUE(at::equal(output, want)) << dtype << " rank " << r;

    output.fill_(-1);
    pg.all_to_all_async(output, input, output_splits, input_splits)->wait();
    EXPECT_TRUE(at::equal(output, want)) << dtype << " async, rank " << r;
  }
  // Without splits: dim 0 in equal parts, the part for rank d being [rank, d] rows here.
  auto input = at::stack({at::full({n}, r, at::kFloat), at::arange(n, at::kFloat)}, 1);
  auto output = at::empty_like(input);
  pg.all_to_all(output, input);
  EXPECT_TRUE(at::equal(output, at::stack({at::arange(n, at::kFloat), at::full({n}, r, at::kFloat)}, 1)));
}

TEST(ProcessGroup, BroadcastFromEverySource) {
  auto& pg = *world();
  for (int src = 0; src < pg.size(); ++src) {
    auto t = at::full({4, 2}, pg.rank(), at::kBFloat16);
    pg.broadcast(t, src);
    EXPECT_TRUE(at::equal(t, at::full({4, 2}, src, at::kBFloat16))) << "src " << src;
  }
}

TEST(ProcessGroup, ReduceLandsOnTheDestinationOnly) {
  auto& pg = *world();
  const int n = pg.size();
  for (int dst = 0; dst < n; ++dst) {
    for (auto op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      // Rank r holds (r + 1) x [0, 1, 2, ...]; the sum over ranks is n(n+1)/2 times that.
      auto mine = at::arange(6, at::kFloat) * (pg.rank() + 1);
      auto t = mine.clone();
      auto work = pg.reduce_async(t, dst, op);
      work->wait();
      const double scale = (op == ReduceOp::kAvg ? (n + 1) / 2.0 : n * (n + 1) / 2.0);
      if (pg.rank() == dst)
        EXPECT_TRUE(at::allclose(t, at::arange(6, at::kFloat) * scale)) << "dst " << dst << " rank " << pg.rank();
      else
        EXPECT_TRUE(at::equal(t, mine)) << "dst " << dst << " rank " << pg.rank();
    }
  }
}

TEST(ProcessGroup, BatchedRingSendRecv) {
  auto& pg = *world();
  const int n = pg.size(), r = pg.rank();
  auto to_next = at::full({6}, 10.0 * r);
  auto to_prev = at::full({6}, -10.0 * r);
  auto from_prev = at::empty({6});
  auto from_next = at::empty({6});
  // Both directions at once: only safe because the batch starts all four together.
  pg.batch_isend_irecv({{P2POp::kSend, to_next, (r + 1) % n},
                        {P2POp::kSend, to_prev, (r - 1 + n) % n},
                        {P2POp::kRecv, from_prev, (r - 1 + n) % n},
                        {P2POp::kRecv, from_next, (r + 1) % n}})
      ->wait();
  EXPECT_TRUE(at::equal(from_prev, at::full({6}, 10.0 * ((r - 1 + n) % n))));
  EXPECT_TRUE(at::equal(from_next, at::full({6}, -10.0 * ((r + 1) % n))));
}

TEST(ProcessGroup, BlockingSendRecvPairs) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  auto& pg = *world();
  const int r = pg.rank();
  const int partner = r % 2 == 0 ? r + 1 : r - 1;
  if (partner >= pg.size()) return;  // odd world: the last rank has no partner
  auto mine = at::arange(5, at::kLong) * (r + 1);
  auto theirs = at::empty({5}, at::kLong);
  if (r % 2 == 0) {
    pg.send(mine, partner);
    pg.recv(theirs, partner);
  } else {
    pg.recv(theirs, partner);
    pg.send(mine, partner);
  }
  EXPECT_TRUE(at::equal(theirs, at::arange(5, at::kLong) * (partner + 1)));
}

TEST(ProcessGroup, AsyncOperationsOverlapWithCompute) {
  auto& pg = *world();
  auto a = at::full({1 << 16}, 1.0f);
  auto b = at::full({257}, 2.0f);
  auto c = at::arange(9, at::kFloat) + pg.rank();
  auto wa = pg.all_reduce_async(a);
  auto wb = pg.all_reduce_async(b, ReduceOp::kMax);
  auto gathered = at::empty({pg.size() * 9});
  auto wc = pg.all_gather_async(gathered, c);
  auto product = at::mm(at::ones({64, 64}), at::ones({64, 64}));  // work while they fly
  wc->wait();
  wb->wait();
  wa->wait();
  EXPECT_TRUE(wa->is_completed() && wb->is_completed() && wc->is_completed());
  EXPECT_TRUE(at::equal(a, at::full({1 << 16}, 1.0f * pg.size())));
  EXPECT_TRUE(at::equal(b, at::full({257}, 2.0f)));
  EXPECT_FLOAT_EQ(gathered[9 * pg.size() - 1].item<float>(), 8.0f + pg.size() - 1);
  EXPECT_FLOAT_EQ(product[0][0].item<float>(), 64.0f);
}

// Open MPI advances a nonblocking collective only inside MPI calls; the progress thread makes
// them while the caller computes, so an operation launched before a second of work (no MPI call
// on this thread) is found done. Gloo runs its own threads; a world of one has nothing to do.
TEST(ProcessGroup, AsyncCollectivesProgressWhileTheCallerComputes) {
  auto& pg = *world();
  auto t = at::full({4 << 20}, 1.0f);  // 16 MiB: many fragments, each needing progress
  pg.barrier();
  auto work = pg.all_reduce_async(t);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_TRUE(work->is_completed()) << "rank " << pg.rank()
                                    << ": the all-reduce did not advance during the caller's work";
  work->wait();
  EXPECT_TRUE(at::equal(t, at::full({4 << 20}, 1.0f * pg.size())));
}

// Registered as process_group_test.latency, with MEGATRON_INJECT_COMM_LATENCY_US=200000: each
// collective completes 0.2 s after its launch, and the caller is free until it waits.
TEST(InjectedLatency, CollectivesCompleteNoEarlierThanTheLatencyAfterLaunch) {
  const char* value = std::getenv("MEGATRON_INJECT_COMM_LATENCY_US");
  if (value == nullptr) GTEST_SKIP() << "run by process_group_test.latency, which sets MEGATRON_INJECT_COMM_LATENCY_US";
  const auto latency = std::chrono::microseconds(std::atoll(value));
  using clock = std::chrono::steady_clock;
  auto& pg = *world();
  auto t = at::ones({1000});
  pg.barrier();

  auto start = clock::now();
  pg.all_reduce(t);  // blocking: returns after the latency
  EXPECT_GE(clock::now() - start, latency);
  EXPECT_TRUE(at::equal(t, at::full({1000}, 1.0f * pg.size())));

  start = clock::now();
  auto work = pg.all_reduce_async(t);
  EXPECT_LT(clock::now() - start, latency / 2) << "launching must not wait";
  EXPECT_FALSE(work->is_completed());
  std::this_thread::sleep_for(latency);  // the caller's own work, longer than the latency
  const auto before_wait = clock::now();
  work->wait();
  EXPECT_LT(clock::now() - before_wait, latency / 2) << "the latency was hidden behind the caller's work";
  EXPECT_TRUE(work->is_completed());
  EXPECT_TRUE(at::equal(t, at::full({1000}, 1.0f * pg.size() * pg.size())));
}

TEST(ProcessGroup, SubgroupsCommunicateAmongTheirMembers) {
  auto& pg = *world();
  std::vector<int> evens, odds;
  for (int r = 0; r < pg.size(); ++r) (r % 2 ? odds : evens).push_back(r);
  auto even = pg.new_group(evens, "evens");
  auto odd = odds.empty() ? nullptr : pg.new_group(odds, "odds");
  auto& mine = pg.rank() % 2 ? odd : even;
  ASSERT_TRUE(mine);
  EXPECT_EQ((pg.rank() % 2 ? even : odd), nullptr);
  EXPECT_EQ(mine->global_rank(mine->rank()), pg.rank());
  auto t = at::full({2}, static_cast<double>(pg.rank()), at::kDouble);
  mine->all_reduce(t);
  double expected = 0;
  for (int r : (pg.rank() % 2 ? odds : evens)) expected += r;
  EXPECT_TRUE(at::equal(t, at::full({2}, expected, at::kDouble)));
  mine->barrier();
}

TEST(ProcessGroup, BadArgumentsAreClearErrors) {
  auto& pg = *world();
  auto ints = at::ones({4}, at::kLong);
  EXPECT_NE(error_of([&] { pg.all_reduce(ints, ReduceOp::kAvg); }).find("avg needs a floating-point tensor, got Long"),
            std::string::npos);
  auto in = at::ones({3});
  auto small = at::empty({3 * pg.size() - 1});
  auto msg = error_of([&] { pg.all_gather(small, in); });
  EXPECT_NE(msg.find("all_gather on group 'world': output must hold group size"), std::string::npos) << msg;
  auto odd_input = at::ones({pg.size() * 2 + 1});
  auto out = at::empty({2});
  msg = error_of([&] { pg.reduce_scatter(out, odd_input); });
  EXPECT_NE(msg.find("does not split into group size"), std::string::npos) << msg;
  auto t = at::ones({1});
  msg = error_of([&] { pg.broadcast(t, pg.size()); });
  EXPECT_NE(msg.find("source rank " + std::to_string(pg.size()) + " is outside the group"), std::string::npos) << msg;
  auto rows = at::ones({pg.size(), 2});
  auto rows_out = at::empty({pg.size(), 2});
  std::vector<int64_t> splits(pg.size(), 1);
  splits[0] = 2;
  msg = error_of([&] { pg.all_to_all(rows_out, rows, {}, splits); });
  EXPECT_NE(msg.find("all_to_all on group 'world': input splits sum to " + std::to_string(pg.size() + 1) +
                     " rows, but the input has " + std::to_string(pg.size())),
            std::string::npos)
      << msg;
  auto wide = at::empty({pg.size(), 3});
  msg = error_of([&] { pg.all_to_all(wide, rows); });
  EXPECT_NE(msg.find("must be rows of one shape"), std::string::npos) << msg;
  auto complex = at::ones({2}, at::kComplexFloat);
  msg = error_of([&] { pg.all_reduce(complex); });
  EXPECT_NE(msg.find("collectives do not support dtype ComplexFloat"), std::string::npos) << msg;
}

TEST(ProcessGroup, WaitTimesOutNamingTheOperationAndPeers) {
  MEGATRON_REQUIRE_WORLD_SIZE(2);
  auto& pg = *world();
  auto t = at::ones({8});
  if (pg.rank() == 0) {
    auto work = pg.all_reduce_async(t);
    auto msg = error_of([&] { work->wait(std::chrono::milliseconds(300)); });
    EXPECT_NE(msg.find("all_reduce(sum) on group 'world' timed out after 0.3 s at group rank 0 "
                       "(world rank 0), waiting on world ranks [1"),
              std::string::npos)
        << msg;
    work->wait();  // the late peers arrive; the same operation still completes
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    pg.all_reduce_async(t)->wait();  // same form as rank 0: MPI never matches blocking with async
  }
  EXPECT_TRUE(at::equal(t, at::full({8}, 1.0f * pg.size())));
}

}  // namespace
}  // namespace megatron::comm
