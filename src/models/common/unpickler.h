// The pickle inside a torch.save archive, read into IValues without running anything it names.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace megatron::models::common::detail {

// The storage an archive holds under data/<key>.
using StorageLookup = std::function<c10::Storage(const std::string& key)>;

// Reads a pickle of protocol 2 (torch.save's) to 4 (PyTorch Distributed Checkpoint's .metadata)
// into IValues: tensors over their storages, and the
// Python values Megatron-LM checkpoints carry as plain data: an object (argparse.Namespace, an
// enum, a numpy array) is a dict with "__class__", its attributes, and "__args__" / "__state__"
// where it has them; a bare global (a torch dtype) is its dotted name; bytes are a string.
// Anything else is one c10::Error naming `where` and the byte: an argument past the end, a memo
// index out of sequence, an opcode that needs more of the stack than there is, values nested
// over 1,000 deep or placed in themselves, a global from a module no checkpoint holds, a tensor
// past its storage.
c10::IValue unpickle(const uint8_t* data, size_t size, const StorageLookup& storage, const std::string& where);

}  // namespace megatron::models::common::detail
