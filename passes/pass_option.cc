#include "passes/pass_option.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "passes/pass.h"

namespace pw {

PassOptionBase::PassOptionBase(Pass* owner, std::string name, std::string description)
    : name_(std::move(name)), description_(std::move(description)) {
  owner->options_.push_back(this);
}

namespace option_detail {

Status Traits<bool>::Parse(std::string_view text, bool* out) {
  if (text == "true" || text == "1") {
    *out = true;
  } else if (text == "false" || text == "0") {
    *out = false;
  } else {
    return InvalidArgument("expected true or false, got '", text, "'");
  }
  return OkStatus();
}
std::string Traits<bool>::Print(bool value) { return value ? "true" : "false"; }

Status Traits<int64_t>::Parse(std::string_view text, int64_t* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  if (ec == std::errc::result_out_of_range)
    return InvalidArgument("integer out of range: '", text, "'");
  if (ec != std::errc() || ptr != end || text.empty())
    return InvalidArgument("expected an integer, got '", text, "'");
  return OkStatus();
}
std::string Traits<int64_t>::Print(int64_t value) { return std::to_string(value); }

Status Traits<int>::Parse(std::string_view text, int* out) {
  int64_t wide = 0;
  PW_RETURN_IF_ERROR(Traits<int64_t>::Parse(text, &wide));
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max())
    return InvalidArgument("integer out of range: '", text, "'");
  *out = static_cast<int>(wide);
  return OkStatus();
}
std::string Traits<int>::Print(int value) { return std::to_string(value); }

Status Traits<double>::Parse(std::string_view text, double* out) {
  // strtod accepts leading spaces and hex; from_chars is exact about the whole text.
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  if (ec != std::errc() || ptr != end || text.empty() || !std::isfinite(*out))
    return InvalidArgument("expected a number, got '", text, "'");
  return OkStatus();
}
std::string Traits<double>::Print(double value) {
  char buffer[64];
  auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);  // shortest exact
  return std::string(buffer, ptr);
}

Status Traits<std::string>::Parse(std::string_view text, std::string* out) {
  *out = std::string(text);
  return OkStatus();
}

std::string JoinTexts(const std::vector<std::string>& texts) {
  std::string joined;
  for (size_t i = 0; i < texts.size(); ++i) joined += (i ? ", " : "") + texts[i];
  return joined;
}

}  // namespace option_detail
}  // namespace pw
