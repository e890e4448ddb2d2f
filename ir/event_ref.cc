#include "ir/event_ref.h"

#include <charconv>

namespace pw {

StatusOr<EventRef> ParseEventRef(std::string_view text) {
  EventRef ref;
  size_t at = text.rfind('@');
  ref.name = std::string(text.substr(0, at));
  if (ref.name.empty()) return InvalidArgument("event reference '", text, "' has no name");
  if (at == std::string_view::npos) return ref;

  std::string_view suffix = text.substr(at + 1);
  bool sign = !suffix.empty() && (suffix[0] == '+' || suffix[0] == '-');
  std::string_view digits = sign ? suffix.substr(1) : suffix;
  int value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
    return InvalidArgument("event reference '", text,
                           "': expected NAME, NAME@+K, NAME@-K or NAME@K after '@'");
  ref.relative = sign;
  ref.offset = sign && suffix[0] == '-' ? -value : value;
  return ref;
}

}  // namespace pw
