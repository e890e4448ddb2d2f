// distributed-optimizer: ZeRO-1 over the dp group. On a planned module with dp replicas, each
// optimizer update of a parameter whose first dim divides by dp runs on this dp rank's shard
// of it only: the gradient sum is reduce-scattered over dp (member i keeps rows i/dp of the
// sum), scaled by 1/(micro-batches x dp), the parameter's shard cut out (c_split: a view of
// its own rows where nothing after the all-gather reads the parameter), the update applied
// to the shard with optimizer state of the shard's shape (Adam's moments: 1/dp
// of them per rank), and the updated shards all-gathered into the whole parameter. The
// reduce-scatter sums every element in member order, as the all-reduce it replaces, and the
// scale and the update are element-wise: training is bit-identical to the same plan without
// the pass. Parameters whose first dim does not divide by dp, and updates whose gradient the
// optimizer program reads elsewhere or computes itself (fp16 loss scaling's unscaled sums),
// keep the executor's all-reduce.

#include <map>
#include <set>

#include "ir/grad_reduce.h"
#include "ir/verifier.h"
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

Op Collective(const std::string& type, const std::string& in, const std::string& out, int dp,
              const Op& near) {
  Op op;
  op.type = type;
  op.role = OpRole::kOptimize;
  op.stage = near.stage;
  op.chunk = near.chunk;
  op.origin = near.origin;
  op.SetInput("X", {in}).SetOutput("Out", {out});
  op.SetAttr("group", std::string("dp"));
  op.SetAttr("axis", int64_t{0});
  op.SetAttr("nranks", int64_t{dp});
  return op;
}

class DistributedOptimizerPass : public Pass {
 public:
  std::string_view name() const override { return "distributed-optimizer"; }
  std::string_view description() const override {
    return "ZeRO-1 over dp, after schedule (it scales by 1/(micro-batches x dp)): each "
           "sgd/adam update of a parameter whose first dim divides by dp reduce-scatters the "
           "gradient sum over dp, updates only this rank's rows of the parameter with optimizer "
           "state of that shard's shape (Adam's moments: 1/dp per rank) and all-gathers the "
           "updated parameter. Bit-identical to the plan without it; changes nothing at dp 1.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.plan.empty())
      return FailedPrecondition(
          "distributed-optimizer needs a plan: run it after split-program and schedule");
    const int dp = module.mesh.dp;
    if (dp < 2) return false;
    if (module.metadata.GetString(kMetaGradReduce) == kGradReduceInBackward)
      return FailedPrecondition(
          "distributed-optimizer reduce-scatters the gradients the executor would all-reduce "
          "in the backward: run it before overlap-grad-reduce");
    const double scale =
        static_cast<double>(1.0f / static_cast<float>(module.plan.num_micro_batches * dp));
    std::map<std::string, Shape> resized;  // optimizer state -> its shard's shape
    bool changed = false;
    for (Program& program : module.programs()) {
      if (program.info().kind != "optimizer") continue;
      // Sums another op of the program reads too (fp16 loss scaling's unscale and overflow
      // check) must be whole and reduced there: their updates stay whole.
      std::map<std::string, int> readers;
      std::set<std::string> written;  // vars the program computes itself (e.g. @UNSCALED)
      for (const Op& op : program.ops()) {
        op.ForEachInput([&](const std::string& v) { ++readers[v]; });
        op.ForEachOutput([&](const std::string& v) { written.insert(v); });
      }
      std::vector<Op> out;
      out.reserve(program.ops().size());
      for (Op& op : program.ops()) {
        if (!IsUpdate(op)) {
          out.push_back(std::move(op));
          continue;
        }
        const std::string param = op.Input("Param"), grad = op.Input("Grad");
        const Var* p = program.FindVar(param);
        const Var* g = program.FindVar(grad);
        if (!p || !g)
          return NotFound("distributed-optimizer: ", op.type, " of '", param, "' in program '",
                          program.name(), "' reads undeclared vars");
        // Only a gradient sum the executor hands the program (accumulated, not yet reduced):
        // anything the program computes from the sums is already reduced.
        if (p->shape.empty() || p->shape[0] % dp != 0 || readers[grad] > 1 || written.count(grad)) {
          context.AddStatistic("updates-left-whole");
          out.push_back(std::move(op));
          continue;
        }
        Var g_shard = *g, p_shard = *p;
        g_shard.name = grad + "@dp_shard";
        p_shard.name = param + "@dp_shard";
        for (Var* v : {&g_shard, &p_shard}) {
          v->shape[0] /= dp;
          v->persistable = false;
          v->is_parameter = false;
          v->init = Initializer{};
          if (!program.AddVar(*v))
            return FailedPrecondition("distributed-optimizer: program '", program.name(),
                                      "' already declares '", v->name, "' (the pass ran twice?)");
        }
        out.push_back(Collective("c_reduce_scatter_sum", grad, g_shard.name, dp, op));
        Op mean;
        mean.type = "scale";
        mean.role = OpRole::kOptimize;
        mean.stage = op.stage;
        mean.chunk = op.chunk;
        mean.origin = op.origin;
        mean.SetInput("X", {g_shard.name}).SetOutput("Out", {g_shard.name});
        mean.SetAttr("scale", scale).SetAttr("bias", 0.0);
        out.push_back(std::move(mean));
        // A view of the parameter's own rows: the update writes them in place (what a
        // deferred all-gather, overlap-param-gather, then sends from).
        out.push_back(Collective("c_split", param, p_shard.name, dp, op));
        out.back().SetAttr("view", true);
        op.SetInput("Param", {p_shard.name}).SetOutput("ParamOut", {p_shard.name});
        op.SetInput("Grad", {g_shard.name});
        for (const std::string& slot : ElementStateSlots(op)) {
          const Var* state = program.FindVar(op.Input(slot));
          if (!state) return NotFound("distributed-optimizer: '", op.Input(slot), "' undeclared");
          Shape shard = state->shape;
          shard[0] /= dp;
          resized[state->name] = shard;
        }
        const Op& update = out.emplace_back(std::move(op));
        out.push_back(Collective("c_all_gather", p_shard.name, param, dp, update));
        context.AddStatistic("updates-sharded");
        changed = true;
      }
      program.ops() = std::move(out);
      // The view only where nothing after the all-gather reads the parameter (amp's cast of
      // the updated parameter to its 16-bit copy does): elsewhere the slice is a copy.
      for (size_t k = 0; k < program.ops().size(); ++k) {
        Op& split = program.ops()[k];
        if (split.type == "c_split" && split.attrs.GetBool("view", false) &&
            !InPlaceShardGather(program, k)) {
          split.SetAttr("view", false);
          context.AddStatistic("updates-through-a-copy");
        }
      }
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
