#include "passes/pass_option.h"

#include <charconv>
#include <limits>

#include "ir/number.h"
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

// Numbers go through the one parser of ir/number.h, as flags do.
Status Traits<int64_t>::Parse(std::string_view text, int64_t* out) {
  PW_ASSIGN_OR_RETURN(*out, ParseInteger(text));
  return OkStatus();
}
std::string Traits<int64_t>::Print(int64_t value) { return std::to_string(value); }

Status Traits<int>::Parse(std::string_view text, int* out) {
  PW_ASSIGN_OR_RETURN(int64_t wide, ParseInteger(text, std::numeric_limits<int>::min(),
                                                 std::numeric_limits<int>::max()));
  *out = static_cast<int>(wide);
  return OkStatus();
}
std::string Traits<int>::Print(int value) { return std::to_string(value); }

Status Traits<double>::Parse(std::string_view text, double* out) {
  PW_ASSIGN_OR_RETURN(*out, ParseReal(text));
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
