// distributed-optimizer: ZeRO-1 over the dp group. On a planned module with dp replicas, each
// optimizer update of a parameter whose first dim divides by dp runs on this dp rank's shard
// of it only: the gradient sum is reduce-scattered over dp (member i keeps rows i/dp of the
// sum), scaled by 1/(micro-batches x dp), the parameter's shard cut out (c_split: a view of
// its own rows where nothing after the all-gather reads the parameter), the update applied
// to the shard with optimizer state of the shard's shape (Adam's moments: 1/dp
// of them per rank), and the updated shards all-gathered into the whole parameter. Between
// the sum and the update amp may put element-wise ops (GradChain): those run on the shard;
// amp's own dp all-reduce in the low dtype becomes the reduce-scatter (the executor then
// scales the sum as before), and fp16 loss scaling's overflow flag, seeing one shard, is
// max-reduced over dp before anything reads it. The reduce-scatter sums every element in
// member order, as the all-reduce it replaces, and the rest is element-wise: training is
// bit-identical to the same plan without the pass. Parameters whose first dim does not
// divide by dp, and updates whose gradient another op reads too, keep the all-reduce.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/grad_reduce.h"
#include "ir/verifier.h"
#include "passes/loss_scaling.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

bool IsUpdate(const Op& op) { return op.type == "sgd" || op.type == "adam"; }

// The optimizer state an update op keeps per element of its parameter.
std::vector<std::string> ElementStateSlots(const Op& op) {
  if (op.type == "adam") return {"Moment1", "Moment2"};
  return {};
}

// An optimizer op of type `type` on X -> Out, placed with `near` (its stage, chunk, origin).
Op OptimizerOp(const std::string& type, const std::string& in, const std::string& out,
               const Op& near) {
  Op op;
  op.type = type;
  op.role = OpRole::kOptimize;
  op.stage = near.stage;
  op.chunk = near.chunk;
  op.origin = near.origin;
  op.SetInput("X", {in}).SetOutput("Out", {out});
  return op;
}

// A collective over dp that cuts or joins rows (axis 0).
Op Collective(const std::string& type, const std::string& in, const std::string& out, int dp,
              const Op& near) {
  Op op = OptimizerOp(type, in, out, near);
  op.SetAttr("group", std::string("dp"));
  op.SetAttr("axis", int64_t{0});
  op.SetAttr("nranks", int64_t{dp});
  return op;
}

// Who reads and who writes each var of a program, counted once for all its updates' chains.
struct ProgramUses {
  explicit ProgramUses(const Program& program) {
    const std::vector<Op>& ops = program.ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      ops[k].ForEachInput([&](const std::string& v) { ++readers[v]; });
      ops[k].ForEachOutput([&](const std::string& v) { writers[v].push_back(k); });
    }
  }
  std::map<std::string, int> readers;
  std::map<std::string, std::vector<size_t>> writers;
};

// The element-wise ops between an update and the gradient sum it reads: amp's casts and dp
// all-reduce in the low dtype (grad-allreduce=low) and fp16 loss scaling's unscale and
// overflow check. Each of them works element by element (the all-reduce: each element
// summed over dp in member order, as a reduce-scatter sums it), so the chain can run on this
// dp rank's rows alone.
struct GradChain {
  std::string grad;               // the gradient sum the executor hands the program
  std::vector<std::string> vars;  // the chain's values after the reduction: resized to the rows
  int first = -1;                 // the chain's first op (the update, when it reads the sum)
  int reduce = -1;                // its dp all-reduce, or -1 (the executor's)
  std::vector<size_t> checks;     // its check_finite_and_unscale ops
};

// The chain of update `u`; nullopt where any value on it is read by another op too, or made
// by an op that is not element-wise, or the sum is not one the backward computed.
std::optional<GradChain> FindGradChain(const Program& program, const ProgramUses& uses, size_t u,
                                       int dp, const std::set<std::string>& computed) {
  const std::vector<Op>& ops = program.ops();
  GradChain chain;
  chain.first = static_cast<int>(u);
  std::string v = ops[u].Input("Grad");
  bool after_reduce = true;  // the values the all-reduce (or a reduce-scatter before) makes
  while (true) {
    auto r = uses.readers.find(v);
    if (r == uses.readers.end() || r->second != 1) return std::nullopt;
    auto w = uses.writers.find(v);
    if (w == uses.writers.end()) break;  // made by no op of the program: the sum
    if (w->second.size() != 1) return std::nullopt;
    const size_t k = w->second.front();
    const Op& op = ops[k];
    std::string from;
    if (op.type == "cast") {
      from = op.Input("X");
    } else if (op.type == "c_allreduce_sum" && op.attrs.GetString("group") == "dp" &&
               chain.reduce < 0 && op.attrs.GetInt("nranks", dp) == dp) {
      from = op.Input("X");
      chain.reduce = static_cast<int>(k);
    } else if (op.type == "check_finite_and_unscale") {
      const std::vector<std::string>& xs = *op.FindInput("X");
      const std::vector<std::string>& outs = *op.FindOutput("Out");
      for (size_t i = 0; i < outs.size() && i < xs.size(); ++i)
        if (outs[i] == v) from = xs[i];
      chain.checks.push_back(k);
    } else {
      return std::nullopt;
    }
    if (from.empty()) return std::nullopt;
    if (after_reduce) chain.vars.push_back(v);
    after_reduce = after_reduce && chain.reduce != static_cast<int>(k);
    chain.first = static_cast<int>(k);
    v = from;
  }
  if (!computed.count(v)) return std::nullopt;
  chain.grad = v;
  return chain;
}

// Declares `shard` (a copy of a whole var's declaration) with 1/dp of its rows.
Status DeclareShard(Program& program, Var shard, int dp) {
  shard.shape[0] /= dp;
  shard.persistable = false;
  shard.is_parameter = false;
  shard.init = Initializer{};
  const std::string name = shard.name;
  if (!program.AddVar(std::move(shard)))
    return FailedPrecondition("distributed-optimizer: program '", program.name(),
                              "' already declares '", name, "' (the pass ran twice?)");
  return OkStatus();
}

// The shard's mean over micro-batches and replicas (the scale the executor applies to the
// sums it all-reduces itself).
Op Mean(const std::string& shard, double scale, const Op& near) {
  Op mean = OptimizerOp("scale", shard, shard, near);
  mean.SetAttr("scale", scale).SetAttr("bias", 0.0);
  return mean;
}

class DistributedOptimizerPass : public Pass {
 public:
  std::string_view name() const override { return "distributed-optimizer"; }
  std::string_view description() const override {
    return "ZeRO-1 over dp, after schedule (it scales by 1/(micro-batches x dp)): each "
           "sgd/adam update of a parameter whose first dim divides by dp reduce-scatters the "
           "gradient sum over dp, updates only this rank's rows of the parameter with optimizer "
           "state of that shard's shape (Adam's moments: 1/dp per rank) and all-gathers the "
           "updated parameter. amp's element-wise ops between the sum and the update (fp16's "
           "unscale and overflow check, whose flag is then max-reduced over dp; the 16-bit "
           "all-reduce of grad-allreduce=low, which becomes the reduce-scatter) run on the "
           "shard. Bit-identical to the plan without it; changes nothing at dp 1.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.plan.empty())
      return FailedPrecondition(
          "distributed-optimizer needs a plan: run it after split-program and schedule");
    const int dp = module.mesh.dp;
    if (dp < 2) return false;
    if (IsPostValidated(module))
      return FailedPrecondition(
          "distributed-optimizer does not shard post-validated loss scaling's copies of the "
          "optimizer state: drop amp's post-validate, or the distributed optimizer");
    if (module.metadata.GetString(kMetaGradReduce) == kGradReduceInBackward)
      return FailedPrecondition(
          "distributed-optimizer reduce-scatters the gradients the executor would all-reduce "
          "in the backward: run it before overlap-grad-reduce");
    const double scale =
        static_cast<double>(1.0f / static_cast<float>(module.plan.num_micro_batches * dp));
    // Vars the forward and backward write: the gradient sums the executor hands the
    // optimizer programs (another chunk's optimizer computes the rest, already reduced).
    std::set<std::string> computed;
    for (const Program& program : module.programs())
      if (program.info().kind != "optimizer")
        for (const Op& op : program.ops())
          op.ForEachOutput([&](const std::string& v) { computed.insert(v); });
    std::map<std::string, Shape> resized;              // optimizer state -> its shard's shape
    std::map<std::string, std::string> reduced_flags;  // overflow flag -> its max over dp
    bool changed = false;
    for (Program& program : module.programs()) {
      if (program.info().kind != "optimizer") continue;
      std::vector<Op>& ops = program.ops();
      // Per update: the element-wise chain from its gradient sum, or why it stays whole.
      std::map<size_t, GradChain> chains;
      const ProgramUses uses(program);
      for (size_t i = 0; i < ops.size(); ++i) {
        if (!IsUpdate(ops[i])) continue;
        const Var* p = program.FindVar(ops[i].Input("Param"));
        if (!p)
          return NotFound("distributed-optimizer: ", ops[i].type, " of '", ops[i].Input("Param"),
                          "' in program '", program.name(), "' reads undeclared vars");
        std::optional<GradChain> chain = FindGradChain(program, uses, i, dp, computed);
        if (!chain || p->shape.empty() || p->shape[0] % dp != 0) {
          context.AddStatistic("updates-left-whole");
          continue;
        }
        chains.emplace(i, std::move(*chain));
      }
      if (chains.empty()) continue;
      // Where each chain's reduction goes: its dp all-reduce becomes a reduce-scatter in
      // place; else a reduce-scatter and the mean open the chain, before its first op.
      std::map<size_t, std::vector<Op>> before, after;
      std::set<size_t> checks;  // overflow checks that now see one shard
      for (auto& [i, chain] : chains) {
        Op& update = ops[i];
        const std::string param = update.Input("Param");
        for (const std::string& v : chain.vars) {
          Var* var = program.FindVar(v);
          if (!var) return NotFound("distributed-optimizer: '", v, "' undeclared");
          var->shape[0] /= dp;
        }
        if (chain.reduce >= 0) {
          Op& all_reduce = ops[chain.reduce];
          all_reduce.type = "c_reduce_scatter_sum";
          all_reduce.SetAttr("axis", int64_t{0});
          all_reduce.SetAttr("nranks", int64_t{dp});
        } else {
          const Var* g = program.FindVar(chain.grad);
          if (!g) return NotFound("distributed-optimizer: '", chain.grad, "' undeclared");
          Var g_shard = *g;
          g_shard.name = chain.grad + "@dp_shard";
          PW_RETURN_IF_ERROR(DeclareShard(program, g_shard, dp));
          std::vector<Op>& open = before[chain.first];
          open.push_back(Collective("c_reduce_scatter_sum", chain.grad, g_shard.name, dp, update));
          open.push_back(Mean(g_shard.name, scale, update));
          ops[chain.first].RenameInput(chain.grad, g_shard.name);
        }
        checks.insert(chain.checks.begin(), chain.checks.end());
        // A view of the parameter's own rows: the update writes them in place (what a
        // deferred all-gather, overlap-param-gather, then sends from).
        Var p_shard = *program.FindVar(param);
        p_shard.name = param + "@dp_shard";
        PW_RETURN_IF_ERROR(DeclareShard(program, p_shard, dp));
        before[i].push_back(Collective("c_split", param, p_shard.name, dp, update));
        before[i].back().SetAttr("view", true);
        update.SetInput("Param", {p_shard.name}).SetOutput("ParamOut", {p_shard.name});
        for (const std::string& slot : ElementStateSlots(update)) {
          const Var* state = program.FindVar(update.Input(slot));
          if (!state)
            return NotFound("distributed-optimizer: '", update.Input(slot), "' undeclared");
          Shape shard = state->shape;
          shard[0] /= dp;
          resized[state->name] = shard;
        }
        after[i].push_back(Collective("c_all_gather", p_shard.name, param, dp, update));
        context.AddStatistic("updates-sharded");
        changed = true;
      }
      // An overflow check that reads shards flags only this rank's rows: its flag is
      // max-reduced over dp before anything reads it (the mp and pp reductions, the updates'
      // SkipUpdate, the scale's update), so that every replica skips the same steps.
      for (size_t c : checks) {
        const std::string flag = ops[c].Output("FoundInfinite");
        const std::string reduced = flag + "@dp";
        Var var = *program.FindVar(flag);
        var.name = reduced;
        if (!program.AddVar(var))
          return FailedPrecondition("distributed-optimizer: program '", program.name(),
                                    "' already declares '", reduced, "'");
        Op max = OptimizerOp("c_allreduce_max", flag, reduced, ops[c]);
        max.SetAttr("group", std::string("dp"));
        after[c].push_back(std::move(max));
        reduced_flags[flag] = reduced;
        context.AddStatistic("overflow-checks-reduced-over-dp");
      }
      std::vector<Op> out;
      out.reserve(ops.size() + 4 * chains.size());
      for (size_t i = 0; i < ops.size(); ++i) {
        for (Op& op : before[i]) out.push_back(std::move(op));
        out.push_back(std::move(ops[i]));
        for (Op& op : after[i]) out.push_back(std::move(op));
      }
      ops = std::move(out);
      // The view only where nothing after the all-gather reads the parameter (amp's cast of
      // the updated parameter to its 16-bit copy does): elsewhere the slice is a copy.
      for (size_t k = 0; k < ops.size(); ++k) {
        Op& split = ops[k];
        if (split.type == "c_split" && split.attrs.GetBool("view", false) &&
            !InPlaceShardGather(program, k)) {
          split.SetAttr("view", false);
          context.AddStatistic("updates-through-a-copy");
        }
      }
    }
    // Every reader of a flag reduced over dp reads the reduced one, in whichever optimizer
    // program it is (a rank's later chunks read the check of its first).
    for (Program& program : module.programs())
      for (Op& op : program.ops()) {
        if (op.type == "c_allreduce_max" && op.attrs.GetString("group") == "dp") continue;
        for (const auto& [flag, reduced] : reduced_flags) op.RenameInput(flag, reduced);
      }
    // The state's declarations, wherever a program declares it: the shard's shape, zeros
    // (each dp rank's rows of a sharded parameter's state start at zero alike).
    for (Program& program : module.programs())
      for (const auto& [name, shape] : resized)
        if (Var* v = program.FindVar(name)) {
          v->shape = shape;
          Initializer zeros;
          zeros.kind = Initializer::Kind::kZeros;
          zeros.key = v->init.key;
          zeros.seed = v->init.seed;
          v->init = zeros;
        }
    return changed;
  }
};

}  // namespace

PW_REGISTER_PASS(DistributedOptimizerPass)

}  // namespace pw
