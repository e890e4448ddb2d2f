// The one number parser (ir/number.h) and the tensor size limits (ir/tensor_size.h).
#include "ir/number.h"

#include <gtest/gtest.h>

#include "ir/tensor_size.h"

namespace pw {
namespace {

TEST(ParseInteger, TakesWholeDecimalTextInRange) {
  EXPECT_EQ(*ParseInteger("42"), 42);
  EXPECT_EQ(*ParseInteger("+7"), 7);
  EXPECT_EQ(*ParseInteger("-3"), -3);
  EXPECT_EQ(*ParseInteger("9223372036854775807"), kInt64Max);
  EXPECT_EQ(*ParseInteger("65536", 1, 65536), 65536);
}

TEST(ParseInteger, RefusesWhatWouldWrapOrIsNotAnInteger) {
  EXPECT_EQ(ParseInteger("4294967297", 1, 65536).status().message(),
            "expected an integer in [1, 65536], got '4294967297' (out of range)");
  EXPECT_EQ(ParseInteger("2147483648", 0, kInt32Max).status().message(),
            "expected an integer in [0, 2147483647], got '2147483648' (out of range)");
  EXPECT_EQ(ParseInteger("99999999999999999999").status().message(),
            "expected an integer, got '99999999999999999999' (out of range)");
  EXPECT_EQ(ParseInteger("-1", 0).status().message(),
            "expected an integer >= 0, got '-1' (out of range)");
  for (const char* bad : {"", " 1", "1 ", "0x10", "1e3", "2.5", "+", "nan", "--1"})
    EXPECT_FALSE(ParseInteger(bad).ok()) << bad;
}

TEST(ParseReal, RefusesNanInfinityAndOverflow) {
  EXPECT_DOUBLE_EQ(*ParseReal("1e-3"), 1e-3);
  EXPECT_DOUBLE_EQ(*ParseReal("+2.5"), 2.5);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "1e999", "", "1.0x", " 1"})
    EXPECT_EQ(ParseReal(bad).status().message(),
              std::string("expected a finite number, got '") + bad + "'")
        << bad;
  EXPECT_EQ(ParseReal("-0.5", 0).status().message(),
            "expected a number >= 0, got '-0.5' (out of range)");
}

TEST(TensorFits, CountsBytesWithoutOverflow) {
  EXPECT_TRUE(TensorFits(DataType::kFloat32, {}));
  EXPECT_TRUE(TensorFits(DataType::kFloat32, {1024, 1024, 1024}));
  EXPECT_TRUE(TensorFits(DataType::kFloat32, {0, int64_t{1} << 62}));  // no elements
  EXPECT_FALSE(TensorFits(DataType::kFloat32, {int64_t{1} << 62, 24}));
  EXPECT_FALSE(TensorFits(DataType::kInt64, {int64_t{1} << 47, 16}));  // 2^54 bytes
  EXPECT_FALSE(TensorFits(DataType::kFloat32, {2, -1}));
  EXPECT_FALSE(TensorFits(DataType::kFloat32, Shape(17, 1)));
}

}  // namespace
}  // namespace pw
