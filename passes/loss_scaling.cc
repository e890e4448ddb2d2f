#include "passes/loss_scaling.h"

#include <climits>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace pw {
namespace {

// A scalar f32 var (an overflow flag).
Var ScalarVar(const std::string& name) {
  Var v;
  v.name = name;
  v.dtype = DataType::kFloat32;
  return v;
}

bool IsUpdate(const Op& op) { return op.type == "sgd" || op.type == "adam"; }

// The per-stage ops: optimizer-role ops that no forward op made.
bool IsStageOp(const Op& op) { return op.role == OpRole::kOptimize && op.origin.empty(); }

Var Scalar(const std::string& name, double value) {
  Var v;
  v.name = name;
  v.dtype = DataType::kFloat32;
  v.persistable = true;
  v.init.kind = value == 0 ? Initializer::Kind::kZeros : Initializer::Kind::kConstant;
  v.init.value = value;
  return v;
}

Op StageOp(std::string type, const Op& place) {
  Op op;
  op.type = std::move(type);
  op.role = OpRole::kOptimize;
  op.stage = place.stage;
  op.chunk = place.chunk;
  return op;
}

Status Declare(Program& program, Var var) {
  std::string name = var.name;
  if (!program.AddVar(std::move(var)))
    return FailedPrecondition("var '", name, "' is already declared: loss scaling is added once");
  return OkStatus();
}

// Post-validation's ops of one stage, ahead of its first update: the last step's flags
// reduced over the pipeline (issued at the step's start), the copy of the state the stage's
// optimizer ops change unless that reduction asks for a redo, and the updates' skip: this
// step's own flag or the redo. Returns the skip var.
StatusOr<std::string> AddPostValidation(Program& program, int stage, const Op& place,
                                        const std::string& flag, std::vector<Op>& before) {
  Op reduce = StageOp("c_allreduce_max", place);
  reduce.SetInput("X", {kLastOverflowVar}).SetOutput("Out", {kLastOverflowPpVar});
  reduce.SetAttr("group", std::string("pp")).SetAttr(kAtStepStartAttr, true);
  reduce.stream = "dp_comm";
  before.push_back(std::move(reduce));
  // The state the stage's optimizer ops write, but amp's 16-bit parameter copies: each is
  // its master cast (from initialisation on), so the executor casts it again after putting
  // the master back instead of keeping a copy of it too (2 bytes a parameter).
  std::vector<std::string> state, copies;
  std::set<std::string> seen, recast;
  for (const Op& op : program.ops())
    if (op.role == OpRole::kOptimize && op.stage == stage && op.type == "cast")
      recast.insert(op.Output("Out"));
  for (const Op& op : program.ops()) {
    if (op.role != OpRole::kOptimize || op.stage != stage) continue;
    op.ForEachOutput([&](const std::string& v) {
      const Var* var = program.FindVar(v);
      if (var && var->persistable && !recast.count(v) && seen.insert(v).second) state.push_back(v);
    });
  }
  for (const char* v : {kLossScaleVar, kGoodStepsVar, kSkippedStepsVar}) state.push_back(v);
  for (const std::string& v : state) {
    Var copy = *program.FindVar(v);
    copy.name = v + kBackupSuffix;
    copy.is_parameter = false;
    copy.init.kind = Initializer::Kind::kZeros;
    copies.push_back(copy.name);
    // The loss-scale vars are every stage's: declared with the first.
    if (!program.FindVar(copy.name)) program.AddVar(std::move(copy));
  }
  Op backup = StageOp("copy_unless", place);
  backup.SetInput("X", state).SetInput("Skip", {kLastOverflowPpVar}).SetOutput("Out", copies);
  before.push_back(std::move(backup));
  const std::string skip = flag + "@or_redo";
  PW_RETURN_IF_ERROR(Declare(program, ScalarVar(skip)));
  Op any = StageOp("sum", place);
  any.SetInput("X", {flag, kLastOverflowPpVar}).SetOutput("Out", {skip});
  before.push_back(std::move(any));
  return skip;
}

// The per-stage ops for the updates in `ops`, inserted around them. A rank (a pipeline
// stage) with several model chunks has one optimizer program per chunk: its one check
// covers every chunk's gradients and is placed with its first chunk, before the first update
// of any, so that every chunk's updates see the rank's one flag (the executor finalizes the
// gradients a program reads when it starts, so all of them are finalized by then).
Status AddStageOps(Module& module, const LossScalingOptions& o) {
  Program& program = module.main_program();
  std::vector<Op>& ops = program.ops();
  const bool post = o.post_validate && module.mesh.pp > 1;
  if (post) {
    PW_RETURN_IF_ERROR(Declare(program, Scalar(kLastOverflowVar, 0)));
    PW_RETURN_IF_ERROR(Declare(program, Scalar(kLastOverflowPpVar, 0)));
  }
  // Per stage: its first update, its last optimizer op, the first chunk that updates.
  struct Span {
    size_t first_update = SIZE_MAX;
    size_t last = 0;
    int chunk = INT_MAX;
  };
  std::map<int, Span> spans;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].role != OpRole::kOptimize) continue;
    Span& s = spans[ops[i].stage];
    s.last = i;
    if (!IsUpdate(ops[i])) continue;
    if (s.first_update == SIZE_MAX) s.first_update = i;
    s.chunk = std::min(s.chunk, ops[i].chunk);
  }
  std::map<size_t, std::vector<Op>> before, after;  // ops to insert around op indices
  std::set<size_t> moved;                           // ops moved ahead of a check
  // The optimizer op that makes each var (amp's cast and dp all-reduce of a gradient in the
  // low dtype, grad-allreduce=low, sit with the update they feed).
  std::unordered_map<std::string, size_t> made_by;
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].role == OpRole::kOptimize)
      ops[i].ForEachOutput([&](const std::string& v) { made_by[v] = i; });
  int stages = 0;
  for (const auto& [stage, range] : spans) {
    if (range.first_update == SIZE_MAX) continue;  // no update on this stage
    ++stages;
    Op place;
    place.stage = stage;
    place.chunk = range.chunk;
    const std::string tag = StrCat(".s", stage, "c", range.chunk);
    Op check = StageOp("check_finite_and_unscale", place);
    std::vector<std::string> grads, unscaled;
    for (size_t i = range.first_update; i <= range.last; ++i) {
      Op& update = ops[i];
      if (!IsUpdate(update) || update.stage != stage) continue;
      const std::string& g = update.Input("Grad");
      const Var* gv = program.FindVar(g);
      if (!gv) return NotFound("loss scaling: gradient '", g, "' is not declared");
      Var u = *gv;
      u.name = g + "@UNSCALED";
      PW_RETURN_IF_ERROR(Declare(program, u));
      grads.push_back(g);
      unscaled.push_back(u.name);
      update.SetInput("Grad", {u.name});
    }
    // What makes the checked gradients runs with the check: a later chunk's reduction would
    // otherwise run in that chunk's optimizer job, after the first chunk's check reads it.
    std::set<size_t> makers;
    std::vector<std::string> pending = grads;
    while (!pending.empty()) {
      auto m = made_by.find(pending.back());
      pending.pop_back();
      if (m == made_by.end() || ops[m->second].stage != stage || !makers.insert(m->second).second)
        continue;
      ops[m->second].ForEachInput([&](const std::string& v) { pending.push_back(v); });
    }
    for (size_t k : makers) {
      ops[k].chunk = range.chunk;
      if (k < range.first_update) continue;
      before[range.first_update].push_back(ops[k]);
      moved.insert(k);
    }
    check.SetInput("X", grads).SetInput("Scale", {kLossScaleVar});
    std::string flag = "amp.found_inf" + tag;
    check.SetOutput("Out", unscaled).SetOutput("FoundInfinite", {flag});
    PW_RETURN_IF_ERROR(Declare(program, ScalarVar(flag)));
    before[range.first_update].push_back(std::move(check));
    // Any rank's overflow skips the step everywhere: max over mp, then over the pipeline
    // (post-validated: the last step's, at this step's start).
    for (auto [group, degree] :
         {std::pair{"mp", module.mesh.mp}, std::pair{"pp", post ? 1 : module.mesh.pp}}) {
      if (degree <= 1) continue;
      Op reduce = StageOp("c_allreduce_max", place);
      const std::string reduced = StrCat(flag, "@", group);
      PW_RETURN_IF_ERROR(Declare(program, ScalarVar(reduced)));
      reduce.SetInput("X", {flag}).SetOutput("Out", {reduced});
      reduce.SetAttr("group", std::string(group));
      before[range.first_update].push_back(std::move(reduce));
      flag = reduced;
    }
    std::string skip = flag;
    if (post) {
      PW_ASSIGN_OR_RETURN(
          skip, AddPostValidation(program, stage, place, flag, before[range.first_update]));
    }
    for (size_t i = range.first_update; i <= range.last; ++i)
      if (IsUpdate(ops[i]) && ops[i].stage == stage) ops[i].SetInput("SkipUpdate", {skip});
    Op update = StageOp("update_loss_scaling", place);
    update.SetInput("FoundInfinite", {flag})
        .SetInput("LossScale", {kLossScaleVar})
        .SetInput("GoodSteps", {kGoodStepsVar})
        .SetInput("SkippedSteps", {kSkippedStepsVar});
    update.SetOutput("LossScaleOut", {kLossScaleVar})
        .SetOutput("GoodStepsOut", {kGoodStepsVar})
        .SetOutput("SkippedStepsOut", {kSkippedStepsVar});
    update.SetAttr("growth_interval", o.growth_interval)
        .SetAttr("growth_factor", o.growth_factor)
        .SetAttr("backoff_factor", o.backoff_factor);
    after[range.last].push_back(std::move(update));
    if (post) {  // this step's flag, for the next step's reduction over the pipeline
      Op keep = StageOp("scale", place);
      keep.SetInput("X", {flag}).SetOutput("Out", {kLastOverflowVar});
      keep.SetAttr("scale", 1.0).SetAttr("bias", 0.0);
      after[range.last].push_back(std::move(keep));
    }
  }
  if (stages == 0) return FailedPrecondition("loss scaling: the program has no sgd or adam op");
  std::vector<Op> out;
  out.reserve(ops.size() + 4 * spans.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    for (Op& op : before[i]) out.push_back(std::move(op));
    if (!moved.count(i)) out.push_back(std::move(ops[i]));
    for (Op& op : after[i]) out.push_back(std::move(op));
  }
  ops = std::move(out);
  return OkStatus();
}

}  // namespace

Status AddLossScaling(Module& module, const LossScalingOptions& options) {
  Program& program = module.main_program();
  const std::string seed = GradVarName(ModuleLoss(module));
  Op* fill = nullptr;
  for (Op& op : program.ops())
    if (op.type == "fill_constant" && op.Output("Out") == seed) fill = &op;
  if (!fill)
    return FailedPrecondition("loss scaling: no fill_constant seeds '", seed,
                              "' (run append-backward first)");
  // loss@GRAD = S: the whole backward is scaled.
  Op scaled;
  scaled.type = "scale";
  scaled.role = fill->role;
  scaled.stage = fill->stage;
  scaled.chunk = fill->chunk;
  scaled.origin = fill->origin;
  scaled.SetInput("X", {kLossScaleVar}).SetOutput("Out", {seed});
  scaled.SetAttr("scale", 1.0).SetAttr("bias", 0.0);
  *fill = std::move(scaled);
  PW_RETURN_IF_ERROR(Declare(program, Scalar(kLossScaleVar, options.init_scale)));
  PW_RETURN_IF_ERROR(Declare(program, Scalar(kGoodStepsVar, 0)));
  PW_RETURN_IF_ERROR(Declare(program, Scalar(kSkippedStepsVar, 0)));
  return AddStageOps(module, options);
}

bool HasLossScaling(const Module& module) {
  for (const Program& p : module.programs())
    for (const Op& op : p.ops())
      if (op.type == "update_loss_scaling") return true;
  return false;
}

bool IsPostValidated(const Module& module) {
  for (const Program& p : module.programs())
    for (const Op& op : p.ops())
      if (op.type == "copy_unless") return true;
  return false;
}

Status RestageLossScaling(Module& module, std::optional<bool> post_validate) {
  Program& program = module.main_program();
  LossScalingOptions o;
  std::unordered_map<std::string, std::string> original;  // unscaled grad -> grad
  std::unordered_set<std::string> dropped_vars;
  std::vector<Op> kept;
  bool found = false;
  for (Op& op : program.ops()) {
    if (!IsStageOp(op)) {
      kept.push_back(std::move(op));
      continue;
    }
    if (op.type == "update_loss_scaling") {
      found = true;
      o.growth_interval = op.attrs.GetInt("growth_interval");
      o.growth_factor = op.attrs.GetFloat("growth_factor");
      o.backoff_factor = op.attrs.GetFloat("backoff_factor");
    }
    if (op.type == "copy_unless") o.post_validate = true;
    if (op.type == "check_finite_and_unscale") {
      const std::vector<std::string>& xs = *op.FindInput("X");
      const std::vector<std::string>& outs = *op.FindOutput("Out");
      for (size_t i = 0; i < xs.size() && i < outs.size(); ++i) original[outs[i]] = xs[i];
    }
    if (op.type != "update_loss_scaling")
      op.ForEachOutput([&](const std::string& v) { dropped_vars.insert(v); });
  }
  if (!found) return FailedPrecondition("the module has no loss scaling to restage");
  for (Op& op : kept) {
    if (!IsUpdate(op)) continue;
    auto it = original.find(op.Input("Grad"));
    if (it != original.end()) op.SetInput("Grad", {it->second});
    std::erase_if(op.inputs, [](const Slot& s) { return s.name == "SkipUpdate"; });
  }
  program.ops() = std::move(kept);
  program.RemoveVarsIf([&](const Var& v) { return dropped_vars.count(v.name) > 0; });
  if (post_validate) o.post_validate = *post_validate;
  return AddStageOps(module, o);
}

}  // namespace pw
