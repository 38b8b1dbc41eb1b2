// Host memory held by CPU tensors.
// - HostMemoryTracker: while alive, LibTorch's CPU allocator is wrapped by one that counts live
//   bytes and their peak: on CPU ranks, what torch.cuda.max_memory_allocated() tells on a GPU.
// - CPU allocator cache: freed blocks are kept for the next allocation of the same size, as the
//   CUDA caching allocator does on a GPU.
#pragma once

#include "megatron/export.h"

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

namespace c10 {
struct Allocator;
}

namespace megatron {

class MEGATRON_API HostMemoryTracker {
 public:
  HostMemoryTracker();   // one at a time per process
  ~HostMemoryTracker();  // the previous allocator again; counted blocks stay counted until freed
  HostMemoryTracker(const HostMemoryTracker&) = delete;
  HostMemoryTracker& operator=(const HostMemoryTracker&) = delete;

  // Bytes of the blocks allocated since the tracker was installed and not yet freed.
  int64_t allocated_bytes() const;
  int64_t peak_bytes() const;
  void reset_peak();  // the peak starts again from what is allocated now

 private:
  c10::Allocator* previous_;
};

// A training step allocates the same activation and gradient sizes every iteration. Without a
// cache each large block comes fresh from the OS and costs a zero-filled page fault per 4 KiB, a
// sixth of a CPU step's time for GPT-2 124M. Blocks of at least kMinCachedBytes are kept when
// freed and handed out again for a request of the same rounded size. The cache holds at most
// max_cached_bytes; beyond that the least recently freed blocks go back to the OS.
struct MEGATRON_API CPUAllocatorCacheStats {
  int64_t cached_bytes = 0;          // freed, kept for reuse
  int64_t allocated_bytes = 0;       // handed out by the cache's allocator and not yet freed
  int64_t peak_allocated_bytes = 0;  // the most allocated_bytes has been
  int64_t hits = 0;                  // requests served from the cache
  int64_t misses = 0;                // requests that went to the OS
};

// Installs the cache as LibTorch's CPU allocator (idempotent). max_cached_bytes < 0 keeps the
// current limit (default: 8 GiB).
MEGATRON_API void enable_cpu_allocator_cache(int64_t max_cached_bytes = -1);
MEGATRON_API bool cpu_allocator_cache_enabled();
MEGATRON_API void empty_cpu_allocator_cache();  // returns every cached block to the OS
MEGATRON_API CPUAllocatorCacheStats cpu_allocator_cache_stats();

// The CUDA caching allocator's counters of one GPU, in bytes (Megatron-LM's report_memory);
// nullopt for a CPU device or a build without CUDA.
struct MEGATRON_API DeviceMemoryStats {
  int64_t allocated = 0, max_allocated = 0, reserved = 0, max_reserved = 0;
};
MEGATRON_API std::optional<DeviceMemoryStats> device_memory_stats(c10::Device device);

// Returns the unused blocks the allocator of `device` keeps (the CUDA caching allocator's, or the
// CPU allocator cache's) to the system: --empty-unused-memory-level.
MEGATRON_API void empty_unused_memory(c10::Device device);

// Bytes free for new allocations: the GPU's free memory, or the host's MemAvailable for a CPU
// device; nullopt when it cannot be told.
MEGATRON_API std::optional<int64_t> available_memory_bytes(c10::Device device);

}  // namespace megatron
