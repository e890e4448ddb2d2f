#pragma once
// What a schedule generator is asked for: the kind, the synthetic pipeline shape (stages,
// ranks, placement, micro-batches) and, for the cost-aware kinds, the costs and the
// memory limit. Validate() states every kind's constraints as one-line errors.

#include <string>
#include <string_view>
#include <vector>

#include "ir/status.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline {

enum class ScheduleKind {
  kFThenB,           // GPipe: every forward, then every backward
  k1F1B,             // PipeDream-flush / Megatron 1F1B
  kEager1F1B,        // stage s runs min(M, 2(P-s)-1) forwards before its first backward
  kInterleaved1F1B,  // Megatron's virtual stages (loop placement, V chunks per rank)
  kZbH1,             // Zero Bubble H1 (PyTorch's ZB1P for V > 1): 1F1B memory, W deferred
  kZbH2,             // Zero Bubble H2: 2P-1 warm-up forwards, W fills the bubbles
  kZbV,              // Zero Bubble V (two chunks per rank in a V)
  kDualPipeV,        // DeepSeek's DualPipeV as PyTorch builds it (OVERLAP_F_B actions)
  kZbAuto,           // searches heuristic schedules for the lowest makespan within memory
  kCsv,              // the user's own schedule from a PyTorch CSV
};

StatusOr<ScheduleKind> ParseScheduleKind(std::string_view name);
const char* ScheduleKindName(ScheduleKind kind);
std::string ScheduleKindList();  // "fthenb, 1f1b, ..." for error messages

using Placement = StagePlacement;

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::k1F1B;
  int num_stages = 4;
  int num_ranks = 4;
  int num_micro_batches = 8;
  Placement placement = Placement::kLoop;
  ActionCosts costs;     // used by zb-h2 and zb-auto
  double mem_limit = 0;  // M_B per rank; 0: the kind's default
  std::string csv_file;  // kind csv

  int chunks() const { return num_ranks > 0 ? num_stages / num_ranks : 0; }
  std::vector<int> StageToRank() const;
};

// The default placement of a kind: `v` for zb-v and dualpipe-v, `loop` otherwise.
Placement DefaultPlacement(ScheduleKind kind);

// M >= P where a kind needs it, Megatron's interleaving constraint (M a multiple of P),
// two chunks per rank for the V kinds, stages divisible by ranks, ...
Status Validate(const ScheduleSpec& spec);

}  // namespace pw::pipeline
