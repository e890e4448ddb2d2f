// overlap-column-parallel-backward: the input-gradient all-reduce of a column-parallel
// linear runs on mp_comm while the compute stream goes on with the weight gradient.
//
// In the backward of Y = X·W with X replicated over the mp group (Megatron's column
// parallel linear: c_identity, then the sharded matmul), dX = dY·Wᵀ is a partial sum that
// the gradient of c_identity all-reduces. Append-backward emits dX, then dW = Xᵀ·dY, then
// the all-reduce, so the all-reduce waits for dW and everything after it waits for the
// all-reduce. This pass issues the all-reduce right after dX, on mp_comm, and moves work
// that does not need the reduced dX ahead of its first reader, so that the reduction runs
// under dW (and that work) and is awaited only where dX is read.
//
// The pattern is found by data flow: an mp all-reduce whose input is written by a matmul
// that reads a weight (a parameter, or its low-precision copy under amp), or by a sum of
// such matmuls: linears that share one replicated input (a Llama's q, k and v, or its gate
// and up projections) sum their input gradients before the one all-reduce. Then the
// weight-gradient matmuls between the first of them and the sum move after the all-reduce
// too. Only ops move; none changes, so results are bit-identical.

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/stream_type.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

struct OpVars {
  std::vector<std::string> reads, writes;
};

std::vector<OpVars> CollectVars(const std::vector<Op>& ops) {
  std::vector<OpVars> out(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].ForEachInput([&](const std::string& v) { out[i].reads.push_back(v); });
    ops[i].ForEachOutput([&](const std::string& v) { out[i].writes.push_back(v); });
  }
  return out;
}

bool Touches(const std::vector<std::string>& vars, const std::unordered_set<std::string>& set) {
  for (const std::string& v : vars)
    if (set.count(v)) return true;
  return false;
}

// What a group of ops reads and writes.
struct VarSets {
  std::unordered_set<std::string> reads, writes;
  void Add(const OpVars& v) {
    reads.insert(v.reads.begin(), v.reads.end());
    writes.insert(v.writes.begin(), v.writes.end());
  }
};

// Whether `later` must stay after ops that touched `earlier`: it reads what they write,
// or writes what they read or write.
bool DependsOn(const OpVars& later, const VarSets& earlier) {
  return Touches(later.reads, earlier.writes) || Touches(later.writes, earlier.writes) ||
         Touches(later.writes, earlier.reads);
}

bool DependsOn(const OpVars& later, const OpVars& earlier) {
  VarSets sets;
  sets.Add(earlier);
  return DependsOn(later, sets);
}

bool IsProgramToRewrite(const Program& program) {
  const std::string& kind = program.info().kind;
  return kind == "backward" || kind == "backward_input";
}

class OverlapColumnParallelBackwardPass : public Pass {
 public:
  std::string_view name() const override { return "overlap-column-parallel-backward"; }
  std::string_view description() const override {
    return "In every backward and backward_input program (after split-program), issues the "
           "mp all-reduce of a column-parallel linear's input gradient right after the matmul "
           "that computes it, on mp_comm, and moves the work that does not read the reduced "
           "gradient (the weight-gradient matmul, and any other independent op) ahead of its "
           "first reader. The pattern is found by data flow: a matmul reading a weight, or a "
           "sum of such matmuls where linears share their input (q, k and v; gate and up), "
           "whose weight gradients then move after the all-reduce too; statistics count the "
           "linears and the all-reduces. Only reorders ops and moves the "
           "all-reduce to mp_comm: results are bit-identical. Run insert-events afterwards so "
           "that the reader waits on the all-reduce with an event.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    bool split = false;
    for (const Program& p : module.programs()) split = split || !p.info().kind.empty();
    if (!split)
      return FailedPrecondition(
          "overlap-column-parallel-backward rewrites backward programs: run split-program "
          "before it");
    bool changed = false;
    for (Program& program : module.programs()) {
      if (!IsProgramToRewrite(program)) continue;
      // Until nothing moves: hoisting may carry an all-reduce past the sweep's position.
      int all_reduces = 0, linears = 0;
      for (bool moved = true; moved;) {
        moved = false;
        for (size_t i = 0; i < program.ops().size(); ++i)
          if (int n = RewriteAt(program, i, context); n > 0) {
            ++all_reduces;
            linears += n;
            moved = true;
          }
      }
      if (all_reduces) {
        context.AddStatistic("linears-rewritten", linears);
        context.AddStatistic("all-reduces-overlapped", all_reduces);
        changed = true;
      }
    }
    return changed;
  }

 private:
  // The op that last writes `var` before op `before`, or -1.
  static int LastWriter(const std::vector<OpVars>& vars, size_t before, const std::string& var) {
    for (size_t k = before; k-- > 0;)
      for (const std::string& w : vars[k].writes)
        if (w == var) return static_cast<int>(k);
    return -1;
  }

  // A matmul reading a weight: a parameter, or a persistable copy of one (amp's P@bf16).
  static bool IsWeightInputMatmul(const Op& op, const Program& program) {
    if (op.type != "matmul") return false;
    bool weight = false;
    op.ForEachInput([&](const std::string& v) {
      const Var* decl = program.FindVar(v);
      weight = weight || (decl && (decl->is_parameter || decl->persistable));
    });
    return weight;
  }

  // The input-gradient matmuls of the column-parallel linears whose all-reduce reduces the
  // output of op `producer`: that matmul, or each matmul the sum `producer` adds up. Empty
  // when the pattern does not hold.
  static std::vector<int> InputGradMatmuls(const Program& program, const std::vector<OpVars>& vars,
                                           int producer) {
    const Op& op = program.ops()[producer];
    if (IsWeightInputMatmul(op, program)) return {producer};
    if (op.type != "sum") return {};
    std::vector<int> matmuls;
    for (const std::string& summand : vars[producer].reads) {
      const int writer = LastWriter(vars, producer, summand);
      if (writer < 0 || !IsWeightInputMatmul(program.ops()[writer], program)) return {};
      matmuls.push_back(writer);
    }
    return matmuls;
  }

  // Rewrites the all-reduce at `at` if it is a column-parallel input-gradient reduction
  // not yet issued right after its matmul (or sum). Returns the number of linears whose
  // reduction it is, 0 when it did nothing.
  int RewriteAt(Program& program, size_t at, PassContext& context) {
    std::vector<Op>& ops = program.ops();
    const Op& reduce = ops[at];
    const OpDef* def = context.ops().Find(reduce.type);
    if (!def || !def->collective || reduce.attrs.GetString("group", "mp") != "mp") return 0;
    std::vector<OpVars> vars = CollectVars(ops);
    const int producer = LastWriter(vars, at, reduce.Input("X"));
    if (producer < 0) return 0;
    const std::vector<int> matmuls = InputGradMatmuls(program, vars, producer);
    if (matmuls.empty()) return 0;
    const bool on_mp_comm = reduce.stream == StreamTypeName(StreamType::kMpComm);
    const int first = *std::min_element(matmuls.begin(), matmuls.end());
    const bool sinks = matmuls.size() > 1 && !Sinkable(vars, first, producer, at).empty();
    if (static_cast<size_t>(producer) + 1 == at && on_mp_comm && !sinks) return 0;  // done

    // The all-reduce moves up to right after its producer past ops it does not depend on
    // and that do not depend on it.
    for (size_t k = producer + 1; k < at; ++k)
      if (DependsOn(vars[at], vars[k]) || DependsOn(vars[k], vars[at])) return 0;
    Op moved = std::move(ops[at]);
    moved.stream = StreamTypeName(StreamType::kMpComm);
    ops.erase(ops.begin() + static_cast<long>(at));
    ops.insert(ops.begin() + producer + 1, std::move(moved));
    int reduce_at = producer + 1;
    if (matmuls.size() > 1) reduce_at = SinkUnneededWork(ops, first, producer);
    HoistIndependentWork(ops, reduce_at);
    return static_cast<int>(matmuls.size());
  }

  // The ops in [first, sum) that neither the sum at `sum` nor the all-reduce `reduce` needs
  // before them (the weight-gradient matmuls between the summed input-gradient matmuls),
  // in order: an op that a staying op depends on stays ahead of it.
  static std::vector<int> Sinkable(const std::vector<OpVars>& vars, int first, int sum,
                                   int reduce) {
    VarSets staying;
    staying.Add(vars[sum]);
    staying.Add(vars[reduce]);
    std::vector<int> sink;
    for (int k = sum - 1; k >= first; --k) {
      const OpVars& mine = vars[k];
      const bool needed = Touches(mine.writes, staying.reads) ||
                          Touches(mine.writes, staying.writes) ||
                          Touches(mine.reads, staying.writes);
      if (needed) {
        staying.Add(mine);
      } else {
        sink.insert(sink.begin(), k);
      }
    }
    return sink;
  }

  // Moves the Sinkable ops of the sum at `sum` (the all-reduce right after it) to right
  // after the all-reduce, keeping their order. Returns the all-reduce's new index.
  static int SinkUnneededWork(std::vector<Op>& ops, int first, int sum) {
    const std::vector<int> sink = Sinkable(CollectVars(ops), first, sum, sum + 1);
    if (sink.empty()) return sum + 1;
    std::vector<Op> stay_block, sink_block;
    for (int k = first, next = 0; k < sum; ++k) {
      const bool sinks = next < static_cast<int>(sink.size()) && sink[next] == k;
      (sinks ? sink_block : stay_block).push_back(std::move(ops[k]));
      next += sinks;
    }
    const int reduce_at = first + static_cast<int>(stay_block.size()) + 1;
    stay_block.push_back(std::move(ops[sum]));
    stay_block.push_back(std::move(ops[sum + 1]));
    for (Op& op : sink_block) stay_block.push_back(std::move(op));
    std::move(stay_block.begin(), stay_block.end(), ops.begin() + first);
    return reduce_at;
  }

  // Ops after the first reader of the all-reduce at `reduce` that neither read its result
  // nor depend on an op that stays behind that reader, keeping their order. An op whose
  // output a staying op reads stays too: moving it ahead would only hold its output longer
  // (recomputed activations, placed by recompute right before their first reader, would
  // pile up ahead of the all-reduce).
  static void HoistIndependentWork(std::vector<Op>& ops, size_t reduce) {
    std::vector<OpVars> vars = CollectVars(ops);
    size_t first = reduce + 1;
    while (first < ops.size() && !DependsOn(vars[first], vars[reduce])) ++first;
    if (first >= ops.size()) return;
    std::vector<bool> stays(ops.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      VarSets staying;
      staying.Add(vars[reduce]);
      staying.Add(vars[first]);
      for (size_t k = first + 1; k < ops.size(); ++k) {
        if (!stays[k] && DependsOn(vars[k], staying)) stays[k] = changed = true;
        if (stays[k]) staying.Add(vars[k]);
      }
      // Read by a staying op after it: stays (which may hold back ops after it in turn).
      std::unordered_set<std::string> read_later(vars[first].reads.begin(),
                                                 vars[first].reads.end());
      for (size_t k = ops.size(); k-- > first + 1;) {
        if (!stays[k] && Touches(vars[k].writes, read_later)) stays[k] = changed = true;
        if (stays[k]) read_later.insert(vars[k].reads.begin(), vars[k].reads.end());
      }
    }
    std::vector<Op> hoisted, staying_ops;
    staying_ops.push_back(std::move(ops[first]));
    for (size_t k = first + 1; k < ops.size(); ++k)
      (stays[k] ? staying_ops : hoisted).push_back(std::move(ops[k]));
    if (hoisted.empty()) {
      std::move(staying_ops.begin(), staying_ops.end(), ops.begin() + first);
      return;
    }
    ops.resize(first);
    for (Op& op : hoisted) ops.push_back(std::move(op));
    for (Op& op : staying_ops) ops.push_back(std::move(op));
  }
};

}  // namespace

PW_REGISTER_PASS(OverlapColumnParallelBackwardPass)

}  // namespace pw
