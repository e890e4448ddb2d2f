#pragma once
// CRC-32C (Castagnoli), the checksum of checkpoint files: it catches truncation and any
// burst of flipped bits, and runs at gigabytes per second (slicing by 8 bytes).

#include <cstddef>
#include <cstdint>
#include <string>

namespace pw {

// Extends `crc` (0 to start) over `size` bytes.
uint32_t Crc32c(uint32_t crc, const void* data, size_t size);
// The table-driven computation, which Crc32c uses where the CPU has no crc32 instruction.
// Exposed for tests.
uint32_t PortableCrc32c(uint32_t crc, const void* data, size_t size);
// 8 lower-case hex digits, as manifests print it.
std::string Crc32cHex(uint32_t crc);

}  // namespace pw
