#pragma once
// The named stream types an op's `stream` attribute picks from. Every backend maps each
// type in use to one of its streams (a worker thread on the CPU, a cudaStream on CUDA).

#include <array>
#include <cstdint>
#include <string_view>

#include "ir/status.h"

namespace pw {

enum class StreamType : uint8_t { kCompute = 0, kMpComm, kPpSend, kPpRecv, kDpComm };

inline constexpr int kNumStreamTypes = 5;
inline constexpr std::array<StreamType, kNumStreamTypes> kAllStreamTypes = {
    StreamType::kCompute, StreamType::kMpComm, StreamType::kPpSend, StreamType::kPpRecv,
    StreamType::kDpComm};

inline int StreamIndex(StreamType type) { return static_cast<int>(type); }

// "compute", "mp_comm", "pp_send", "pp_recv", "dp_comm".
const char* StreamTypeName(StreamType type);
// The empty name is "compute"; an unknown name is an error listing the valid ones.
StatusOr<StreamType> ParseStreamType(std::string_view name);

}  // namespace pw
