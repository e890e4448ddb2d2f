#pragma once
// The named stream types an op's `stream` attribute picks from: one vocabulary for the
// passes that assign streams, the simulator that replays them and the executor whose
// backends map each type in use to one of their streams (a worker thread on the CPU, a
// cudaStream on CUDA).

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
inline bool IsCommStream(StreamType type) { return type != StreamType::kCompute; }

// "compute", "mp_comm", "pp_send", "pp_recv", "dp_comm".
const char* StreamTypeName(StreamType type);
// The empty name is "compute"; an unknown name is an error listing the valid ones.
StatusOr<StreamType> ParseStreamType(std::string_view name);

// How urgently a backend should run a stream's work when streams compete for the device:
// 0 is the lowest. Communication ranks above compute, so that a collective issued beside
// a long kernel starts at once instead of queueing behind its blocks (the CUDA backend maps
// the levels onto cudaStream priorities).
inline constexpr int kMaxStreamPriority = 1;
int StreamPriority(StreamType type);

}  // namespace pw
