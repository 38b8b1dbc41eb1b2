// A read from a memory-mapped data file that was truncated after it was mapped raises SIGBUS.
// The mapped ranges are registered here; the SIGBUS handler names the file the faulting address
// belongs to in one line ("program: error: ...") and exits 1, instead of a bare "Bus error".
// Faults outside every registered range keep the default action.
#pragma once

#include <cstddef>
#include <string>

namespace megatron::datasets::detail {

// Returns a slot for unregister_mapping, or -1 when the table is full (the file is then read
// without the named error).
int register_mapping(const void* data, size_t size, const std::string& path);
void unregister_mapping(int slot);

}  // namespace megatron::datasets::detail
