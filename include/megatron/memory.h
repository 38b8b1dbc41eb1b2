// Host memory held by CPU tensors. While a HostMemoryTracker is alive, LibTorch's CPU allocator
// is wrapped by one that counts live bytes and their peak: on CPU ranks, what
// torch.cuda.max_memory_allocated() tells on a GPU (e.g. the activations a schedule keeps).
#pragma once

#include <cstdint>

namespace c10 {
struct Allocator;
}

namespace megatron {

class HostMemoryTracker {
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

}  // namespace megatron
