// The structure of a torch.save pickle, checked before LibTorch's unpickler reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace megatron::models::common::detail {

// Refuses (c10::Error naming `where` and the byte) a pickle that LibTorch's unpickler would
// misread: an argument past the end, a memo index out of sequence, an opcode that needs more of
// the stack than there is, a global a checkpoint never holds.
void check_pickle(const uint8_t* data, size_t size, const std::string& where);

}  // namespace megatron::models::common::detail
