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

// kMpFwdComm carries the forward program's tensor-parallel collectives when forward and
// backward communication are kept apart (overlap-1f1b), so that the backward's, which the
// pipeline waits on sooner, go first.
enum class StreamType : uint8_t { kCompute = 0, kMpComm, kPpSend, kPpRecv, kDpComm, kMpFwdComm };

inline constexpr int kNumStreamTypes = 6;
inline constexpr std::array<StreamType, kNumStreamTypes> kAllStreamTypes = {
    StreamType::kCompute, StreamType::kMpComm, StreamType::kPpSend,
    StreamType::kPpRecv,  StreamType::kDpComm, StreamType::kMpFwdComm};

inline int StreamIndex(StreamType type) { return static_cast<int>(type); }
inline bool IsCommStream(StreamType type) { return type != StreamType::kCompute; }

// "compute", "mp_comm", "pp_send", "pp_recv", "dp_comm", "mp_fwd_comm".
const char* StreamTypeName(StreamType type);
// The empty name is "compute"; an unknown name is an error listing the valid ones.
StatusOr<StreamType> ParseStreamType(std::string_view name);

// How urgently a backend should run a stream's work when streams compete for the device:
// 0 is the lowest. Communication ranks above compute, so that a collective issued beside
// a long kernel starts at once instead of queueing behind its blocks, and forward
// tensor-parallel communication below the rest (the CUDA backend maps the levels onto
// cudaStream priorities).
inline constexpr int kMaxStreamPriority = 2;
int StreamPriority(StreamType type);

}  // namespace pw
