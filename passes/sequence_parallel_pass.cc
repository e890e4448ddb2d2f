// sequence-parallel: Megatron's sequence parallelism on the forward program of a
// tensor-parallel transformer, before append-backward. Between a row-parallel linear and
// the next column-parallel one every rank used to hold the whole [B, S, H] activation and
// run the same norms, bias and residual adds on it; now each holds its 1/mp of the sequence:
//
//   row-parallel matmul -> c_allreduce_sum      becomes   -> c_reduce_scatter_sum (axis 1)
//   c_identity -> column-parallel matmul        becomes   c_all_gather (axis 1) -> ...
//
// and the ops in between (layer_norm, rms_norm, bias_add, add, gelu, scale, cast, dropout and
// bias_dropout_add: their masks are the shard of the whole sequence's, ops/dropout_mask.h) run
// on the shard. The vocabulary-parallel embedding's all-reduce becomes a reduce-scatter; a
// replicated tensor a shard op needs whole-sequence-wise (the position table, or a residual
// that is not sharded yet) is cut with c_split. The LM head's c_identity becomes an
// all-gather. Found by data flow: an all-reduce over mp is a row-parallel one when its input
// is a matmul by a weight sharded along its rows, or c_embedding's; sharding then
// propagates forward through the ops above, and any other op reading a shard is an error.
//
// Exact: every element is computed from the same sums in the same order as without the
// pass (the reduce-scatter sums in member order, the bits of the all-reduce's slice). The
// one kind of sum the shards would change, a replicated norm's or bias's parameter gradient
// over the whole sequence, keeps its order: the pass marks those ops (seq_parallel_* attrs)
// and their grad makers sum the rank's row groups (ops/defs/row_groups.h), all-gather the
// [B, groups, H] partial sums and add them in row order, as the unsharded kernel does; a
// shard that cuts a group (mp not dividing gcd(S, 8)) all-gathers the activations instead
// (ops/defs/def_util.h). Megatron all-reduces [H] partial sums instead, which rounds
// differently.

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ops/defs/def_util.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

constexpr int kSeqAxis = 1;  // activations are [B, S, H]; tokens [B, S]

bool IsMpCollective(const Op& op, std::string_view type) {
  return op.type == type && op.attrs.GetString("group", "mp") == "mp";
}

// Ops that act on each row (each token) alone: their outputs are sharded when an input is.
bool IsRowWise(const std::string& type) {
  static const std::unordered_set<std::string> kRowWise = {
      "layer_norm", "rms_norm", "bias_add",        "add", "gelu", "scale",
      "cast",       "dropout",  "bias_dropout_add"};
  return kRowWise.count(type) > 0;
}

// Ops that add a per-column Bias to a shard (its gradient sums over the whole sequence).
bool AddsBias(const Op& op) { return op.type == "bias_add" || op.type == "bias_dropout_add"; }

class SequenceParallelPass : public Pass {
 public:
  std::string_view name() const override { return "sequence-parallel"; }
  std::string_view description() const override {
    return "Sequence parallelism (Megatron) on the forward program of a tensor-parallel module, "
           "before append-backward: the all-reduces after row-parallel linears (and the "
           "vocabulary-parallel embedding's) become reduce-scatters along the sequence, the "
           "c_identity before column-parallel linears (and the LM head) all-gathers, and the "
           "norms, bias and residual adds between them run on the rank's 1/mp of the sequence; "
           "activations held between the linears shrink by mp. Bit-identical training: norm "
           "and bias parameter gradients add the ranks' row-group partial sums in row order.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    const int mp = module.mesh.mp;
    if (mp <= 1)
      return FailedPrecondition(
          "sequence-parallel needs a tensor-parallel module (mp > 1), this one has mp ", mp,
          ": build it with --mp 2 or more");
    if (module.programs().size() != 1 || !module.plan.empty())
      return FailedPrecondition(
          "sequence-parallel runs on the unsplit forward program: put it before "
          "append-backward and split-program");
    Program& program = module.main_program();
    for (const Op& op : program.ops())
      if (op.role != OpRole::kForward && op.role != OpRole::kLoss &&
          op.role != OpRole::kUnspecified && op.role != OpRole::kCommunication)
        return FailedPrecondition(
            "sequence-parallel rewrites the forward program: put it before append-backward");

    sharded_.clear();
    std::vector<Op> out;
    out.reserve(program.ops().size() + 8);
    int64_t seq = -1;
    for (Op op : program.ops()) {
      if (IsMpCollective(op, "c_allreduce_sum") && IsRowParallelOutput(program, op.Input("X"))) {
        const Var* x = program.FindVar(op.Input("X"));
        if (!x || x->shape.size() < 2)
          return InvalidArgument("sequence-parallel: all-reduce '", op.Output("Out"),
                                 "' does not reduce a [batch, sequence, ...] activation");
        if (seq < 0) seq = x->shape[kSeqAxis];
        if (x->shape[kSeqAxis] % mp != 0)
          return InvalidArgument("sequence-parallel: sequence length ", x->shape[kSeqAxis],
                                 " is not divisible by mp ", mp,
                                 " (every rank holds an equal slice of it)");
        op.type = "c_reduce_scatter_sum";
        SetCut(op, mp);
        sharded_.insert(op.Output("Out"));
        context.AddStatistic("reduce-scatters");
        out.push_back(std::move(op));
        continue;
      }
      bool reads_shard = false;
      op.ForEachInput(
          [&](const std::string& v) { reads_shard = reads_shard || sharded_.count(v); });
      if (!reads_shard) {
        out.push_back(std::move(op));
        continue;
      }
      if (IsMpCollective(op, "c_identity")) {
        op.type = "c_all_gather";
        SetCut(op, mp);
        context.AddStatistic("all-gathers");
        out.push_back(std::move(op));
        continue;
      }
      if (!IsRowWise(op.type))
        return InvalidArgument(
            "sequence-parallel: ", op.type, " '", OriginName(op), "' reads the sequence-sharded '",
            FirstShardInput(op),
            "' and cannot run on a shard (a replicated linear, such as an LM head or embedding "
            "without vocabulary parallelism, or K/V linears of replicated kv heads, needs the "
            "whole sequence): build the model with vocabulary parallelism and kv heads split "
            "over mp, or leave sequence-parallel out");
      // Dropout on a shard draws its slice of the whole sequence's mask; its Seed is one
      // value for the micro-batch, not cut.
      const bool drops = op.type == "dropout" || op.type == "bias_dropout_add";
      if (drops) {
        if (op.attrs.GetInt("shard_count", 1) > 1)
          return InvalidArgument("sequence-parallel: ", op.type, " '", OriginName(op),
                                 "' is already sharded along axis ",
                                 op.attrs.GetInt("shard_axis", -1),
                                 " and cannot be cut along the sequence too");
        op.SetAttr("shard_axis", int64_t{kSeqAxis}).SetAttr("shard_count", int64_t{mp});
        op.SetAttr("group", std::string("mp"));
      }
      // Replicated inputs the op combines with a shard element by element: cut them.
      for (Slot& slot : op.inputs) {
        if (op.type == "layer_norm" || op.type == "rms_norm") break;  // Scale, Bias: per column
        if (drops && slot.name == "Seed") continue;
        for (std::string& v : slot.vars) {
          if (sharded_.count(v)) continue;
          const Var* var = program.FindVar(v);
          if (!var) return NotFound("sequence-parallel: var '", v, "' is not declared");
          if (AddsBias(op) && slot.name == "Bias" && static_cast<int>(var->shape.size()) < 2)
            continue;  // [H]: the same for every token
          PW_ASSIGN_OR_RETURN(v, Split(program, out, op, v, mp));
          context.AddStatistic("splits");
        }
      }
      // A per-column parameter now sees a shard of the rows: its gradient gathers them.
      if (op.type == "layer_norm" || op.type == "rms_norm" ||
          (AddsBias(op) && program.FindVar(op.Input("Bias"))->shape.size() < 2)) {
        op.SetAttr(ops::kSeqParallelGroup, std::string("mp"));
        op.SetAttr(ops::kSeqParallelAxis, int64_t{kSeqAxis});
        op.SetAttr(ops::kSeqParallelNranks, int64_t{mp});
      }
      op.ForEachOutput([&](const std::string& v) { sharded_.insert(v); });
      context.AddStatistic("ops-on-shards");
      out.push_back(std::move(op));
    }
    if (sharded_.empty())
      return FailedPrecondition(
          "sequence-parallel found no row-parallel all-reduce over mp (a matmul by a "
          "row-sharded weight, or c_embedding, followed by c_allreduce_sum): nothing to shard");
    program.ops() = std::move(out);
    ShrinkShardedVars(program, mp);
    module.metadata.Set("sequence_parallel", true);
    return true;
  }

 private:
  // A matmul by a weight sharded along its rows (row-parallel), or a vocabulary-parallel
  // embedding lookup.
  static bool IsRowParallelOutput(const Program& program, const std::string& var) {
    for (const Op& op : program.ops()) {
      bool writes = false;
      op.ForEachOutput([&](const std::string& v) { writes = writes || v == var; });
      if (!writes) continue;
      if (op.type == "c_embedding") return true;
      if (op.type != "matmul") return false;
      const Var* w = program.FindVar(op.Input("Y"));
      return w && w->is_parameter && w->init.num_shards > 1 && w->init.shard_axis == 0;
    }
    return false;
  }

  static void SetCut(Op& op, int mp) {
    op.SetAttr("axis", int64_t{kSeqAxis});
    op.SetAttr("nranks", int64_t{mp});
  }

  std::string FirstShardInput(const Op& op) const {
    std::string found;
    op.ForEachInput([&](const std::string& v) {
      if (found.empty() && sharded_.count(v)) found = v;
    });
    return found;
  }

  // This rank's slice of replicated `var` along its sequence axis: the last axis but one of
  // an activation ([B, S, H]) or the first of a per-position table ([S, H]).
  StatusOr<std::string> Split(Program& program, std::vector<Op>& out, const Op& user,
                              const std::string& var, int mp) {
    const std::string name = var + ".seq_shard";
    if (sharded_.count(name)) return name;
    const Var* v = program.FindVar(var);
    const int64_t axis = static_cast<int64_t>(v->shape.size()) - 2;
    if (axis < 0 || v->shape[axis] % mp != 0)
      return InvalidArgument("sequence-parallel: ", user.type, " '", OriginName(user),
                             "' combines the shard with '", var, "', which cannot be cut in ", mp,
                             " along its sequence axis");
    Var shard = *v;
    shard.name = name;
    shard.persistable = false;
    shard.is_parameter = false;
    shard.init = Initializer{};
    shard.shape[axis] /= mp;
    program.AddVar(shard);
    Op split;
    split.type = "c_split";
    split.SetInput("X", {var}).SetOutput("Out", {name});
    split.SetAttr("group", std::string("mp")).SetAttr("axis", axis).SetAttr("nranks", int64_t{mp});
    split.role = user.role;
    split.stage = user.stage;
    split.chunk = user.chunk;
    split.origin = user.origin;
    out.push_back(std::move(split));
    split_vars_.insert(name);  // declared at its shard size already
    sharded_.insert(name);
    return name;
  }

  // The vars the shard ops write: [B, S, ...] -> [B, S / mp, ...]; a per-row statistic
  // (one value per token, flattened) -> its 1/mp.
  void ShrinkShardedVars(Program& program, int mp) {
    for (const std::string& name : sharded_) {
      if (split_vars_.count(name)) continue;
      Var* v = program.FindVar(name);
      if (!v || v->shape.empty()) continue;
      const size_t axis = v->shape.size() >= 2 ? kSeqAxis : 0;
      v->shape[axis] /= mp;
    }
    split_vars_.clear();
  }

  std::unordered_set<std::string> sharded_;
  std::unordered_set<std::string> split_vars_;
};

}  // namespace

PW_REGISTER_PASS(SequenceParallelPass)

}  // namespace pw
