// The checkpoint checksum: CRC-32C's published check value, pieces that extend a sum, and
// the instruction path equal to the table one on every length.
#include "executor/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace pw {
namespace {

TEST(Crc32c, MatchesTheCheckValue) {
  EXPECT_EQ(Crc32c(0, "123456789", 9), 0xe3069283u);
  EXPECT_EQ(PortableCrc32c(0, "123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32cHex(0xe3069283u), "e3069283");
}

TEST(Crc32c, ExtendsAcrossPiecesAndAgreesWithTheTables) {
  std::mt19937 rng(7);
  std::vector<unsigned char> bytes(4099);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  for (size_t n : {0, 1, 7, 8, 9, 63, 64, 4099}) {
    const uint32_t whole = Crc32c(0, bytes.data(), n);
    EXPECT_EQ(whole, PortableCrc32c(0, bytes.data(), n)) << n;
    const size_t half = n / 2;
    EXPECT_EQ(whole, Crc32c(Crc32c(0, bytes.data(), half), bytes.data() + half, n - half)) << n;
  }
}

}  // namespace
}  // namespace pw
