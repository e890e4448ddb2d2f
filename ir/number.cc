#include "ir/number.h"

#include <charconv>
#include <cmath>

namespace pw {
namespace {

std::string RangeText(int64_t min, int64_t max) {
  if (min == kInt64Min && max == kInt64Max) return "";
  if (max == kInt64Max) return StrCat(" >= ", min);
  return StrCat(" in [", min, ", ", max, "]");
}

std::string RangeText(double min, double max) {
  constexpr double kHuge = std::numeric_limits<double>::max();
  if (min == -kHuge && max == kHuge) return "";
  if (max == kHuge) return StrCat(" >= ", min);
  return StrCat(" in [", min, ", ", max, "]");
}

}  // namespace

StatusOr<int64_t> ParseInteger(std::string_view text, int64_t min, int64_t max) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  // from_chars takes no '+'; accept it as people write it.
  std::string_view digits = !text.empty() && text[0] == '+' ? text.substr(1) : text;
  auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  bool whole = !digits.empty() && ptr == end;
  if ((ec != std::errc() && ec != std::errc::result_out_of_range) || !whole)
    return InvalidArgument("expected an integer", RangeText(min, max), ", got '", text, "'");
  if (ec == std::errc::result_out_of_range || value < min || value > max)
    return InvalidArgument("expected an integer", RangeText(min, max), ", got '", text,
                           "' (out of range)");
  return value;
}

StatusOr<double> ParseReal(std::string_view text, double min, double max) {
  double value = 0;
  const char* end = text.data() + text.size();
  std::string_view digits = !text.empty() && text[0] == '+' ? text.substr(1) : text;
  auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (ec != std::errc() || digits.empty() || ptr != end || !std::isfinite(value))
    return InvalidArgument("expected a finite number", RangeText(min, max), ", got '", text, "'");
  if (value < min || value > max)
    return InvalidArgument("expected a number", RangeText(min, max), ", got '", text,
                           "' (out of range)");
  return value;
}

}  // namespace pw
