#include "executor/crc32c.h"

#include <array>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace pw {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78;  // reflected Castagnoli polynomial

// tables[k][b]: the CRC of byte b followed by k zero bytes.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (c & 1 ? kPolynomial : 0);
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}

const Tables& CrcTables() {
  static const Tables tables = MakeTables();
  return tables;
}

}  // namespace

uint32_t PortableCrc32c(uint32_t crc, const void* data, size_t size) {
  const Tables& t = CrcTables();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    // The tables assume little-endian words, as on every machine pipeweave runs on.
    word ^= crc;
    crc = t[7][word & 0xff] ^ t[6][(word >> 8) & 0xff] ^ t[5][(word >> 16) & 0xff] ^
          t[4][(word >> 24) & 0xff] ^ t[3][(word >> 32) & 0xff] ^ t[2][(word >> 40) & 0xff] ^
          t[1][(word >> 48) & 0xff] ^ t[0][word >> 56];
  }
  for (; size > 0; --size, ++p) crc = (crc >> 8) ^ t[0][(crc ^ *p) & 0xff];
  return ~crc;
}

namespace {

#if defined(__x86_64__)
// SSE 4.2's crc32 instruction computes the same polynomial, several times faster.
__attribute__((target("sse4.2"))) uint32_t HardwareCrc32c(uint32_t crc, const void* data,
                                                          size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; size > 0; --size, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}
#endif

}  // namespace

uint32_t Crc32c(uint32_t crc, const void* data, size_t size) {
#if defined(__x86_64__)
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  if (hardware) return HardwareCrc32c(crc, data, size);
#endif
  return PortableCrc32c(crc, data, size);
}

std::string Crc32cHex(uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", crc);
  return buf;
}

}  // namespace pw
