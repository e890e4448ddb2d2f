#include "ir/stream_spin.h"

#include <cstdlib>
#include <string>

namespace pw {

StatusOr<StreamSpin> StreamSpinFromEnv() {
  const char* value = std::getenv("PW_STREAM_SPIN");
  if (value == nullptr || *value == '\0') return StreamSpin::kAdaptive;
  const std::string v = value;
  if (v == "adaptive") return StreamSpin::kAdaptive;
  if (v == "short") return StreamSpin::kShort;
  if (v == "block") return StreamSpin::kBlock;
  return InvalidArgument("PW_STREAM_SPIN='", v, "': expected adaptive, short or block");
}

StreamSpin ProcessStreamSpin() {
  static const StreamSpin spin = [] {
    StatusOr<StreamSpin> s = StreamSpinFromEnv();
    return s.ok() ? *s : StreamSpin::kAdaptive;
  }();
  return spin;
}

}  // namespace pw
