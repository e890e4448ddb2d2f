#include "passes/pipeline/schedule_generators.h"

#include "ir/schedule_csv.h"

namespace pw::pipeline {

ActionSchedule EmptySchedule(const ScheduleSpec& spec) {
  ActionSchedule schedule;
  schedule.num_stages = spec.num_stages;
  schedule.num_micro_batches = spec.num_micro_batches;
  schedule.stage_to_rank = spec.StageToRank();
  schedule.ranks.resize(spec.num_ranks);
  return schedule;
}

StatusOr<ActionSchedule> GenerateSchedule(const ScheduleSpec& spec) {
  PW_RETURN_IF_ERROR(Validate(spec));
  switch (spec.kind) {
    case ScheduleKind::kFThenB:
      return GenerateFThenB(spec);
    case ScheduleKind::k1F1B:
    case ScheduleKind::kEager1F1B:
    case ScheduleKind::kInterleaved1F1B:
    case ScheduleKind::kZbH1:
      return GenerateOneFOneB(spec);
    case ScheduleKind::kZbV:
      return GenerateZbV(spec);
    case ScheduleKind::kDualPipeV:
      return GenerateDualPipeV(spec);
    case ScheduleKind::kZbH2:
      return GenerateZbH2(spec);
    case ScheduleKind::kZbAuto:
      return GenerateZbAuto(spec);
    case ScheduleKind::kCsv:
      if (spec.csv_file.empty()) return InvalidArgument("schedule kind csv needs a file");
      return ReadScheduleCsv(spec.csv_file);
  }
  return InvalidArgument("unknown schedule kind");
}

}  // namespace pw::pipeline
