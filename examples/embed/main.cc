// A framework's view of pipeweave, all in-process through the installed libraries:
//   1. build a model, plan nothing (one rank), and drive training through pw::Executor,
//      feeding its own tokens each step;
//   2. tune a two-stage pipeline of the same model (search::Tune: candidate pass pipelines
//      priced by the simulators, fastest first);
//   3. A/B plain 1F1B against the fastest other tuned plan: simulated (ab::CompareSimulated) and,
//      given the pipeweave program to start rank processes with, measured
//      (ab::CompareMeasured), printed as `pipeweave ab` prints it.
//
//   embed_example [STEPS [PIPEWEAVE]]   exits 0 when the loss fell, the best tuned plan is
//                                       no slower than 1F1B and both plans train alike

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ab/compare.h"
#include "executor/executor.h"
#include "models/gpt.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"
#include "search/plan_search.h"

namespace {

pw::models::GptConfig SmallGpt(int pp) {
  pw::models::GptConfig config;
  config.layers = 2;
  config.hidden = 32;
  config.heads = 2;
  config.seq = 8;
  config.vocab = 16;
  config.micro_batch_size = 2;
  config.pp = pp;
  return config;
}

bool Fail(const pw::Status& status, const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
  return false;
}

// 1. One rank trained step by step; true when the loss fell.
bool TrainInProcess(int steps) {
  const pw::models::GptConfig config = SmallGpt(/*pp=*/1);
  pw::StatusOr<pw::Module> module = pw::models::BuildGpt(config);
  if (!module.ok()) return Fail(module.status(), "build");
  pw::PassManager passes;
  pw::Status added = passes.AddPipeline("append-backward{optimizer=adam,lr=0.01}");
  if (!added.ok()) return Fail(added, "pipeline");
  if (pw::Status ran = passes.Run(*module).status(); !ran.ok()) return Fail(ran, "passes");

  pw::ExecutorOptions options;
  options.micro_batches = 2;
  auto exec = pw::Executor::Create(std::move(*module), options);
  if (!exec.ok()) return Fail(exec.status(), "executor");

  // The framework's data: a fixed pattern the model can learn (next token = token + 1).
  auto batch = [&](int mb, bool labels) {
    pw::Tensor t(pw::DataType::kInt64, {config.micro_batch_size, config.seq});
    for (int64_t i = 0; i < t.numel(); ++i) t.i64()[i] = (mb + i + (labels ? 1 : 0)) % config.vocab;
    return t;
  };
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    for (int mb = 0; mb < (*exec)->num_micro_batches(); ++mb) {
      (void)(*exec)->Feed("tokens", mb, batch(mb, false));
      (void)(*exec)->Feed("labels", mb, batch(mb, true));
    }
    pw::StatusOr<pw::StepStats> stats = (*exec)->Step();
    if (!stats.ok()) return Fail(stats.status(), "step");
    double loss = 0;
    for (double l : stats->losses) loss += l / stats->losses.size();
    std::printf("step %d loss %.4f (%.1f ms, peak %lld bytes)\n", step + 1, loss, stats->step_ms,
                static_cast<long long>(stats->peak_bytes));
    (step == 0 ? first : last) = loss;
  }
  return std::isfinite(last) && last < first;
}

// 2 and 3. `pipeweave_program`, when not empty, runs the measured A/B's rank processes.
bool TuneAndCompare(const std::string& pipeweave_program) {
  pw::StatusOr<pw::Module> module = pw::models::BuildGpt(SmallGpt(/*pp=*/2));
  if (!module.ok()) return Fail(module.status(), "build");
  auto estimator = pw::MakeEstimator("cpu", "");
  if (!estimator.ok()) return Fail(estimator.status(), "estimator");

  pw::search::TuneOptions tune;
  tune.estimator = *estimator;
  tune.micro_batches = 4;
  tune.top = 3;
  pw::StatusOr<pw::search::TuneResult> tuned = pw::search::Tune(*module, tune);
  if (!tuned.ok()) return Fail(tuned.status(), "tune");
  if (!tuned->baseline || tuned->best.empty()) {
    std::fprintf(stderr, "tune: no plain 1f1b or no plan found\n");
    return false;
  }
  std::printf("tuned %d schedules, %d pipelines; best of %zu:\n", tuned->planned, tuned->simulated,
              tuned->best.size());
  for (const pw::search::TunedPlan& plan : tuned->best)
    std::printf("  %.3f ms  %s\n", plan.step_ms, plan.pipeline.c_str());

  // The search ranks by the same simulator: its best is never slower than its baseline.
  if (tuned->best.front().step_ms > tuned->baseline->step_ms * (1 + 1e-9)) {
    std::fprintf(stderr, "tune: the best plan is slower than plain 1f1b\n");
    return false;
  }
  // A: plain 1F1B; B: the fastest tuned plan that is not it.
  const std::string& pipeline_a = tuned->baseline->pipeline;
  std::string pipeline_b = tuned->best.front().pipeline;
  for (const pw::search::TunedPlan& plan : tuned->best)
    if (plan.pipeline != pipeline_a) {
      pipeline_b = plan.pipeline;
      break;
    }
  auto a = pw::ab::PlanWithPipeline(*module, pipeline_a, *estimator);
  if (!a.ok()) return Fail(a.status(), "plan A");
  auto b = pw::ab::PlanWithPipeline(*module, pipeline_b, *estimator);
  if (!b.ok()) return Fail(b.status(), "plan B");

  pw::ab::AbReport report;
  report.module_path = "(in-process GPT, pp 2)";
  report.pipeline_a = pipeline_a;
  report.pipeline_b = pipeline_b;
  pw::ab::SimulateOptions simulate;
  simulate.estimator = *estimator;
  auto simulated = pw::ab::CompareSimulated(*a, *b, simulate);
  if (!simulated.ok()) return Fail(simulated.status(), "simulated A/B");
  report.sim = simulated->report;
  if (!pipeweave_program.empty()) {
    pw::ab::AbRunSettings run;
    run.rank_program = pipeweave_program;
    run.nproc = a->mesh.world_size();
    run.steps = 3;
    run.rounds = 1;
    auto measured = pw::ab::CompareMeasured(*a, *b, run);
    if (!measured.ok()) return Fail(measured.status(), "measured A/B");
    report.run = std::move(*measured);
  }
  std::fputs(pw::ab::AbReportTable(report).c_str(), stdout);
  // A measured run whose losses part beyond AbRunSettings::loss_tolerance is an error.
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 8;
  const std::string pipeweave_program = argc > 2 ? argv[2] : "";
  const bool trained = TrainInProcess(steps);
  const bool compared = TuneAndCompare(pipeweave_program);
  return trained && compared ? 0 : 1;
}
