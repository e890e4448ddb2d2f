#include "passes/streams/interleave.h"

#include <algorithm>
#include <limits>

namespace pw {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// The state of one chain while the two are scheduled.
struct Chain {
  const std::vector<ChainOp>* ops;
  size_t next = 0;
  double last_compute_end = 0;  // when its last compute op finished
  std::vector<double> done;     // per op: when it finished (collectives: their result)

  bool finished() const { return next >= ops->size(); }
  const ChainOp& head() const { return (*ops)[next]; }
  // Compute seconds before its next collective (infinity when it has none left).
  double ComputeToNextCollective() const {
    double t = 0;
    for (size_t k = next; k < ops->size(); ++k) {
      if ((*ops)[k].collective) return t;
      t += (*ops)[k].seconds;
    }
    return kNever;
  }
};

class Scheduler {
 public:
  Scheduler(const std::vector<ChainOp>& a, const std::vector<ChainOp>& b,
            const InterleaveOptions& options)
      : options_(options) {
    chains_[0].ops = &a;
    chains_[1].ops = &b;
    chains_[0].done.assign(a.size(), 0);
    chains_[1].done.assign(b.size(), 0);
  }

  // Runs chain `c`'s next op (a collective is issued onto the link).
  void Run(int c) {
    Chain& chain = chains_[c];
    const ChainOp& op = chain.head();
    double end;
    if (op.collective) {
      double start = std::max(link_free_, chain.last_compute_end + options_.event_latency);
      end = start + op.seconds;
      link_free_ = end;
    } else {
      double ready = compute_free_;
      if (op.waits_for >= 0)
        ready = std::max(ready, chain.done[op.waits_for] + options_.event_latency);
      exposed_ += ready - compute_free_;
      end = ready + op.seconds;
      compute_free_ = end;
      chain.last_compute_end = end;
    }
    chain.done[chain.next] = end;
    makespan_ = std::max(makespan_, end);
    if (out_.order.empty() || out_.order.back().first != c) ++out_.segments;
    out_.order.push_back({c, static_cast<int>(chain.next)});
    ++chain.next;
  }

  // When chain `c`'s next (compute) op could start.
  double StartOf(int c) const {
    const Chain& chain = chains_[c];
    const ChainOp& op = chain.head();
    double ready = compute_free_;
    if (op.waits_for >= 0)
      ready = std::max(ready, chain.done[op.waits_for] + options_.event_latency);
    return ready;
  }

  bool Eligible(int c) const {
    if (chains_[c].finished()) return false;
    // Two micro-batches of one program: the second never overtakes the first.
    if (options_.same_program && c == 1 && !chains_[0].finished())
      return chains_[1].next < chains_[0].next;
    return true;
  }

  Interleaving Interleave() {
    int current = 0;
    while (!chains_[0].finished() || !chains_[1].finished()) {
      // Collectives go onto the link as soon as their chain reaches them.
      bool issued = false;
      for (int c : {current, 1 - current})
        if (Eligible(c) && chains_[c].head().collective) {
          Run(c);
          issued = true;
        }
      if (issued) continue;
      int pick = -1;
      for (int c : {current, 1 - current}) {
        if (!Eligible(c)) continue;
        if (pick < 0 || Better(c, pick)) pick = c;
      }
      Run(pick);
      current = pick;
    }
    return Finish();
  }

  Interleaving BackToBack() {
    for (int c : {0, 1})
      while (!chains_[c].finished()) Run(c);
    return Finish();
  }

 private:
  bool Better(int c, int than) const {
    const double a = StartOf(c), b = StartOf(than);
    if (options_.lead_first) {
      const int lead = c == 0 ? c : than;
      if (StartOf(lead) <= compute_free_) return c == lead;  // the lead runs when it can
      if (a != b) return a < b;
      return c == lead;
    }
    if (a != b) return a < b;
    return chains_[c].ComputeToNextCollective() < chains_[than].ComputeToNextCollective();
  }

  Interleaving Finish() {
    out_.makespan = makespan_;
    out_.exposed = exposed_;
    return std::move(out_);
  }

  InterleaveOptions options_;
  Chain chains_[2];
  double compute_free_ = 0, link_free_ = 0, makespan_ = 0, exposed_ = 0;
  Interleaving out_;
};

}  // namespace

Interleaving Interleave(const std::vector<ChainOp>& first, const std::vector<ChainOp>& second,
                        const InterleaveOptions& options) {
  return Scheduler(first, second, options).Interleave();
}

Interleaving BackToBack(const std::vector<ChainOp>& first, const std::vector<ChainOp>& second,
                        const InterleaveOptions& options) {
  return Scheduler(first, second, options).BackToBack();
}

}  // namespace pw
