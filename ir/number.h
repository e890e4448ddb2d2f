#pragma once
// The one parser for numbers in flags, pass options and table files. Every value is
// parsed exactly (the whole text, no leading spaces, no hex), range-checked before it is
// stored (no silent wrap to int32), and a floating-point value must be finite.
// Errors say what was expected: "expected an integer in [1, 65536], got '4294967297'".

#include <cstdint>
#include <limits>
#include <string_view>

#include "ir/status.h"

namespace pw {

inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
inline constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

StatusOr<int64_t> ParseInteger(std::string_view text, int64_t min = kInt64Min,
                               int64_t max = kInt64Max);
// NaN and infinities are refused whatever the range.
StatusOr<double> ParseReal(std::string_view text, double min = -std::numeric_limits<double>::max(),
                           double max = std::numeric_limits<double>::max());

}  // namespace pw
