#include "executor/local_ranks.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "executor/comm/in_process_comm.h"
#include "executor/plan_check.h"
#include "ops/kernel.h"

namespace pw {

StatusOr<LocalRunResult> RunLocalRanks(const Module& module, const RankRunOptions& options,
                                       int kernel_threads) {
  const int world = module.mesh.world_size();
  if (!module.plan.empty()) {
    LoweringOptions lowering;
    lowering.feeds = ModuleInputs(module);
    lowering.loss = ModuleLoss(module);
    lowering.strict_events = options.strict_events;
    PW_RETURN_IF_ERROR(CheckPlanForAllRanks(module, lowering));
  }
  ops::SetKernelThreads(std::max(kernel_threads, 1));
  InProcessHub hub(module.mesh);
  LocalRunResult result;
  result.reports.resize(world);
  result.params.resize(world);
  std::vector<Status> status(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      auto factory = hub.FactoryFor(rank);
      RankRunOptions o = options;
      o.rank = rank;
      o.final_params = &result.params[rank];
      auto user = options.on_step;
      o.on_step = [&result, rank, user](const RankStepReport& r) {
        result.reports[rank].push_back(r);
        if (user) user(r);
      };
      status[rank] = RunRank(module, world > 1 ? factory.get() : nullptr, o);
      if (!status[rank].ok()) hub.Abort(status[rank].ToString());  // release the others
    });
  }
  for (auto& t : threads) t.join();
  // The first failure, not the aborts it caused.
  for (const Status& s : status)
    if (!s.ok() && s.code() != StatusCode::kAborted) return s;
  for (const Status& s : status) PW_RETURN_IF_ERROR(s);
  return result;
}

std::vector<double> LocalRunResult::Losses() const {
  std::vector<double> losses;
  for (size_t step = 0; !reports.empty() && step < reports[0].size(); ++step) {
    double sum = 0;
    int count = 0;
    for (const auto& rank : reports) {
      sum += rank[step].loss_sum;
      count += rank[step].loss_count;
    }
    losses.push_back(count ? sum / count : NAN);
  }
  return losses;
}

std::vector<double> LocalRunResult::StepTimesMs() const {
  std::vector<double> times;
  for (size_t step = 0; !reports.empty() && step < reports[0].size(); ++step) {
    double slowest = 0;
    for (const auto& rank : reports) slowest = std::max(slowest, rank[step].step_ms);
    times.push_back(slowest);
  }
  return times;
}

std::vector<int64_t> LocalRunResult::PeakBytes() const {
  std::vector<int64_t> peaks;
  for (const auto& rank : reports) {
    int64_t peak = 0;
    for (const RankStepReport& r : rank) peak = std::max(peak, r.peak_bytes);
    peaks.push_back(peak);
  }
  return peaks;
}

}  // namespace pw
