#pragma once
// The simulated half of `pipeweave ab`: one plan through the op-level simulator, and the
// figures the A/B compares (step time, bubble, exposed communication by class, busy time
// per stream, peak memory per rank).

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/estimator.h"
#include "ir/module.h"
#include "ir/stream_type.h"
#include "simulator/sim_graph.h"
#include "simulator/simulator.h"

namespace pw::ab {

// Steps simulated back to back for the step time (cost::RepeatSteps).
inline constexpr int kSimulatedSteps = 3;

// Milliseconds; the worst rank key by key (SimResult's aggregation).
struct SimFigures {
  double step_ms = 0;  // the steady step of kSimulatedSteps back to back
  double cpu_ms = 0;   // its core time over all ranks (SimResult::CpuInRun; 0: not known)
  double bubble_rate = 0;
  double exposed_comm_ms = 0;
  std::array<double, cost::kNumCommClasses> exposed_ms_by_class{};  // [kNone] stays 0
  std::array<double, kNumStreamTypes> busy_ms_by_stream{};
  std::vector<int64_t> peak_bytes;  // per rank
  int64_t max_peak_bytes = 0;
  int worst_exposed_rank = 0;  // the rank with the most exposed communication
  // Per rank (in rank order): exposed communication by class and busy time by stream, so
  // that a share of one rank (exposed over busy) can be read without mixing ranks.
  std::vector<std::array<double, cost::kNumCommClasses>> rank_exposed_ms;
  std::vector<std::array<double, kNumStreamTypes>> rank_busy_ms;
  bool fits = true;            // every rank fits the device's memory (simulator/memory_fit.h)
  std::string memory_summary;  // MemoryFit::Summary()
};

struct SimulatedPlan {
  // What was simulated: a copy of the module with a sequential plan when it had none.
  std::optional<Module> sequential;
  cost::SimGraph graph;
  cost::SimResult result;
  SimFigures figures;
};

// Simulates `module`'s plan (an unplanned module as the sequential reference of
// `micro_batches`); `timeline` keeps per-instruction times for drawing.
StatusOr<SimulatedPlan> SimulatePlan(const Module& module,
                                     std::shared_ptr<const cost::Estimator> estimator,
                                     int micro_batches, bool timeline);

SimFigures FiguresOf(const cost::SimResult& result);

}  // namespace pw::ab
