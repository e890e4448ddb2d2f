#pragma once
// Schedule generators: each builds the compute-only ActionSchedule of one kind for the
// synthetic pipeline a ScheduleSpec describes. Send/recv actions come later
// (p2p_insertion.h).

#include "ir/action.h"
#include "ir/status.h"
#include "passes/pipeline/schedule_spec.h"

namespace pw::pipeline {

// Validates the spec and dispatches on its kind (kind csv reads spec.csv_file).
StatusOr<ActionSchedule> GenerateSchedule(const ScheduleSpec& spec);

// An empty schedule of the spec's shape: stages placed, rank lists empty.
ActionSchedule EmptySchedule(const ScheduleSpec& spec);

// generate_fthenb.cc: all forwards (stage by stage), then all backwards.
ActionSchedule GenerateFThenB(const ScheduleSpec& spec);
// generate_1f1b.cc: 1f1b, eager-1f1b, interleaved-1f1b and zb-h1, which differ only in
// the warm-up length and in splitting the backward with deferred W.
ActionSchedule GenerateOneFOneB(const ScheduleSpec& spec);
// generate_v_shape.cc: zb-v and dualpipe-v (two chunks per rank, v placement).
ActionSchedule GenerateZbV(const ScheduleSpec& spec);
ActionSchedule GenerateDualPipeV(const ScheduleSpec& spec);
// generate_greedy.cc: cost-aware kinds built by list scheduling.
StatusOr<ActionSchedule> GenerateZbH2(const ScheduleSpec& spec);
StatusOr<ActionSchedule> GenerateZbAuto(const ScheduleSpec& spec);
// zb-auto with every variant run to its end: the makespan GenerateZbAuto's shortcuts
// (skipping variants that decide alike, stopping runs that cannot win) must keep.
StatusOr<ActionSchedule> GenerateZbAutoExhaustive(const ScheduleSpec& spec);

}  // namespace pw::pipeline
