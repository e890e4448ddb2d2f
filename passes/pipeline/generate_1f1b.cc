// The 1F1B family. Every rank runs `warmup` forwards, then pairs (one forward, one
// backward), then the remaining backwards. The kinds differ in the warm-up length:
//   1f1b              P-1-r                      (so stage r holds at most P-r activations)
//   eager-1f1b        2(P-1-r)                   (2(P-r)-1 forwards before the first B)
//   interleaved-1f1b  (V-1)*P + 2(P-1-r)         (Megatron's virtual stages)
//   zb-h1             (V-1)*round + (P-1-r)      (PyTorch's ZB1P; ZB-H1 when V = 1)
// With V chunks, a rank's k-th forward goes to chunk (k / round) % V and its backwards walk
// the chunks in reverse, `round` micro-batches at a time. zb-h1 splits every backward
// into I and W and holds back the first r weight-gradient steps of rank r, which is what
// shortens the backward chain (bubble (P-1)(F+B-W) instead of (P-1)(F+B+W)).

#include <algorithm>

#include "passes/pipeline/schedule_generators.h"

namespace pw::pipeline {

namespace {

struct RankShape {
  int warmup = 0;
  int round = 1;  // micro-batches per chunk visit
  bool split_backward = false;
  int w_delay = 0;  // backward steps before the first W
};

RankShape ShapeOf(const ScheduleSpec& spec, int r) {
  const int P = spec.num_ranks, M = spec.num_micro_batches, V = spec.chunks();
  const int total = M * V;
  RankShape shape;
  shape.round = std::max(1, M);
  switch (spec.kind) {
    case ScheduleKind::k1F1B:
      shape.warmup = P - 1 - r;
      break;
    case ScheduleKind::kEager1F1B:
      shape.warmup = 2 * (P - 1 - r);
      break;
    case ScheduleKind::kInterleaved1F1B:
      shape.round = P;
      shape.warmup = (V - 1) * P + 2 * (P - 1 - r);
      break;
    default:  // zb-h1
      shape.round = M / std::max(1, M / P);
      shape.warmup = (V - 1) * shape.round + (P - 1 - r);
      shape.split_backward = true;
      shape.w_delay = r;
      break;
  }
  shape.warmup = std::min(shape.warmup, total);
  return shape;
}

}  // namespace

ActionSchedule GenerateOneFOneB(const ScheduleSpec& spec) {
  ActionSchedule schedule = EmptySchedule(spec);
  const int P = spec.num_ranks, M = spec.num_micro_batches, V = spec.chunks();
  const int total = M * V;
  std::vector<int> next_f(V), next_b(V), next_w(V);
  std::vector<int> backward_chunks;  // chunk of each backward step, for the deferred W's
  for (int r = 0; r < P; ++r) {
    const RankShape shape = ShapeOf(spec, r);
    std::fill(next_f.begin(), next_f.end(), 0);
    std::fill(next_b.begin(), next_b.end(), 0);
    std::fill(next_w.begin(), next_w.end(), 0);
    backward_chunks.clear();
    size_t w_done = 0;
    auto& out = schedule.ranks[r];
    out.reserve(static_cast<size_t>(total) * (shape.split_backward ? 3 : 2));
    const ActionType backward =
        shape.split_backward ? ActionType::kBackwardInput : ActionType::kBackward;

    auto forward = [&](int op) {
      int c = (op / shape.round) % V;
      out.push_back(MakeAction(ActionType::kForward, c * P + r, next_f[c]++));
    };
    auto weight = [&] {
      int c = backward_chunks[w_done++];
      out.push_back(MakeAction(ActionType::kBackwardWeight, c * P + r, next_w[c]++));
    };
    auto backward_step = [&](int op) {
      int c = V - 1 - ((op - shape.warmup) / shape.round) % V;
      out.push_back(MakeAction(backward, c * P + r, next_b[c]++));
      if (!shape.split_backward) return;
      backward_chunks.push_back(c);
      if (op - shape.warmup >= shape.w_delay) weight();
    };

    for (int op = 0; op < shape.warmup; ++op) forward(op);
    for (int op = shape.warmup; op < total; ++op) {
      forward(op);
      backward_step(op);
    }
    for (int op = total; op < total + shape.warmup; ++op) backward_step(op);
    while (shape.split_backward && w_done < backward_chunks.size()) weight();
  }
  return schedule;
}

}  // namespace pw::pipeline
