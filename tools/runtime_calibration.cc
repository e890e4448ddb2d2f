#include "tools/runtime_calibration.h"

#include <algorithm>

#include "executor/rank_runner.h"
#include "executor/reference_runner.h"
#include "executor/sequential_plan.h"
#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw::tools {
namespace {

constexpr int kMicroBatches = 4;
constexpr int kSteps = 9;

// The median step after the first (which warms caches and allocators up).
double SteadyMedianSeconds(std::vector<double> ms) {
  if (ms.size() > 1) ms.erase(ms.begin());
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0 : ms[ms.size() / 2] * 1e-3;
}

}  // namespace

StatusOr<RuntimeOverheads> CalibrateRuntimes(const cost::ProfileOptions& options) {
  models::GptConfig config;
  config.layers = 2;
  config.hidden = 16;
  config.heads = 2;
  config.ffn = 32;
  config.seq = 8;
  config.vocab = 32;
  PW_ASSIGN_OR_RETURN(Module module, models::BuildGpt(config));
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline("append-backward{optimizer=adam}"));
  PW_RETURN_IF_ERROR(pm.Run(module).status());
  PW_ASSIGN_OR_RETURN(Module planned, WithSequentialPlan(module, kMicroBatches));

  // The kernels alone, as the simulator adds them up.
  PW_ASSIGN_OR_RETURN(std::vector<cost::CostedOp> ops, cost::DistinctOps(planned, ops::Registry()));
  cost::ProfileOptions quiet = options;
  quiet.measure_device = false;
  quiet.progress = nullptr;
  quiet.cache = cost::CacheState::kHot;  // its whole state fits in L2: every op finds it there
  PW_ASSIGN_OR_RETURN(cost::ProfileResult profiled, cost::ProfileOps(ops, quiet));
  PW_ASSIGN_OR_RETURN(cost::DeviceSpec device, cost::BuiltinDeviceSpec("cpu"));
  PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> estimator,
                      cost::Estimator::Create(device, std::move(profiled.table)));
  cost::SimOptions sim_options;
  sim_options.op_overhead = 0;
  sim_options.record_timeline = false;
  cost::Simulator simulator(estimator, ops::Registry(), sim_options);
  cost::SimGraph graph;
  PW_ASSIGN_OR_RETURN(cost::SimResult kernels, simulator.Run(planned, &graph));
  const double num_ops = static_cast<double>(graph.instrs.size());

  ReferenceOptions reference;
  reference.steps = kSteps;
  reference.micro_batches = kMicroBatches;
  PW_ASSIGN_OR_RETURN(ReferenceResult ref, RunReference(module, reference));

  std::vector<double> exec_ms;
  RankRunOptions run;
  run.steps = kSteps;
  run.micro_batches = kMicroBatches;
  run.on_step = [&](const RankStepReport& r) { exec_ms.push_back(r.step_ms); };
  PW_RETURN_IF_ERROR(RunRank(module, nullptr, run));

  RuntimeOverheads out;
  out.ops = num_ops;
  out.kernels_ms = kernels.step_time * 1e3;
  out.reference_ms = SteadyMedianSeconds(ref.step_time_ms) * 1e3;
  out.executor_ms = SteadyMedianSeconds(exec_ms) * 1e3;
  // A runtime can come out below the profiled kernels (noise, or kernels warmer than the
  // profiler leaves them): no negative overheads.
  out.reference = std::max(0.0, (out.reference_ms - out.kernels_ms) * 1e-3 / num_ops);
  out.executor = std::max(0.0, (out.executor_ms - out.kernels_ms) * 1e-3 / num_ops);
  return out;
}

}  // namespace pw::tools
