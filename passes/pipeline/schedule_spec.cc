#include "passes/pipeline/schedule_spec.h"

#include <algorithm>

#include "ir/action.h"
#include "ir/limits.h"

namespace pw::pipeline {

namespace {
constexpr struct {
  std::string_view name;
  ScheduleKind kind;
} kKinds[] = {
    {"fthenb", ScheduleKind::kFThenB},
    {"1f1b", ScheduleKind::k1F1B},
    {"eager-1f1b", ScheduleKind::kEager1F1B},
    {"interleaved-1f1b", ScheduleKind::kInterleaved1F1B},
    {"zb-h1", ScheduleKind::kZbH1},
    {"zb-h2", ScheduleKind::kZbH2},
    {"zb-v", ScheduleKind::kZbV},
    {"dualpipe-v", ScheduleKind::kDualPipeV},
    {"zb-auto", ScheduleKind::kZbAuto},
    {"csv", ScheduleKind::kCsv},
};
}  // namespace

StatusOr<ScheduleKind> ParseScheduleKind(std::string_view name) {
  for (const auto& k : kKinds)
    if (k.name == name) return k.kind;
  return InvalidArgument("unknown schedule kind '", name, "' (known: ", ScheduleKindList(), ")");
}

const char* ScheduleKindName(ScheduleKind kind) {
  for (const auto& k : kKinds)
    if (k.kind == kind) return k.name.data();
  return "?";
}

std::string ScheduleKindList() {
  std::string out;
  for (const auto& k : kKinds) {
    if (!out.empty()) out += ", ";
    out += k.name;
  }
  return out;
}

Placement DefaultPlacement(ScheduleKind kind) {
  return kind == ScheduleKind::kZbV || kind == ScheduleKind::kDualPipeV ? Placement::kV
                                                                        : Placement::kLoop;
}

std::vector<int> ScheduleSpec::StageToRank() const {
  return PlaceStages(placement, num_stages, num_ranks);
}

Status Validate(const ScheduleSpec& s) {
  const char* kind = ScheduleKindName(s.kind);
  if (s.kind == ScheduleKind::kCsv) return OkStatus();
  if (s.num_stages < 1 || s.num_ranks < 1 || s.num_micro_batches < 1)
    return InvalidArgument("stages, ranks and micro-batches must be at least 1");
  if (s.num_stages > 32767) return InvalidArgument("at most 32767 stages");
  if (s.num_micro_batches > kMaxMicroBatches)
    return InvalidArgument("at most ", kMaxMicroBatches, " micro-batches (got ",
                           s.num_micro_batches, ")");
  if (int64_t{s.num_stages} * s.num_micro_batches > kMaxScheduleCells)
    return InvalidArgument(s.num_stages, " stages x ", s.num_micro_batches,
                           " micro-batches is more than ", kMaxScheduleCells,
                           " stage micro-batches in one schedule");
  if (s.num_stages % s.num_ranks != 0)
    return InvalidArgument(s.num_stages, " stages do not divide evenly over ", s.num_ranks,
                           " ranks");
  const int P = s.num_ranks, M = s.num_micro_batches, V = s.chunks();
  auto one_stage_per_rank = [&]() -> Status {
    if (V != 1)
      return InvalidArgument(kind, " runs one stage per rank, but ", s.num_stages, " stages on ", P,
                             " ranks give ", V, " (use interleaved-1f1b or zb-h1 for several)");
    return OkStatus();
  };
  auto needs_m_ge_p = [&]() -> Status {
    if (M < P)
      return InvalidArgument(kind, " needs at least as many micro-batches as ranks (", M, " < ", P,
                             ")");
    return OkStatus();
  };
  switch (s.kind) {
    case ScheduleKind::kFThenB:
    case ScheduleKind::kZbAuto:
    case ScheduleKind::kCsv:
      break;
    case ScheduleKind::k1F1B:
      PW_RETURN_IF_ERROR(one_stage_per_rank());
      PW_RETURN_IF_ERROR(needs_m_ge_p());
      break;
    case ScheduleKind::kEager1F1B:
      PW_RETURN_IF_ERROR(one_stage_per_rank());
      break;
    case ScheduleKind::kZbH2:
      PW_RETURN_IF_ERROR(one_stage_per_rank());
      PW_RETURN_IF_ERROR(needs_m_ge_p());
      break;
    case ScheduleKind::kInterleaved1F1B:
      if (s.placement != Placement::kLoop)
        return InvalidArgument("interleaved-1f1b uses the loop placement");
      PW_RETURN_IF_ERROR(needs_m_ge_p());
      if (V > 1 && M % P != 0)
        return InvalidArgument("interleaved-1f1b needs the micro-batches to be a multiple of ",
                               "the ranks (Megatron's constraint): ", M, " % ", P, " = ", M % P);
      break;
    case ScheduleKind::kZbH1: {
      if (s.placement != Placement::kLoop) return InvalidArgument("zb-h1 uses the loop placement");
      PW_RETURN_IF_ERROR(needs_m_ge_p());
      int rounds = std::max(1, M / P);
      if (V > 1 && M % rounds != 0)
        return InvalidArgument("zb-h1 with ", V, " chunks needs the micro-batches to be a ",
                               "multiple of the rounds M/P = ", rounds, ", got ", M);
      break;
    }
    case ScheduleKind::kZbV:
    case ScheduleKind::kDualPipeV:
      if (V != 2)
        return InvalidArgument(kind, " needs exactly two stages per rank (stages = 2 * ranks), ",
                               "got ", s.num_stages, " stages on ", P, " ranks");
      if (s.placement != Placement::kV) return InvalidArgument(kind, " uses the v placement");
      if (s.kind == ScheduleKind::kDualPipeV && M < s.num_stages)
        return InvalidArgument("dualpipe-v needs at least as many micro-batches as stages (", M,
                               " < ", s.num_stages, ")");
      break;
  }
  if (!(s.mem_limit >= 0)) return InvalidArgument("mem-limit must be positive");
  return CheckActionCosts(s.costs);
}

}  // namespace pw::pipeline
