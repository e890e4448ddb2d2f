#pragma once
// The A/B engine as a library: two plans of one module compared by simulation and by
// measurement, returning the structures `pipeweave ab` prints (ab/ab_report.h). The
// command line adds only flags, output files and a progress bar.
//
//   auto a = ab::PlanWithPipeline(module, "...,schedule{kind=1f1b,...}", estimator);
//   auto b = ab::PlanWithPipeline(module, "...,schedule{kind=zb-h1,...}", estimator);
//   auto sim = ab::CompareSimulated(*a, *b, {.estimator = estimator});
//   ab::AbReport report{.sim = sim->report};
//   std::puts(ab::AbReportTable(report).c_str());

#include <memory>
#include <string>

#include "ab/ab_report.h"
#include "ab/ab_run.h"
#include "ab/ab_sim.h"
#include "cost_model/estimator.h"
#include "ir/module.h"

namespace pw::ab {

// `module` with `pipeline` (as `pipeweave opt -p` takes it) run on a copy; with an
// estimator, the passes that price their choices price them with it.
StatusOr<Module> PlanWithPipeline(const Module& module, const std::string& pipeline,
                                  std::shared_ptr<cost::Estimator> estimator = nullptr);

struct SimulateOptions {
  std::shared_ptr<const cost::Estimator> estimator;  // required
  int micro_batches = 1;  // for a module without a plan (run as the sequential reference)
  bool timeline = false;  // keep per-instruction times, for RankTimelineSvg
};

struct SimulatedComparison {
  AbReport::Sim report;  // what AbReportTable and AbReportJson print under "sim"
  SimulatedPlan a, b;    // the graphs and results, for drawing
};

// Both plans through the op-level simulator; an error names the plan (A or B).
StatusOr<SimulatedComparison> CompareSimulated(const Module& a, const Module& b,
                                               const SimulateOptions& options);

// What the launcher would refuse, checked before any process starts: an error names the
// plan (A or B). CompareMeasured checks it too; the CLI calls it early to fail fast.
Status CheckRunnable(const Module& a, const Module& b, bool strict_events);

// Trains both plans on `settings.nproc` local rank processes in interleaved rounds
// (ab/ab_run.h). The modules are saved under `settings.run_dir` for the ranks to load; an
// empty run_dir is a fresh temporary directory, removed after a good run (a given one is
// kept, with every round's logs; a failed run keeps either, its error naming the logs). `module_a`
// and `module_b` of the settings are set here.
StatusOr<AbReport::Run> CompareMeasured(const Module& a, const Module& b, AbRunSettings settings);

}  // namespace pw::ab
