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

#include "ir/parallel.h"
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

// The chunk of successive operations: it moves on every `round` operations, cycling
// through the V chunks upwards (forwards) or downwards (backwards). Counting instead of
// dividing keeps two integer divisions per action out of the generator.
class ChunkCycle {
 public:
  ChunkCycle(int round, int chunks, bool downwards)
      : round_(round), chunks_(chunks), downwards_(downwards), chunk_(downwards ? chunks - 1 : 0) {}
  // The chunk of the next operation.
  int Next() {
    const int c = chunk_;
    if (++done_ == round_) {
      done_ = 0;
      chunk_ = downwards_ ? (chunk_ == 0 ? chunks_ - 1 : chunk_ - 1)
                          : (chunk_ + 1 == chunks_ ? 0 : chunk_ + 1);
    }
    return c;
  }

 private:
  const int round_, chunks_;
  const bool downwards_;
  int chunk_, done_ = 0;
};

// One chunk per rank (the common case), in closed form: stage r runs its micro-batches
// in order, so the list is `warmup` forwards, then pairs of a forward and a backward step,
// then the remaining backward steps. A split backward step is an I followed by the W
// `w_delay` steps older; the W's still owed come last.
void WriteOneChunk(const RankShape& shape, int r, int M, std::vector<Action>& actions) {
  actions.resize(static_cast<size_t>(M) * (shape.split_backward ? 3 : 2));
  Action* out = actions.data();
  const ActionType backward =
      shape.split_backward ? ActionType::kBackwardInput : ActionType::kBackward;
  int f = 0, b = 0, w = 0;
  for (; f < shape.warmup; ++f) *out++ = MakeAction(ActionType::kForward, r, f);
  for (; b < M; ++b) {
    if (f < M) *out++ = MakeAction(ActionType::kForward, r, f++);
    *out++ = MakeAction(backward, r, b);
    if (shape.split_backward && b >= shape.w_delay)
      *out++ = MakeAction(ActionType::kBackwardWeight, r, w++);
  }
  while (shape.split_backward && w < M) *out++ = MakeAction(ActionType::kBackwardWeight, r, w++);
}

}  // namespace

ActionSchedule GenerateOneFOneB(const ScheduleSpec& spec) {
  ActionSchedule schedule = EmptySchedule(spec);
  const int P = spec.num_ranks, M = spec.num_micro_batches, V = spec.chunks();
  if (V == 1) {
    // Ranks are independent here, so they are written on all cores.
    ParallelFor(P, static_cast<size_t>(P) * M, [&](size_t begin, size_t end) {
      for (size_t r = begin; r < end; ++r) {
        const int rank = static_cast<int>(r);
        WriteOneChunk(ShapeOf(spec, rank), rank, M, schedule.ranks[r]);
      }
    });
    return schedule;
  }
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
    // Every micro-batch of every chunk gets an F and a B (or an I and a W): the size is
    // known, so the actions are written in place.
    auto& actions = schedule.ranks[r];
    actions.resize(static_cast<size_t>(total) * (shape.split_backward ? 3 : 2));
    Action* out = actions.data();
    const ActionType backward =
        shape.split_backward ? ActionType::kBackwardInput : ActionType::kBackward;
    ChunkCycle forward_chunk(shape.round, V, /*downwards=*/false);
    ChunkCycle backward_chunk(shape.round, V, /*downwards=*/true);

    auto forward = [&] {
      int c = forward_chunk.Next();
      *out++ = MakeAction(ActionType::kForward, c * P + r, next_f[c]++);
    };
    auto weight = [&] {
      int c = backward_chunks[w_done++];
      *out++ = MakeAction(ActionType::kBackwardWeight, c * P + r, next_w[c]++);
    };
    auto backward_step = [&](int step) {
      int c = backward_chunk.Next();
      *out++ = MakeAction(backward, c * P + r, next_b[c]++);
      if (!shape.split_backward) return;
      backward_chunks.push_back(c);
      if (step >= shape.w_delay) weight();
    };

    const int steady = total - shape.warmup;
    for (int op = 0; op < shape.warmup; ++op) forward();
    for (int step = 0; step < steady; ++step) {
      forward();
      backward_step(step);
    }
    for (int step = steady; step < total; ++step) backward_step(step);
    while (shape.split_backward && w_done < backward_chunks.size()) weight();
  }
  return schedule;
}

}  // namespace pw::pipeline
