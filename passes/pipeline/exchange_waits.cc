#include "passes/pipeline/exchange_waits.h"

#include <string>
#include <vector>

#include "ir/p2p_vars.h"
#include "ir/status.h"

namespace pw::pipeline {
namespace {

// The jobs that run in `job`'s place (itself, or its sub-jobs, recursively).
void RunningParts(Job& job, std::vector<Job*>& out) {
  if (!RunsSubJobs(job)) {
    out.push_back(&job);
    return;
  }
  for (Job& sub : job.sub_jobs) RunningParts(sub, out);
}

bool HasEvents(const Job& job) {
  if (!job.wait_events.empty() || !job.record_events.empty()) return true;
  for (const Job& sub : job.sub_jobs)
    if (HasEvents(sub)) return true;
  return false;
}

}  // namespace

bool HasJobEvents(const Plan& plan) {
  for (const RankPlan& rank : plan.ranks)
    for (const Job& job : rank.jobs)
      if (HasEvents(job)) return true;
  return false;
}

int WaitForExchanges(Plan& plan) {
  int held = 0;
  for (RankPlan& rank : plan.ranks) {
    int exchange = 0;
    std::vector<std::string> pending;  // waits for the exchange before the next job
    for (Job& job : rank.jobs) {
      std::vector<Job*> parts;
      RunningParts(job, parts);
      const bool transfers = IsP2pJob(parts.front()->kind);
      if (transfers) {
        // Names unique on the rank: an exchange may move two values of one micro-batch.
        for (Job* part : parts) {
          const std::string event = StrCat("exchange", exchange, ".", pending.size());
          part->record_events.push_back(event);
          pending.push_back(StrCat(event, "@", part->micro_batch));
        }
        continue;
      }
      if (pending.empty()) continue;
      for (Job* part : parts)
        part->wait_events.insert(part->wait_events.end(), pending.begin(), pending.end());
      pending.clear();
      ++exchange;
      ++held;
    }
    // An exchange that ends the plan: the step's end waits for every stream anyway.
  }
  return held;
}

}  // namespace pw::pipeline
