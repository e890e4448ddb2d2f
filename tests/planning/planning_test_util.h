#pragma once
// Helpers shared by the planning tests.

#include <gtest/gtest.h>

#include <string>

#include "ir/action.h"
#include "passes/pipeline/schedule_generators.h"

namespace pw::pipeline::testing {

inline ScheduleSpec Spec(ScheduleKind kind, int ranks, int micro_batches, int chunks = 1) {
  ScheduleSpec spec;
  spec.kind = kind;
  spec.num_ranks = ranks;
  spec.num_stages = ranks * chunks;
  spec.num_micro_batches = micro_batches;
  spec.placement = DefaultPlacement(kind);
  return spec;
}

inline ActionSchedule Generate(const ScheduleSpec& spec) {
  StatusOr<ActionSchedule> s = GenerateSchedule(spec);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : ActionSchedule{};
}

// "0F0 0F1 0B0 ..." for one rank.
inline std::string RankActions(const ActionSchedule& s, int rank) {
  std::string out;
  for (const Action& a : s.ranks[rank]) {
    if (!out.empty()) out += ' ';
    AppendAction(out, a, s);
  }
  return out;
}

inline std::string DataPath(const std::string& name) {
  return std::string(PW_PLANNING_DATA) + "/" + name;
}

}  // namespace pw::pipeline::testing
