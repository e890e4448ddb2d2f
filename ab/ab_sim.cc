#include "ab/ab_sim.h"

#include <algorithm>

#include "executor/sequential_plan.h"
#include "ops/registry.h"
#include "simulator/memory_fit.h"

namespace pw::ab {

SimFigures FiguresOf(const cost::SimResult& result) {
  SimFigures f;
  f.step_ms = result.StepTimeInRun() * 1e3;
  f.cpu_ms = result.CpuInRun() * 1e3;
  f.bubble_rate = result.bubble_rate;
  f.exposed_comm_ms = result.exposed_comm * 1e3;
  for (int c = 0; c < cost::kNumCommClasses; ++c)
    f.exposed_ms_by_class[c] = result.exposed_by_class[c] * 1e3;
  for (int s = 0; s < kNumStreamTypes; ++s) f.busy_ms_by_stream[s] = result.busy_by_stream[s] * 1e3;
  double worst_exposed = -1;
  for (const cost::RankResult& r : result.ranks) {
    f.peak_bytes.push_back(r.peak_bytes);
    auto& exposed = f.rank_exposed_ms.emplace_back();
    for (int c = 0; c < cost::kNumCommClasses; ++c) exposed[c] = r.exposed_by_class[c] * 1e3;
    auto& busy = f.rank_busy_ms.emplace_back();
    for (int s = 0; s < kNumStreamTypes; ++s) busy[s] = r.busy[s] * 1e3;
    f.max_peak_bytes = std::max(f.max_peak_bytes, r.peak_bytes);
    if (r.exposed_comm > worst_exposed) {
      worst_exposed = r.exposed_comm;
      f.worst_exposed_rank = r.rank;
    }
  }
  return f;
}

StatusOr<SimulatedPlan> SimulatePlan(const Module& module,
                                     std::shared_ptr<const cost::Estimator> estimator,
                                     int micro_batches, bool timeline) {
  SimulatedPlan out;
  if (module.plan.empty()) {
    PW_ASSIGN_OR_RETURN(out.sequential, WithSequentialPlan(module, micro_batches));
  }
  cost::SimOptions options;
  options.record_timeline = timeline;
  // The run half measures steps after the first, which follow each other without a
  // barrier: the simulated figure is the steady step of steps back to back.
  options.steps = kSimulatedSteps;
  const Module& planned = out.sequential ? *out.sequential : module;
  // A table profiled in runs of several schedules prices each plan with its schedule's own.
  cost::Simulator simulator(
      cost::Estimator::ForSchedule(std::move(estimator), planned.plan.schedule), ops::Registry(),
      options);
  PW_ASSIGN_OR_RETURN(out.result, simulator.Run(planned, &out.graph));
  out.figures = FiguresOf(out.result);
  const cost::MemoryFit fit = cost::FitMemory(out.result, simulator.estimator().device());
  out.figures.fits = fit.fits;
  out.figures.memory_summary = fit.Summary();
  return out;
}

}  // namespace pw::ab
