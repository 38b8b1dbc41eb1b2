#include "megatron/memory.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <set>

namespace megatron {
namespace {

constexpr int64_t kMiB = 1 << 20;

at::Tensor block(int64_t bytes) {
  return at::empty({bytes / 4}, at::kFloat);
}

// One process, one cache: the tests run in order and look at stat differences.
class CPUAllocatorCache : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Allocated before the cache exists and freed after: back through LibTorch's own deleter,
    // whether the tensor's deleter or raw_deallocate() on the now current allocator frees it.
    static at::Tensor before = at::ones({kMiB}, at::kFloat);
    void* raw_before = c10::GetCPUAllocator()->raw_allocate(kMiB);
    enable_cpu_allocator_cache();
    before = at::Tensor();
    c10::GetCPUAllocator()->raw_deallocate(raw_before);
    void* raw_small = c10::GetCPUAllocator()->raw_allocate(100);
    void* raw_large = c10::GetCPUAllocator()->raw_allocate(kMiB);
    c10::GetCPUAllocator()->raw_deallocate(raw_small);
    c10::GetCPUAllocator()->raw_deallocate(raw_large);
  }
  void SetUp() override {
    enable_cpu_allocator_cache(1024 * kMiB);
    empty_cpu_allocator_cache();
  }
};

TEST_F(CPUAllocatorCache, SameSizeReusesTheFreedBlock) {
  ASSERT_TRUE(cpu_allocator_cache_enabled());
  const auto s0 = cpu_allocator_cache_stats();
  void* first = nullptr;
  {
    at::Tensor t = block(3 * kMiB);
    first = t.data_ptr();
    EXPECT_EQ(cpu_allocator_cache_stats().allocated_bytes - s0.allocated_bytes, 3 * kMiB);
  }
  EXPECT_EQ(cpu_allocator_cache_stats().cached_bytes, 3 * kMiB);
  at::Tensor again = block(3 * kMiB);
  EXPECT_EQ(again.data_ptr(), first);
  const auto s1 = cpu_allocator_cache_stats();
  EXPECT_EQ(s1.hits - s0.hits, 1);
  EXPECT_EQ(s1.misses - s0.misses, 1);
  EXPECT_EQ(s1.cached_bytes, 0);

  // Contents are whatever the tensor writes: a reused block is not stale to its user.
  again.fill_(2.5f);
  EXPECT_TRUE(again.eq(2.5f).all().item<bool>());
}

TEST_F(CPUAllocatorCache, OtherSizesAndSmallBlocksMiss) {
  { at::Tensor t = block(2 * kMiB); }
  const auto s0 = cpu_allocator_cache_stats();
  at::Tensor bigger = block(4 * kMiB);
  EXPECT_EQ(cpu_allocator_cache_stats().misses - s0.misses, 1);
  EXPECT_EQ(cpu_allocator_cache_stats().cached_bytes, 2 * kMiB);  // still there for a 2 MiB request

  // Below 16 KiB malloc serves the request; the cache neither counts nor keeps it.
  const auto s1 = cpu_allocator_cache_stats();
  { at::Tensor small = at::empty({1000}, at::kFloat); }
  const auto s2 = cpu_allocator_cache_stats();
  EXPECT_EQ(s2.hits + s2.misses, s1.hits + s1.misses);
  EXPECT_EQ(s2.cached_bytes, s1.cached_bytes);
  at::Tensor none = at::empty({0}, at::kFloat);
  EXPECT_EQ(none.numel(), 0);
}

TEST_F(CPUAllocatorCache, LimitEvictsTheLeastRecentlyFreed) {
  enable_cpu_allocator_cache(3 * kMiB);
  std::vector<at::Tensor> ts;
  std::vector<void*> ptrs;
  for (int i = 0; i < 4; ++i) {
    ts.push_back(block(kMiB));
    ptrs.push_back(ts.back().data_ptr());
  }
  ts.clear();  // frees 0, 1, 2, 3 in order; 0 no longer fits
  EXPECT_EQ(cpu_allocator_cache_stats().cached_bytes, 3 * kMiB);
  std::set<void*> handed_out;
  for (int i = 0; i < 3; ++i) {
    ts.push_back(block(kMiB));
    handed_out.insert(ts.back().data_ptr());
  }
  EXPECT_EQ(handed_out, (std::set<void*>{ptrs[1], ptrs[2], ptrs[3]}));
  EXPECT_EQ(cpu_allocator_cache_stats().cached_bytes, 0);

  // A block larger than the whole limit goes straight back to the OS.
  { at::Tensor huge = block(4 * kMiB); }
  EXPECT_EQ(cpu_allocator_cache_stats().cached_bytes, 0);
}

TEST_F(CPUAllocatorCache, EmptyReturnsEverything) {
  { at::Tensor a = block(kMiB), b = block(2 * kMiB); }
  EXPECT_EQ(cpu_allocator_cache_stats().cached_bytes, 3 * kMiB);
  empty_cpu_allocator_cache();
  EXPECT_EQ(cpu_allocator_cache_stats().cached_bytes, 0);
  const auto s0 = cpu_allocator_cache_stats();
  at::Tensor c = block(kMiB);
  EXPECT_EQ(cpu_allocator_cache_stats().misses - s0.misses, 1);
}

TEST_F(CPUAllocatorCache, TrackerCountsOnTopOfTheCache) {
  {
    HostMemoryTracker tracker;
    { at::Tensor t = block(kMiB); }
    at::Tensor u = block(kMiB);  // served from the cache, counted by the tracker
    EXPECT_EQ(tracker.allocated_bytes(), kMiB);
    EXPECT_EQ(tracker.peak_bytes(), kMiB);
  }
  // The tracker put the cache back.
  const auto s0 = cpu_allocator_cache_stats();
  { at::Tensor t = block(kMiB); }
  EXPECT_GT(cpu_allocator_cache_stats().hits + cpu_allocator_cache_stats().misses, s0.hits + s0.misses);
}

}  // namespace
}  // namespace megatron
