// defer-weight-grads: weight-gradient work runs while the backward waits for communication.
//
// A backward program on streams alternates compute with collectives whose results the next
// op needs at once: under sequence parallelism each row-parallel linear's backward starts
// with an all-gather of its output gradient, and nothing on the compute stream is left to
// run while it travels. Weight-gradient work (ops marked weight_grad: dW matmuls, a norm's
// or bias's partial sums, their small all-gathers and sums, master-gradient casts) is read
// by nothing but other weight-gradient work and the optimizer, so it can run later: this
// pass keeps it in a queue and, before each compute op that reads a collective's result,
// places queued work (oldest first) until it covers that collective's time by the cost
// model, so that it runs while the collective is in flight. Work whose own collective was
// just placed (a sum of gathered partial sums) waits for the next point, and what is left
// runs at the end of the program: after the input gradient is sent to the stage before,
// which then starts sooner (the zero-bubble schedules' observation).
//
// Only ops move, and an op never moves past one it depends on or that depends on it: the
// results are bit-identical. The weight gradients' inputs are held until they run: a few
// ops later, or the end of the backward for the work no collective needed (the simulator
// counts it; on the 13B shape with sequence parallelism the peak grows 27.8 -> 28.3 GiB). Runs
// after assign-streams (it needs the collectives on their streams) and before overlap-1f1b and
// insert-events.

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "cost_model/estimator.h"
#include "cost_model/op_price.h"
#include "ir/stream_type.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/streams/row_split_choice.h"

namespace pw {
namespace {

bool OnComputeStream(const Op& op) {
  return op.stream.empty() || op.stream == StreamTypeName(StreamType::kCompute);
}

bool IsBackward(const Program& program) {
  const std::string& kind = program.info().kind;
  return kind == "backward" || kind == "backward_input";
}

// A run of deferred ops, each with its index in the program before, and the vars they read
// and write.
struct Deferred {
  std::vector<Op> ops;
  std::vector<size_t> at;
  std::unordered_set<std::string> reads, writes;

  void Push(Op op, size_t index) {
    op.ForEachInput([&](const std::string& v) { reads.insert(v); });
    op.ForEachOutput([&](const std::string& v) { writes.insert(v); });
    ops.push_back(std::move(op));
    at.push_back(index);
  }
  // Whether `op` must stay after the deferred ops: it reads what they write, or writes what
  // they read or write.
  bool NeededBy(const Op& op) const {
    bool needed = false;
    op.ForEachInput([&](const std::string& v) { needed = needed || writes.count(v); });
    op.ForEachOutput(
        [&](const std::string& v) { needed = needed || writes.count(v) || reads.count(v); });
    return needed;
  }
};

class DeferWeightGradsPass : public Pass {
 public:
  std::string_view name() const override { return "defer-weight-grads"; }
  std::string_view description() const override {
    return "In every backward and backward_input program, moves weight-gradient work (ops "
           "marked weight_grad: dW matmuls, norm and bias partial sums and their small "
           "all-gathers, master-gradient casts) down to just before the next compute op that "
           "reads a collective's result, as much as covers the collective's time by the cost "
           "model (needs opt --device), so that it runs while the collective is in flight; the "
           "rest at the end of the program, after the input gradient is sent on "
           "(sequence parallelism's all-gather before each row-parallel linear's backward "
           "otherwise has nothing to hide under). Only reorders ops: bit-identical. Run after "
           "assign-streams, before overlap-1f1b and insert-events.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    const cost::Estimator* estimator = context.Find<cost::Estimator>();
    if (!estimator)
      return FailedPrecondition(
          "defer-weight-grads places weight-gradient work under collectives by the cost model: "
          "pass --device D to 'pipeweave opt'");
    bool streams = false;
    for (const Program& p : module.programs()) {
      if (!p.info().segment_of.empty() || !p.info().variant_of.empty())
        return FailedPrecondition("defer-weight-grads runs before overlap-1f1b ('", p.name(),
                                  "' is one of its programs): put it before overlap-1f1b");
      for (const Op& op : p.ops()) streams = streams || !OnComputeStream(op);
    }
    if (!streams)
      return FailedPrecondition(
          "defer-weight-grads moves work under collectives on the communication streams, but "
          "every op runs on compute: run split-program and assign-streams before it");
    int moved = 0, points = 0;
    for (Program& program : module.programs())
      if (IsBackward(program)) Reorder(module, program, *estimator, context.ops(), moved, points);
    context.AddStatistic("weight-grad-ops-moved", moved);
    context.AddStatistic("collectives-filled", points);
    return moved > 0;
  }

 private:
  static void Reorder(const Module& module, Program& program, const cost::Estimator& estimator,
                      const OpRegistry& registry, int& moved, int& points) {
    const int rank = PricingRank(module, program);
    auto seconds = [&](const Op& op) {
      auto lookup = [&](const std::string& v) { return module.FindVar(v, &program); };
      StatusOr<cost::OpPrice> p = cost::PriceOp(op, module, rank, estimator, registry, lookup);
      return p.ok() ? p->seconds : 0.0;
    };
    const size_t n = program.ops().size();
    std::vector<Op> out;
    std::vector<size_t> order;  // each emitted op's index in the program before
    out.reserve(n);
    Deferred deferred;
    // Results of collectives issued and not yet read on compute, with their seconds.
    std::unordered_map<std::string, double> in_flight;
    auto emit = [&](Op op, size_t at) {
      out.push_back(std::move(op));
      order.push_back(at);
    };
    // Emits the deferred ops, oldest first, until their compute covers `budget` seconds;
    // one reading a collective emitted among them waits for the next point. With `all`,
    // every one.
    auto flush = [&](bool all, double budget) {
      Deferred keep;
      std::unordered_set<std::string> issued;
      for (size_t k = 0; k < deferred.ops.size(); ++k) {
        Op& op = deferred.ops[k];
        bool waits = false;
        op.ForEachInput([&](const std::string& v) { waits = waits || issued.count(v); });
        if (!all && (waits || budget <= 0 || keep.NeededBy(op))) {
          keep.Push(std::move(op), deferred.at[k]);
          continue;
        }
        if (OnComputeStream(op))
          budget -= seconds(op);
        else
          op.ForEachOutput([&](const std::string& v) { issued.insert(v); });
        emit(std::move(op), deferred.at[k]);
      }
      deferred = std::move(keep);
    };
    for (size_t i = 0; i < n; ++i) {
      Op& op = program.ops()[i];
      if (op.weight_grad) {
        deferred.Push(std::move(op), i);
        continue;
      }
      double wait = 0;  // the longest collective this op reads the result of
      if (OnComputeStream(op))
        op.ForEachInput([&](const std::string& v) {
          auto it = in_flight.find(v);
          if (it == in_flight.end()) return;
          wait = std::max(wait, it->second);
          in_flight.erase(it);
        });
      if (deferred.NeededBy(op)) {
        flush(/*all=*/true, 0);
      } else if (wait > 0 && !deferred.ops.empty()) {
        const size_t before = out.size();
        flush(/*all=*/false, wait);
        if (out.size() > before) ++points;
      }
      if (!OnComputeStream(op)) {
        const double t = seconds(op);
        op.ForEachOutput([&](const std::string& v) { in_flight[v] = t; });
      }
      emit(std::move(op), i);
    }
    flush(/*all=*/true, 0);
    // An op moved when an op from after it now runs before it.
    size_t latest = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      if (k > 0 && order[k] < latest) ++moved;
      latest = std::max(latest, order[k]);
    }
    program.ops() = std::move(out);
  }
};

}  // namespace

PW_REGISTER_PASS(DeferWeightGradsPass)

}  // namespace pw
