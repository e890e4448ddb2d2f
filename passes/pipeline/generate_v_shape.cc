// Two chunks per rank in a V: rank r runs stage r (chunk 0, going down) and stage
// 2P-1-r (chunk 1, coming back up), so the turn at the bottom needs no communication.
// Both orders follow PyTorch's ScheduleZBVZeroBubble and ScheduleDualPipeV, so a
// schedule generated here equals the one PyTorch runs.

#include <algorithm>
#include <deque>

#include "passes/pipeline/schedule_generators.h"

namespace pw::pipeline {

namespace {

// Per-stage counters: the next micro-batch of each action type.
struct Counters {
  int f = 0, b = 0, w = 0;
};

}  // namespace

// ZB-V: warm-up of 2(P-r)-1 chunk-0 forwards, then alternating F1/F0 pairs, then
// (F, I, W) per chunk in the steady state; the tail runs the deferred W's.
ActionSchedule GenerateZbV(const ScheduleSpec& spec) {
  ActionSchedule schedule = EmptySchedule(spec);
  const int P = spec.num_ranks, M = spec.num_micro_batches;
  // Generate as if there were at least 2P-1 micro-batches and drop the extra ones.
  const int n = std::max(2 * P - 1, M);
  for (int r = 0; r < P; ++r) {
    auto& out = schedule.ranks[r];
    out.reserve(6 * static_cast<size_t>(n));
    const int s0 = r, s1 = 2 * P - 1 - r;
    Counters c0, c1;
    auto emit = [&](ActionType t, int stage, int mb) {
      if (mb < M) out.push_back(MakeAction(t, stage, mb));
    };
    auto f = [&](int stage, Counters& c) { emit(ActionType::kForward, stage, c.f++); };
    auto i = [&](int stage, Counters& c) { emit(ActionType::kBackwardInput, stage, c.b++); };
    auto w = [&](int stage, Counters& c) { emit(ActionType::kBackwardWeight, stage, c.w++); };

    for (int k = 0; k < 2 * (P - r) - 1; ++k) f(s0, c0);
    for (int k = 0; k < r; ++k) {
      f(s1, c1);
      f(s0, c0);
    }
    for (int k = 0; k < P - r; ++k) {
      f(s1, c1);
      i(s1, c1);
      w(s1, c1);
    }
    while (c1.f < c0.f || c0.f < n) {
      if (c0.f < n) f(s0, c0);
      i(s0, c0);
      w(s0, c0);
      f(s1, c1);
      i(s1, c1);
      w(s1, c1);
    }
    for (int k = 0; k < r; ++k) {
      i(s0, c0);
      i(s1, c1);
    }
    for (int k = 0; k < P - r; ++k) {
      i(s0, c0);
      w(s0, c0);
    }
    while (c1.w < c1.b) w(s1, c1);
    while (c0.w < c0.b) w(s0, c0);
  }
  return schedule;
}

// DualPipeV: forwards of both chunks fill the V, then the steady state overlaps the
// forward of one chunk with the full backward of the other in one fused action; the
// second half of the cool-down splits backwards into I and W to fill the tail.
ActionSchedule GenerateDualPipeV(const ScheduleSpec& spec) {
  ActionSchedule schedule = EmptySchedule(spec);
  const int P = spec.num_ranks, M = spec.num_micro_batches;
  for (int r = 0; r < P; ++r) {
    auto& out = schedule.ranks[r];
    const int s0 = r, s1 = 2 * P - 1 - r;
    Counters c0, c1;
    std::deque<std::pair<int, int>> pending_w;  // (stage, micro-batch) after each I
    auto counters = [&](int stage) -> Counters& { return stage == s0 ? c0 : c1; };

    auto forward = [&](int stage) {
      out.push_back(MakeAction(ActionType::kForward, stage, counters(stage).f++));
    };
    // Full backward (B) or input-grad backward (I); an I queues its W.
    auto backward = [&](int stage, bool split) {
      Counters& c = counters(stage);
      int mb = c.b++;
      if (split) {
        out.push_back(MakeAction(ActionType::kBackwardInput, stage, mb));
        pending_w.emplace_back(stage, mb);
      } else {
        out.push_back(MakeAction(ActionType::kBackward, stage, mb));
      }
    };
    auto weight_if_pending = [&] {
      if (pending_w.empty()) return;
      auto [stage, mb] = pending_w.front();
      pending_w.pop_front();
      out.push_back(MakeAction(ActionType::kBackwardWeight, stage, mb));
    };
    auto overlap = [&](int f_stage, int b_stage) {
      Action parts[2] = {MakeAction(ActionType::kForward, f_stage, counters(f_stage).f++),
                         MakeAction(ActionType::kBackward, b_stage, counters(b_stage).b++)};
      out.push_back(schedule.AddGroup(ActionType::kOverlapFB, parts));
    };

    for (int k = 0; k < 2 * (P - r - 1); ++k) forward(s0);
    for (int k = 0; k < r + 1; ++k) {
      forward(s0);
      forward(s1);
    }
    for (int k = 0; k < P - r - 1; ++k) {
      backward(s1, /*split=*/true);
      weight_if_pending();
      forward(s1);
    }
    for (int k = 0; k < M - 2 * P + r + 1; ++k) {
      if (k == 0 && r == P - 1) {
        // The bottom of the V runs these two apart to shorten the bubble.
        forward(s0);
        backward(s1, false);
      } else {
        overlap(s0, s1);
      }
      overlap(s1, s0);
    }
    for (int k = 0; k < P - r - 1; ++k) {
      backward(s1, false);
      overlap(s1, s0);
    }
    bool split = false;
    const int tail = r + 1;
    for (int k = 0; k < tail; ++k) {
      if (k == tail / 2 && r % 2 == 1) split = true;
      backward(s1, split);
      if (k == tail / 2 && r % 2 == 0) split = true;
      backward(s0, split);
    }
    for (int k = 0; k < P - r - 1; ++k) {
      weight_if_pending();
      backward(s0, split);
    }
    for (int k = 0; k < r + 1; ++k) weight_if_pending();
  }
  return schedule;
}

}  // namespace pw::pipeline
