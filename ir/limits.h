#pragma once
// Sizes pipeweave refuses before allocating anything for them. Each is far above what a
// real run uses and far below what would overflow a count or exhaust memory while
// planning; the error that refuses a value names the limit.

#include <cstdint>

namespace pw {

// Micro-batches per step: plans hold jobs per micro-batch and rank.
inline constexpr int64_t kMaxMicroBatches = 65536;
// Ranks in a mesh (dp * pp * mp), and each degree.
inline constexpr int64_t kMaxWorldSize = 65536;
// Jobs nested inside fused jobs: the loader, the writer and every walk over sub-jobs
// recurse, so the depth is bounded where a module is read and where it is written.
inline constexpr int kMaxJobNesting = 32;
// Bytes of one tensor (1 PiB): element counts times element sizes stay far from int64.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;
// Dimensions of one tensor.
inline constexpr int kMaxRank = 16;
// Bytes of one input file (module, schedule CSV, cost table, training text): an endless
// one (/dev/zero, a pipe that never closes) is refused instead of filling the memory.
inline constexpr int64_t kMaxInputFileBytes = int64_t{512} << 20;
// Bytes of all vars a module declares (each program's declarations counted): sums over a
// module, and a rank's memory over 65536 micro-batches, stay far from int64's limit.
inline constexpr int64_t kMaxModuleBytes = int64_t{1} << 52;
// Stage x micro-batch cells of one generated schedule: each holds at most three compute
// actions and their transfers, so the largest plans in seconds and a few GB.
inline constexpr int64_t kMaxScheduleCells = int64_t{1} << 24;
// One action's cost, in any unit: sums over the largest schedule stay finite, so every
// time the planners compare is a real time (they use infinity for "never").
inline constexpr double kMaxActionCost = 1e12;

}  // namespace pw
