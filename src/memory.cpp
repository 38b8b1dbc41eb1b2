#include "megatron/memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstring>
#include <mutex>
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

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

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

int64_t HostMemoryTracker::allocated_bytes() const { return g_allocated.load(); }
int64_t HostMemoryTracker::peak_bytes() const { return g_peak.load(); }
void HostMemoryTracker::reset_peak() { g_peak = g_allocated.load(); }

}  // namespace megatron
