// CRC-32 (IEEE 802.3, the zlib / zip / PNG one), table-driven eight bytes at a time: checkpoint
// files carry it so that a flipped byte is found on load. Kept here rather than taken from zlib
// so that machines without zlib's development files build too.
#pragma once

#include <cstddef>
#include <cstdint>

namespace megatron::training {

// crc32_update(0, data, n) is the CRC of data; feed later pieces with the value returned.
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

}  // namespace megatron::training
