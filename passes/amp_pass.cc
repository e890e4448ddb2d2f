// amp: mixed precision on the training program of an unsplit module, as Megatron and
// Paddle's AMP (O2) run it. Compute ops run in bf16 or f16; losses, reductions to a scalar
// and optimizer updates in f32 (each op definition's AmpPolicy says which).
//
//   - f32 master weights: every parameter P keeps its f32 var, which only the optimizer
//     reads and writes. Compute ops read a persistable low-precision copy P@bf16 that the
//     optimizer program refreshes by one cast after the update (and that starts as P's
//     initial values rounded), so a parameter is cast once per step, not per use.
//   - casts where dtypes meet: one per (var, dtype, placement), reused by every later
//     reader there (a forward cast serves the backward too).
//   - master gradients: the gradient of P@bf16 is cast to f32 P@GRAD right after the op
//     that finishes it, so the executors sum micro-batches and all-reduce over dp in f32;
//     sums of several contributions to a parameter's gradient run in f32. An op that can
//     write f32 from 16-bit operands (its definition has out_dtype: the weight-gradient
//     GEMM) writes P@GRAD itself, its f32 sums unrounded, as Megatron's main_grad takes
//     them: no 16-bit gradient, no cast.
//   - grad-allreduce=low: the optimizer program all-reduces the gradients over dp itself,
//     in the low dtype (cast, c_allreduce_sum, cast back), instead of the executor in f32.
//   - grad-accumulation=low: parameter gradients stay in the low dtype: each micro-batch's
//     GEMM writes a 16-bit gradient that the executor adds into a 16-bit sum (no fused
//     accumulation) and all-reduces over dp as it is (in the backward with
//     overlap-grad-reduce, as PyTorch DDP does), and the optimizer program casts the sums
//     to f32. Megatron-LM's fp16 default before gradient-accumulation fusion
//     (param.main_grad.add_(param.grad) after the GEMM, or autograd's own accumulation,
//     without --accumulate-allreduce-grads-in-fp32), as its 2021 runs trained.
//   - fp16 (or loss-scaling=dynamic): dynamic loss scaling (passes/loss_scaling.h).

#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ops/defs/def_util.h"
#include "passes/loss_scaling.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

// The name of `var` converted to `dtype`: "h@bf16".
std::string DtypeVarName(const std::string& var, DataType dtype) {
  return StrCat(var, "@", DataTypeName(dtype));
}

// Rewrites one program; see the file comment.
class AmpRewriter {
 public:
  struct Options {
    DataType low = DataType::kBFloat16;
    bool grad_allreduce_low = false;
    bool grad_accumulation_low = false;  // the executor then reduces the 16-bit sums
    bool loss_scaling = false;
    double init_scale = 65536;
    int64_t growth_interval = 2000;
    double growth_factor = 2;
    double backoff_factor = 0.5;
  };

  AmpRewriter(Module& module, PassContext& context, Options options)
      : module_(module),
        program_(module.main_program()),
        registry_(context.ops()),
        context_(context),
        o_(options) {}

  Status Run() {
    FindParameterGradients();
    PW_RETURN_IF_ERROR(AddLowParameterCopies());
    PW_RETURN_IF_ERROR(RewriteTrainingOps());
    PW_RETURN_IF_ERROR(RewriteOptimizerOps());
    program_.ops() = std::move(out_);
    return OkStatus();
  }

 private:
  bool IsParamGrad(const std::string& var) const { return param_grads_.count(var) > 0; }

  // Gradients the optimizer reads: its inputs that the training ops write.
  void FindParameterGradients() {
    std::unordered_set<std::string> written;
    for (const Op& op : program_.ops()) {
      if (op.role == OpRole::kOptimize) {
        op.ForEachInput([&](const std::string& v) {
          const Var* var = program_.FindVar(v);
          if (written.count(v) && var && !var->persistable) param_grads_.insert(v);
        });
      } else {
        op.ForEachOutput([&](const std::string& v) { written.insert(v); });
      }
    }
  }

  // The dtype an op computes in; kInvalid when its attributes decide (kAsIs).
  DataType ComputeDtype(const Op& op, const OpDef& def) const {
    if (def.amp == AmpPolicy::kAsIs) return DataType::kInvalid;
    if (def.amp == AmpPolicy::kF32 || op.role == OpRole::kOptimize) return DataType::kFloat32;
    // Contributions to a parameter's gradient are summed at full precision, unless the
    // gradients stay low.
    if (op.type == "sum" && IsParamGrad(op.Output("Out")) && !o_.grad_accumulation_low)
      return DataType::kFloat32;
    return o_.low;
  }

  // The dtype input `slot` of `op` must have: its compute dtype, f32 for f32_inputs.
  static DataType WantedDtype(const OpDef& def, const std::string& slot, DataType compute) {
    for (const std::string& s : def.f32_inputs)
      if (s == slot) return DataType::kFloat32;
    return compute;
  }

  StatusOr<const OpDef*> Def(const Op& op) const {
    const OpDef* def = registry_.Find(op.type);
    if (!def) return InvalidArgument("op type '", op.type, "' is not registered");
    return def;
  }

  Status Declare(Var var) {
    std::string name = var.name;
    if (!program_.AddVar(std::move(var)))
      return FailedPrecondition("var '", name, "' is already declared: amp runs once");
    context_.AddStatistic("vars-added");
    return OkStatus();
  }

  // P@bf16 for every parameter a compute op reads in the low dtype.
  Status AddLowParameterCopies() {
    for (const Op& op : program_.ops()) {
      if (op.role == OpRole::kOptimize) continue;
      PW_ASSIGN_OR_RETURN(const OpDef* def, Def(op));
      DataType compute = ComputeDtype(op, *def);
      if (compute == DataType::kInvalid) continue;
      for (const Slot& s : op.inputs) {
        if (WantedDtype(*def, s.name, compute) != o_.low) continue;
        for (const std::string& v : s.vars) {
          const Var* var = program_.FindVar(v);
          if (!var || !var->is_parameter || low_copy_.count(v)) continue;
          if (var->dtype != DataType::kFloat32)
            return FailedPrecondition("parameter '", v, "' is ", DataTypeName(var->dtype),
                                      ", expected f32 (amp keeps f32 master weights)");
          Var copy = *var;
          copy.name = DtypeVarName(v, o_.low);
          copy.dtype = o_.low;
          copy.is_parameter = false;  // the optimizer trains P; the copy follows it
          low_copy_[v] = copy.name;
          PW_RETURN_IF_ERROR(Declare(std::move(copy)));
          context_.AddStatistic("low-precision-parameter-copies");
        }
      }
    }
    return OkStatus();
  }

  // The name to read `var` as `dtype` at `reader`'s placement: a cast emitted before the
  // reader the first time, the same var afterwards.
  StatusOr<std::string> CastFor(const std::string& var, DataType dtype, const Op& reader,
                                OpRole role) {
    auto key = std::make_tuple(var, dtype, reader.stage, reader.chunk);
    auto it = casts_.find(key);
    if (it != casts_.end()) return it->second;
    const Var* from = program_.FindVar(var);
    Var to = *from;
    to.name = UniqueName(DtypeVarName(var, dtype));
    to.dtype = dtype;
    to.persistable = to.is_parameter = false;
    to.init = Initializer();
    to.stage = reader.stage;
    std::string name = to.name;
    PW_RETURN_IF_ERROR(Declare(std::move(to)));
    Op cast = CastOp(var, name, dtype, reader, role);
    out_.push_back(std::move(cast));
    context_.AddStatistic("casts");
    casts_.emplace(key, name);
    return name;
  }

  static Op CastOp(const std::string& from, const std::string& to, DataType dtype,
                   const Op& placement, OpRole role) {
    Op cast;
    cast.type = "cast";
    cast.role = role;
    cast.stage = placement.stage;
    cast.chunk = placement.chunk;
    cast.SetInput("X", {from}).SetOutput("Out", {to});
    cast.SetAttr("dtype", std::string(DataTypeName(dtype)));
    // A cast for a backward or optimizer op moves with that op's forward op; a forward
    // cast is a forward op of its own.
    cast.origin = role == OpRole::kForward ? std::string() : placement.origin;
    return cast;
  }

  std::string UniqueName(const std::string& hint) const {
    if (!program_.HasVar(hint)) return hint;
    for (int i = 1;; ++i) {
      std::string name = StrCat(hint, "_", i);
      if (!program_.HasVar(name)) return name;
    }
  }

  // The role an op inserted before `op` takes so that split-program puts it where `op`
  // goes: communication ops follow the work before them on their placement.
  OpRole PlacedRole(const Op& op) {
    auto place = std::make_pair(op.stage, op.chunk);
    if (op.role == OpRole::kCommunication) {
      auto it = last_role_.find(place);
      return it == last_role_.end() ? OpRole::kForward : it->second;
    }
    OpRole role = op.role == OpRole::kBackward ? OpRole::kBackward : OpRole::kForward;
    last_role_[place] = role;
    return role;
  }

  // Forward, loss and backward ops in order: inputs cast to what each op computes in,
  // outputs re-typed by the op's inference, parameter gradients cast to f32 after their
  // last writer.
  Status RewriteTrainingOps() {
    for (Op op : program_.ops()) {
      if (op.role == OpRole::kOptimize) {
        optimizer_ops_.push_back(std::move(op));
        continue;
      }
      PW_ASSIGN_OR_RETURN(const OpDef* def, Def(op));
      const OpRole role = PlacedRole(op);
      const DataType compute = ComputeDtype(op, *def);
      if (compute != DataType::kInvalid) {
        for (Slot& s : op.inputs)
          for (std::string& v : s.vars) {
            const Var* var = program_.FindVar(v);
            if (!var || !IsFloatingType(var->dtype)) continue;
            const DataType want = WantedDtype(*def, s.name, compute);
            if (var->dtype == want) continue;
            auto copy = low_copy_.find(v);
            if (copy != low_copy_.end() && want == o_.low) {
              v = copy->second;
              continue;
            }
            PW_ASSIGN_OR_RETURN(v, CastFor(v, want, op, role));
          }
      }
      WideParamGradients(op, *def);
      PW_RETURN_IF_ERROR(RetypeOutputs(op, *def));
      std::vector<Op> grad_casts;
      PW_RETURN_IF_ERROR(MasterGradients(op, role, grad_casts));
      out_.push_back(std::move(op));
      for (Op& cast : grad_casts) out_.push_back(std::move(cast));
    }
    return OkStatus();
  }

  Status RetypeOutputs(const Op& op, const OpDef& def) {
    auto find = [&](const std::string& v) { return program_.FindVar(v); };
    StatusOr<InferContext> inferred = InferOpTypes(def, op, find);
    if (!inferred.ok())
      return inferred.status().WithContext(StrCat(
          op.type, " writing '",
          op.outputs.empty() || op.outputs[0].vars.empty() ? std::string() : op.outputs[0].vars[0],
          "'"));
    for (size_t i = 0; i < op.outputs.size(); ++i)
      for (size_t j = 0; j < op.outputs[i].vars.size(); ++j) {
        const TensorType& t = inferred->outputs()[i][j];
        Var* var = program_.FindVar(op.outputs[i].vars[j]);
        if (var && t.dtype != DataType::kInvalid) var->dtype = t.dtype;
      }
    return OkStatus();
  }

  // An op that can write f32 (out_dtype) and finishes a parameter's gradient from 16-bit
  // operands writes it in f32 (RetypeOutputs then keeps P@GRAD f32: no cast after it).
  void WideParamGradients(Op& op, const OpDef& def) {
    if (o_.grad_accumulation_low) return;
    if (!def.FindAttr(ops::kOutDtypeAttr) || op.attrs.Has(ops::kOutDtypeAttr)) return;
    bool low_inputs = false;
    for (const Slot& s : op.inputs)
      for (const std::string& v : s.vars)
        if (const Var* var = program_.FindVar(v); var && IsLowPrecision(var->dtype))
          low_inputs = true;
    if (!low_inputs) return;
    for (const Slot& s : op.outputs)
      for (const std::string& v : s.vars)
        if (IsParamGrad(v)) {
          op.SetAttr(ops::kOutDtypeAttr, std::string(DataTypeName(DataType::kFloat32)));
          context_.AddStatistic("f32-gradient-gemms");
          return;
        }
  }

  // A low-precision parameter gradient: the op writes P@bf16@GRAD, and a cast after it
  // gives the f32 P@GRAD the optimizer reads.
  Status MasterGradients(Op& op, OpRole role, std::vector<Op>& casts) {
    if (o_.grad_accumulation_low) return OkStatus();  // the optimizer casts the sums
    for (Slot& s : op.outputs)
      for (std::string& v : s.vars) {
        if (!IsParamGrad(v)) continue;
        Var* var = program_.FindVar(v);
        if (!var || var->dtype == DataType::kFloat32) continue;
        Var low = *var;
        low.name = UniqueName(GradVarName(DtypeVarName(ForwardVarName(v), var->dtype)));
        var->dtype = DataType::kFloat32;
        std::string master = v;
        v = low.name;
        PW_RETURN_IF_ERROR(Declare(std::move(low)));
        Op cast = CastOp(v, master, DataType::kFloat32, op, role);
        cast.weight_grad = op.weight_grad;
        casts.push_back(std::move(cast));
        context_.AddStatistic("master-gradient-casts");
      }
    return OkStatus();
  }

  // Optimizer ops read f32 master weights and gradients; each update is followed by the
  // cast that refreshes the parameter's low-precision copy.
  Status RewriteOptimizerOps() {
    if (o_.grad_accumulation_low) {
      PW_RETURN_IF_ERROR(LowGradientsToMaster());
    } else if (o_.grad_allreduce_low && module_.mesh.dp > 1) {
      PW_RETURN_IF_ERROR(GradAllReduceInLow());
    }
    for (Op& op : optimizer_ops_) {
      std::vector<Op> refresh;
      op.ForEachOutput([&](const std::string& v) {
        auto copy = low_copy_.find(v);
        if (copy == low_copy_.end()) return;
        refresh.push_back(CastOp(v, copy->second, o_.low, op, OpRole::kOptimize));
      });
      out_.push_back(std::move(op));
      for (Op& cast : refresh) {
        out_.push_back(std::move(cast));
        context_.AddStatistic("parameter-copy-refreshes");
      }
    }
    return OkStatus();
  }

  // g -> cast low -> c_allreduce_sum over dp -> cast f32 -> the optimizer reads that.
  Status GradAllReduceInLow() {
    for (Op& op : optimizer_ops_)
      for (Slot& s : op.inputs)
        for (std::string& g : s.vars) {
          if (!IsParamGrad(g)) continue;
          Var low = *program_.FindVar(g);
          low.name = UniqueName(DtypeVarName(g, o_.low));
          low.dtype = o_.low;
          PW_RETURN_IF_ERROR(Declare(low));
          out_.push_back(CastOp(g, low.name, o_.low, op, OpRole::kOptimize));
          PW_ASSIGN_OR_RETURN(std::string reduced, DpAllReduce(low.name, op));
          PW_ASSIGN_OR_RETURN(g, CastToMaster(reduced, g + "@dp", op));
        }
    return OkStatus();
  }

  // grad-accumulation=low: each 16-bit gradient sum (reduced over dp by the executor, as
  // it is) -> cast f32 -> the optimizer reads that.
  Status LowGradientsToMaster() {
    for (Op& op : optimizer_ops_)
      for (Slot& s : op.inputs)
        for (std::string& g : s.vars)
          if (IsParamGrad(g) && program_.FindVar(g)->dtype != DataType::kFloat32) {
            PW_ASSIGN_OR_RETURN(g, CastToMaster(g, g + "@f32", op));
          }
    return OkStatus();
  }

  // c_allreduce_sum of the low `var` over dp before `op`; returns the reduced var.
  StatusOr<std::string> DpAllReduce(const std::string& var, const Op& op) {
    Var reduced = *program_.FindVar(var);
    reduced.name = UniqueName(var + "@dp");
    PW_RETURN_IF_ERROR(Declare(reduced));
    Op reduce;
    reduce.type = "c_allreduce_sum";
    reduce.role = OpRole::kOptimize;
    reduce.stage = op.stage;
    reduce.chunk = op.chunk;
    reduce.origin = op.origin;
    reduce.SetInput("X", {var}).SetOutput("Out", {reduced.name});
    reduce.SetAttr("group", std::string("dp"));
    out_.push_back(std::move(reduce));
    context_.AddStatistic("low-precision-dp-allreduces");
    return reduced.name;
  }

  // A cast of `var` to an f32 var named after `hint` before `op`; returns its name.
  StatusOr<std::string> CastToMaster(const std::string& var, const std::string& hint,
                                     const Op& op) {
    Var master = *program_.FindVar(var);
    master.name = UniqueName(hint);
    master.dtype = DataType::kFloat32;
    PW_RETURN_IF_ERROR(Declare(master));
    out_.push_back(CastOp(var, master.name, DataType::kFloat32, op, OpRole::kOptimize));
    return master.name;
  }

  Module& module_;
  Program& program_;
  const OpRegistry& registry_;
  PassContext& context_;
  const Options o_;

  std::unordered_set<std::string> param_grads_;
  std::unordered_map<std::string, std::string> low_copy_;  // P -> P@bf16
  std::map<std::tuple<std::string, DataType, int, int>, std::string> casts_;
  std::map<std::pair<int, int>, OpRole> last_role_;
  std::vector<Op> optimizer_ops_;
  std::vector<Op> out_;
};

class AmpPass : public Pass {
 public:
  std::string_view name() const override { return "amp"; }
  std::string_view description() const override {
    return "Mixed precision on the training program (after append-backward, before "
           "split-program): compute ops in dtype (bf16 or fp16), losses, scalar reductions and "
           "optimizer updates in f32, as each op's definition says. Parameters stay f32 master "
           "weights that only the optimizer touches; compute reads a persistable <param>@bf16 "
           "copy the optimizer refreshes by one cast per step. Casts are inserted where dtypes "
           "meet, one per var and placement. Parameter gradients are f32, so micro-batch sums "
           "and the dp all-reduce run in f32: the weight-gradient GEMM writes its f32 sums "
           "(out_dtype=f32, as Megatron's main_grad), other ops' 16-bit gradients are cast; "
           "grad-allreduce=low all-reduces them over dp in the low dtype instead (dp > 1); "
           "grad-accumulation=low keeps them in the low dtype (each micro-batch's gradient added "
           "into a 16-bit sum after its GEMM, as Megatron-LM's fp16 runs before gradient-"
           "accumulation fusion), all-reduced in it by the executor and cast to f32 by the "
           "optimizer. "
           "fp16 uses dynamic loss scaling (loss-scaling=none turns it off, =dynamic turns it "
           "on for bf16): the backward starts from the scale, each stage's optimizer unscales "
           "its gradients and checks them for inf/NaN, every rank skips the step when any "
           "found one, the scale is multiplied by backoff-factor then and by growth-factor "
           "after growth-interval good steps (one scale for the whole model, every chunk of every "
           "rank checked). post-validate=true checks the pipeline a step late, as the Zero "
           "Bubble paper's optimizer post-validation: each rank updates unless its own "
           "gradients overflowed (after copying the state it changes), the flags' max over pp "
           "is reduced at the next step's start, and the executor undoes a step that "
           "overflowed anywhere and runs the next again, so no rank waits for the slowest "
           "before its updates and the results stay those of the synchronous check.";
  }

  Option<std::string> dtype{this, "dtype", "the low dtype", "bf16", {"bf16", "fp16"}};
  Option<std::string> grad_allreduce{
      this, "grad-allreduce", "dtype of the dp gradient all-reduce", "f32", {"f32", "low"}};
  Option<std::string> grad_accumulation{
      this,
      "grad-accumulation",
      "dtype of the parameter gradients summed over micro-batches (low: 16-bit sums added "
      "after each GEMM and all-reduced as they are, cast to f32 by the optimizer)",
      "f32",
      {"f32", "low"}};
  Option<std::string> loss_scaling{this,
                                   "loss-scaling",
                                   "auto (dynamic for fp16, none for bf16), dynamic or none",
                                   "auto",
                                   {"auto", "dynamic", "none"}};
  Option<double> init_scale{this, "init-scale", "the first loss scale", 65536.0};
  Option<int64_t> growth_interval{this, "growth-interval",
                                  "good steps in a row before the scale grows", 2000};
  Option<double> growth_factor{this, "growth-factor", "the scale's growth", 2.0};
  Option<double> backoff_factor{this, "backoff-factor", "the scale's cut after an overflow", 0.5};
  Option<bool> post_validate{
      this, "post-validate",
      "with loss scaling and pp > 1: each rank updates unless its own gradients overflowed, "
      "the flags' max over the pipeline is reduced at the next step's start, and the executor "
      "redoes a step after one that overflowed anywhere (no wait for the slowest stage before "
      "the updates; the same results, bit for bit)",
      false};

  Status ValidateOptions() const override {
    if (!(init_scale.value() > 0)) return InvalidArgument("init-scale must be > 0");
    if (growth_interval.value() < 1) return InvalidArgument("growth-interval must be >= 1");
    if (!(growth_factor.value() > 1)) return InvalidArgument("growth-factor must be > 1");
    if (!(backoff_factor.value() > 0 && backoff_factor.value() < 1))
      return InvalidArgument("backoff-factor must be in (0, 1)");
    return OkStatus();
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    PW_RETURN_IF_ERROR(CheckModule(module));
    AmpRewriter::Options o;
    o.low = dtype.value() == "bf16" ? DataType::kBFloat16 : DataType::kFloat16;
    o.grad_allreduce_low = grad_allreduce.value() == "low";
    o.grad_accumulation_low = grad_accumulation.value() == "low";
    AmpRewriter rewriter(module, context, o);
    PW_RETURN_IF_ERROR(rewriter.Run());
    const bool scaled = loss_scaling.value() == "dynamic" ||
                        (loss_scaling.value() == "auto" && o.low == DataType::kFloat16);
    if (scaled) {
      LossScalingOptions ls{init_scale.value(), growth_interval.value(), growth_factor.value(),
                            backoff_factor.value(), post_validate.value()};
      PW_RETURN_IF_ERROR(AddLossScaling(module, ls));
      context.AddStatistic("loss-scaled-stages");
      if (ls.post_validate && module.mesh.pp > 1) context.AddStatistic("post-validated");
    } else if (post_validate.value()) {
      return InvalidArgument(
          "post-validate checks loss scaling's overflow flag a step late: "
          "it needs loss scaling (dtype=fp16 or loss-scaling=dynamic)");
    }
    module.metadata.Set("amp", std::string(DataTypeName(o.low)));
    return true;
  }

 private:
  static Status CheckModule(const Module& module) {
    if (module.programs().size() != 1 || !module.main_program().info().kind.empty())
      return FailedPrecondition("amp runs on the unsplit module: put it before split-program");
    if (module.metadata.Has("amp"))
      return FailedPrecondition("the module is already in mixed precision (",
                                module.metadata.GetString("amp"), "): amp runs once");
    const Program& program = module.main_program();
    bool backward = false, optimize = false;
    for (const Op& op : program.ops()) {
      backward = backward || op.role == OpRole::kBackward;
      optimize = optimize || op.role == OpRole::kOptimize;
    }
    if (!backward || !optimize)
      return FailedPrecondition(
          "amp runs on a training program: put append-backward before it (the module has no ",
          backward ? "optimizer" : "backward", " ops)");
    for (const Var& v : program.vars())
      if (IsLowPrecision(v.dtype))
        return FailedPrecondition("var '", v.name, "' is already ", DataTypeName(v.dtype),
                                  ": amp expects an f32 training program");
    return OkStatus();
  }
};

}  // namespace

PW_REGISTER_PASS(AmpPass)

}  // namespace pw
