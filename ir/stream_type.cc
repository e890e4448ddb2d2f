#include "ir/stream_type.h"

namespace pw {

const char* StreamTypeName(StreamType type) {
  switch (type) {
    case StreamType::kCompute:
      return "compute";
    case StreamType::kMpComm:
      return "mp_comm";
    case StreamType::kPpSend:
      return "pp_send";
    case StreamType::kPpRecv:
      return "pp_recv";
    case StreamType::kDpComm:
      return "dp_comm";
    case StreamType::kMpFwdComm:
      return "mp_fwd_comm";
  }
  return "?";
}

StatusOr<StreamType> ParseStreamType(std::string_view name) {
  if (name.empty()) return StreamType::kCompute;
  for (StreamType type : kAllStreamTypes)
    if (name == StreamTypeName(type)) return type;
  return InvalidArgument("unknown stream type '", name,
                         "' (expected compute, mp_comm, pp_send, pp_recv, dp_comm or mp_fwd_comm)");
}

int StreamPriority(StreamType type) {
  if (type == StreamType::kCompute) return 0;
  return type == StreamType::kMpFwdComm ? 1 : 2;
}

}  // namespace pw
