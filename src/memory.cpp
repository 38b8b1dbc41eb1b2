#include "megatron/memory.h"

#include "build_config.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <sys/mman.h>

#if MEGATRON_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace megatron {
namespace {

std::atomic<int64_t> g_allocated{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};

// Blocks are looked up by address when freed: LibTorch's raw_allocate() path needs the
// DataPtr's context to be the data pointer itself.
struct Block {
  c10::DataPtr inner;
  int64_t bytes;
};
std::mutex g_mutex;
std::unordered_map<void*, Block>* g_blocks = new std::unordered_map<void*, Block>();  // outlives exit
c10::Allocator* g_base = nullptr;

void free_block(void* data) {
  Block block;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_blocks->find(data);
    if (it == g_blocks->end()) {
      // Allocated before tracking began, freed through raw_deallocate on this allocator.
      g_base->raw_deleter()(data);
      return;
    }
    block = std::move(it->second);
    g_blocks->erase(it);
  }
  g_allocated.fetch_sub(block.bytes);
}  // block.inner frees the memory here

class CountingAllocator final : public c10::Allocator {
 public:
  void set_base(c10::Allocator* base) {
    base_ = base;
    g_base = base;
  }

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    if (data == nullptr) return inner;  // zero bytes
    const c10::Device device = inner.device();
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_blocks->emplace(data, Block{std::move(inner), static_cast<int64_t>(n)});
    }
    const int64_t now = g_allocated.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
    return c10::DataPtr(data, data, &free_block, device);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

 private:
  c10::Allocator* base_ = nullptr;
};

CountingAllocator g_counting;
constexpr uint8_t kPriority = 200;  // above LibTorch's default CPU allocator

}  // namespace

HostMemoryTracker::HostMemoryTracker() : previous_(c10::GetCPUAllocator()) {
  TORCH_CHECK(!g_installed.exchange(true), "[memory] a HostMemoryTracker is already installed");
  g_counting.set_base(previous_);
  g_allocated = 0;
  g_peak = 0;
  c10::SetCPUAllocator(&g_counting, kPriority);
}

HostMemoryTracker::~HostMemoryTracker() {
  c10::SetCPUAllocator(previous_, kPriority);
  g_installed = false;
}

int64_t HostMemoryTracker::allocated_bytes() const {
  return g_allocated.load();
}
int64_t HostMemoryTracker::peak_bytes() const {
  return g_peak.load();
}
void HostMemoryTracker::reset_peak() {
  g_peak = g_allocated.load();
}

}  // namespace megatron

// --- CPU allocator cache -----------------------------------------------------------------------

namespace megatron {
namespace {

constexpr size_t kMinCachedBytes = 16 << 10;  // smaller blocks come from malloc's free lists
constexpr size_t kRound = 4 << 10;            // one page
constexpr int64_t kDefaultMaxCachedBytes = 8LL << 30;

constexpr size_t kHugePage = 2 << 20;

// Blocks of 2 MiB or more are aligned to, and advised into, transparent huge pages: a cached
// block's pages are touched every step, and huge pages spare the GEMMs most TLB misses. The
// others start on a page, so that a tensor's alignment never depends on what was freed before.
void* os_alloc(size_t size) {
  const size_t align = size >= kHugePage ? kHugePage : kRound;
  void* data = nullptr;
  TORCH_CHECK(posix_memalign(&data, align, size) == 0 && data != nullptr,
              "[memory] CPU allocator cache: out of memory allocating ", size, " bytes");
  if (align == kHugePage) madvise(data, size, MADV_HUGEPAGE);
  return data;
}

class CachingCPUAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (n < kMinCachedBytes) return base_->allocate(n);
    const size_t size = (n + kRound - 1) / kRound * kRound;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        void* data = it->second->data;
        lru_.erase(it->second);
        free_.erase(it);
        stats_.cached_bytes -= static_cast<int64_t>(size);
        ++stats_.hits;
        return hand_out(data, size);
      }
      ++stats_.misses;
    }
    void* data = os_alloc(size);  // throws on failure, outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    return hand_out(data, size);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  void install(int64_t max_cached_bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (max_cached_bytes >= 0) max_cached_bytes_ = max_cached_bytes;
    if (base_ == nullptr) {
      TORCH_CHECK(!g_installed,
                  "[memory] enable the CPU allocator cache before a HostMemoryTracker, "
                  "not while one is installed");
      base_ = c10::GetCPUAllocator();
      c10::SetCPUAllocator(this, kPriority);
    }
  }
  bool installed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return base_ != nullptr;
  }

  void empty() {
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& b : lru_) blocks.push_back(b.data);
      lru_.clear();
      free_.clear();
      stats_.cached_bytes = 0;
    }
    for (void* b : blocks) std::free(b);
  }

  CPUAllocatorCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  static void free_block(void* data);

 private:
  // Called with mutex_ held.
  c10::DataPtr hand_out(void* data, size_t size) {
    live_.emplace(data, size);
    stats_.allocated_bytes += static_cast<int64_t>(size);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    return c10::DataPtr(data, data, &free_block, c10::Device(c10::kCPU));
  }

  struct Cached {
    void* data;
    size_t size;
  };

  void release(void* data) {
    std::vector<void*> to_os;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(data);
      if (it == live_.end()) {
        // raw_allocate()d before the cache was installed, raw_deallocate()d through it now.
        base_->raw_deleter()(data);
        return;
      }
      const size_t size = it->second;
      live_.erase(it);
      stats_.allocated_bytes -= static_cast<int64_t>(size);
      if (static_cast<int64_t>(size) > max_cached_bytes_) {
        to_os.push_back(data);
      } else {
        lru_.push_back({data, size});
        free_.emplace(size, std::prev(lru_.end()));
        stats_.cached_bytes += static_cast<int64_t>(size);
        // The least recently freed blocks make room: sizes no longer requested age out.
        while (stats_.cached_bytes > max_cached_bytes_) {
          const Cached oldest = lru_.front();
          auto range = free_.equal_range(oldest.size);
          for (auto f = range.first; f != range.second; ++f)
            if (f->second == lru_.begin()) {
              free_.erase(f);
              break;
            }
          lru_.pop_front();
          stats_.cached_bytes -= static_cast<int64_t>(oldest.size);
          to_os.push_back(oldest.data);
        }
      }
    }
    for (void* b : to_os) std::free(b);
  }

  mutable std::mutex mutex_;
  c10::Allocator* base_ = nullptr;
  int64_t max_cached_bytes_ = kDefaultMaxCachedBytes;
  std::unordered_map<void*, size_t> live_;
  std::list<Cached> lru_;  // front: freed longest ago
  std::multimap<size_t, std::list<Cached>::iterator> free_;
  CPUAllocatorCacheStats stats_;
};

// Never destroyed: tensors may be freed during static destruction.
CachingCPUAllocator& caching_allocator() {
  static auto* a = new CachingCPUAllocator();
  return *a;
}

void CachingCPUAllocator::free_block(void* data) {
  caching_allocator().release(data);
}

}  // namespace

void enable_cpu_allocator_cache(int64_t max_cached_bytes) {
  caching_allocator().install(max_cached_bytes);
}
bool cpu_allocator_cache_enabled() {
  return caching_allocator().installed();
}
void empty_cpu_allocator_cache() {
  caching_allocator().empty();
}
CPUAllocatorCacheStats cpu_allocator_cache_stats() {
  return caching_allocator().stats();
}

void empty_unused_memory(c10::Device device) {
#if MEGATRON_WITH_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::emptyCache();
    return;
  }
#endif
  if (device.is_cpu()) empty_cpu_allocator_cache();
}

std::optional<int64_t> available_memory_bytes(c10::Device device) {
#if MEGATRON_WITH_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDAGuard guard(device.has_index() ? device.index() : 0);
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return std::nullopt;
    return static_cast<int64_t>(free);
  }
#endif
  if (!device.is_cpu()) return std::nullopt;
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::nullopt;
}

std::optional<DeviceMemoryStats> device_memory_stats(c10::Device device) {
#if MEGATRON_WITH_CUDA
  if (!device.is_cuda()) return std::nullopt;
  namespace alloc = c10::cuda::CUDACachingAllocator;
  const auto stats = alloc::getDeviceStats(device.has_index() ? device.index() : 0);
  const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return DeviceMemoryStats{stats.allocated_bytes[all].current, stats.allocated_bytes[all].peak,
                           stats.reserved_bytes[all].current, stats.reserved_bytes[all].peak};
#else
  (void)device;
  return std::nullopt;
#endif
}

}  // namespace megatron
