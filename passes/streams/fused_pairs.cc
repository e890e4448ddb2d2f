#include "passes/streams/fused_pairs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_checker.h"

namespace pw {
namespace {

bool Pairable(const Action& a, const Action& b, ActionType first, ActionType second) {
  return a.type == first && b.type == second && a.micro_batch != b.micro_batch;
}

// Whether an F's (or B's) input is made on its own rank: the data or the loss, or the
// stage before (after) it placed on the same rank. Two such jobs are ready together; two
// that wait on another rank get their inputs one after the other, and the second would
// hold the first back.
bool InputLocal(const Action& a, const ActionSchedule& s) {
  const int from = a.type == ActionType::kForward ? a.stage - 1 : a.stage + 1;
  return from < 0 || from >= s.num_stages || s.stage_to_rank[from] == s.stage_to_rank[a.stage];
}

// The compute actions of every rank (fused groups kept), without sends and recvs.
ActionSchedule ComputeOnly(const ActionSchedule& plan) {
  ActionSchedule out = plan;
  for (std::vector<Action>& rank : out.ranks)
    std::erase_if(rank, [](const Action& a) {
      return IsComm(a.type) || a.type == ActionType::kBatchP2P || a.type == ActionType::kIdle;
    });
  return out;
}

// The rank's forwards `shift` slots earlier: its forwards and backwards in their own
// orders, with `shift` more forwards before the first backward, then alternating.
std::vector<Action> ForwardsEarlier(const std::vector<Action>& actions, int shift) {
  std::vector<Action> forwards, backwards;
  size_t warmup = 0;
  bool seen_backward = false;
  for (const Action& a : actions) {
    if (a.type == ActionType::kForward) {
      forwards.push_back(a);
      if (!seen_backward) ++warmup;
    } else {
      backwards.push_back(a);
      seen_backward = true;
    }
  }
  warmup = std::min(forwards.size(), warmup + static_cast<size_t>(shift));
  std::vector<Action> out(forwards.begin(), forwards.begin() + warmup);
  size_t f = warmup;
  for (const Action& b : backwards) {
    out.push_back(b);
    if (f < forwards.size()) out.push_back(forwards[f++]);
  }
  return out;
}

// Pairs on one rank's compute actions: steady (B, F) first, then (F, F) and (B, B).
std::vector<Action> PairRank(const std::vector<Action>& actions, ActionSchedule& schedule,
                             bool warmup_cooldown, FusedPairs& stats) {
  const size_t n = actions.size();
  std::vector<int> partner(n, -1);  // index of the action fused with it, first side
  std::vector<bool> used(n, false);
  auto pair = [&](ActionType first, ActionType second, int& count) {
    for (size_t k = 0; k + 1 < n; ++k) {
      if (used[k] || used[k + 1] || !Pairable(actions[k], actions[k + 1], first, second)) continue;
      if (first == second &&
          (!InputLocal(actions[k], schedule) || !InputLocal(actions[k + 1], schedule)))
        continue;
      used[k] = used[k + 1] = true;
      partner[k] = static_cast<int>(k + 1);
      ++count;
    }
  };
  pair(ActionType::kBackward, ActionType::kForward, stats.steady);
  if (warmup_cooldown) {
    pair(ActionType::kForward, ActionType::kForward, stats.warmup);
    pair(ActionType::kBackward, ActionType::kBackward, stats.cooldown);
  }
  std::vector<Action> out;
  for (size_t k = 0; k < n; ++k) {
    if (IsFused(actions[k].type)) ++stats.existing;
    if (used[k] && partner[k] < 0) continue;  // the second of a pair
    if (partner[k] >= 0) {
      Action parts[2] = {actions[k], actions[partner[k]]};
      out.push_back(schedule.AddGroup(ActionType::kOverlapFB, parts));
    } else {
      out.push_back(actions[k]);
    }
  }
  return out;
}

StatusOr<double> Makespan(const ActionSchedule& schedule, const ActionCosts& costs) {
  SimulationOptions options;
  options.costs = costs;
  PW_ASSIGN_OR_RETURN(TimedResult timed,
                      pipeline::CheckAndSimulate(schedule, pipeline::CheckOptions{}, options));
  return timed.makespan;
}

// Forwards of a later stage get their inputs one after the other, so a pair of them waits
// for its second input. Where the rank has slack (its warm-up forwards run ahead of the
// first backward it can start) that wait costs nothing, and the pair hides each part's
// collectives under the other's compute. Each such pair is kept, rank by rank in list
// order, where the action-level simulator finds the plan no slower with it; `fused` then
// takes the placed schedule and its makespan.
Status PairLateForwards(ActionSchedule& compute, const ActionCosts& costs, FusedPairs& fused) {
  for (int r = 0; r < compute.num_ranks(); ++r) {
    for (size_t k = 0; k + 1 < compute.ranks[r].size(); ++k) {
      const std::vector<Action>& rank = compute.ranks[r];
      if (!Pairable(rank[k], rank[k + 1], ActionType::kForward, ActionType::kForward)) continue;
      if (!compute.CanAddGroup()) return OkStatus();
      ActionSchedule tried = compute;
      Action parts[2] = {rank[k], rank[k + 1]};
      std::vector<Action>& tried_rank = tried.ranks[r];
      tried_rank[k] = tried.AddGroup(ActionType::kOverlapFB, parts);
      tried_rank.erase(tried_rank.begin() + static_cast<std::ptrdiff_t>(k) + 1);
      StatusOr<ActionSchedule> placed = pipeline::InsertP2P(tried, {pipeline::P2POrder::kNaive});
      if (!placed.ok()) continue;
      StatusOr<double> after = Makespan(*placed, costs);
      if (!after.ok() || *after > fused.makespan_after * (1 + 1e-9)) continue;
      compute = std::move(tried);
      fused.schedule = std::move(placed).value();
      fused.makespan_after = *after;
      ++fused.warmup;
      ++fused.late_forward_pairs;
    }
  }
  return OkStatus();
}

StatusOr<FusedPairs> Fuse(const ActionSchedule& compute_only, const FusePairsOptions& options,
                          int shift) {
  FusedPairs result;
  result.shift = shift;
  ActionSchedule compute = compute_only;
  const bool has_groups = !compute.group_parts.empty();
  for (int r = 0; r < compute.num_ranks(); ++r) {
    std::vector<Action>& rank = compute.ranks[r];
    // A plan with fused groups of its own (dualpipe-v) keeps its order and its groups.
    if (has_groups) continue;
    if (shift > 0) rank = ForwardsEarlier(rank, shift * (compute.num_ranks() - 1 - r));
    if (!compute.CanAddGroup()) return FailedPrecondition("too many fused jobs for one plan");
    rank = PairRank(rank, compute, options.warmup_cooldown, result);
  }
  if (has_groups)
    for (const auto& rank : compute.ranks)
      for (const Action& a : rank) result.existing += IsFused(a.type) ? 1 : 0;
  PW_ASSIGN_OR_RETURN(result.schedule, pipeline::InsertP2P(compute, {pipeline::P2POrder::kNaive}));
  PW_ASSIGN_OR_RETURN(result.makespan_after, Makespan(result.schedule, options.costs));
  if (options.warmup_cooldown && !has_groups)
    PW_RETURN_IF_ERROR(PairLateForwards(compute, options.costs, result));
  return result;
}

int PeakInFlight(const ActionSchedule& schedule) {
  std::vector<double> peaks = PeakActivations(schedule, /*w_mem=*/0);
  return peaks.empty()
             ? 0
             : static_cast<int>(std::lround(*std::max_element(peaks.begin(), peaks.end())));
}

}  // namespace

StatusOr<FusedPairs> FuseIndependentPairs(const ActionSchedule& plan,
                                          const FusePairsOptions& options) {
  PW_ASSIGN_OR_RETURN(double before, Makespan(plan, options.costs));
  ActionSchedule compute = ComputeOnly(plan);
  std::optional<FusedPairs> best;
  Status last = OkStatus();
  const int tries = compute.group_parts.empty() ? options.max_shift : 0;
  for (int shift = 0; shift <= tries; ++shift) {
    StatusOr<FusedPairs> fused = Fuse(compute, options, shift);
    if (!fused.ok()) {
      last = fused.status();
      continue;
    }
    fused->makespan_before = before;
    if (!best || fused->makespan_after < best->makespan_after) best = std::move(fused).value();
    if (best->makespan_after <= before * (1 + 1e-9)) break;
  }
  if (!best) return last.ok() ? InvalidArgument("no forward shift to try") : last;
  best->peak_in_flight_before = PeakInFlight(plan);
  best->peak_in_flight_after = PeakInFlight(best->schedule);
  return std::move(best).value();
}

}  // namespace pw
