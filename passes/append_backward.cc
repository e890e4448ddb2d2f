// append-backward: the backward ops and the optimizer update of an unsplit module.

#include <unordered_map>
#include <unordered_set>

#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

constexpr double kSgdDefaultLr = 0.01;
constexpr double kAdamDefaultLr = 0.001;

// Builds the backward part of one program: grad ops from the grad makers, gradient
// accumulation, zero gradients, then hands back every parameter's gradient.
//
// Gradients flow as "contributions": each op that consumes x adds one (a var its grad op
// writes, or an alias of an output gradient). x@GRAD is *finalized* just before the first
// op that reads it: one contribution is used as is, several are summed into x@GRAD, none
// becomes zeros. In a program where every var is written once, every consumer of x comes
// after x's producer, so walking in reverse sees all contributions before the first read.
class BackwardBuilder {
 public:
  BackwardBuilder(Program& program, const OpRegistry& ops, PassContext& context)
      : program_(program), ops_(ops), context_(context) {}

  Status Build(const std::string& loss, size_t loss_op);
  // The final gradient var of a parameter (after a sum when it has several contributions),
  // or "" when the loss does not depend on it.
  StatusOr<std::string> ParameterGrad(const std::string& param);
  // The backward ops in execution order; Build and ParameterGrad append to it.
  std::vector<Op>& ops() { return backward_; }
  // Declares a var this pass adds; an error when the program already has that name.
  Status Declare(Var var);

 private:
  struct Contribution {
    std::string name;  // the var holding it
    int op = -1;       // index in backward_ of the writer; -1 for an alias
    size_t slot = 0;   // output slot and position of the var in the writer
    size_t index = 0;
    int stage = -1;  // placement of the forward op that consumed the var
    int chunk = 0;
    std::string origin;  // that forward op (Op::origin)
  };
  struct GradState {
    std::vector<Contribution> parts;
    bool finalized = false;
    std::string final_name;
  };

  void ComputeNeedsGrad(const std::string& loss, size_t loss_op);
  bool NeedsGrad(const std::string& var) const;
  Status ProcessOp(size_t index);
  // Makes var@GRAD readable by a grad op of `reader` and returns the name to read.
  StatusOr<std::string> Finalize(const std::string& var, const Op& reader);
  Status AddContribution(const std::string& var, Contribution part);
  Status DeclareGradLike(const std::string& name, const std::string& forward_var);
  Op& EmitPlaced(std::string type, int stage, int chunk, std::string origin);
  std::string UniqueName(const std::string& hint) const;

  Program& program_;
  const OpRegistry& ops_;
  PassContext& context_;
  std::unordered_set<std::string> from_param_;    // a parameter reaches it
  std::unordered_set<std::string> reaches_loss_;  // it reaches the loss
  std::unordered_map<std::string, GradState> grads_;
  std::unordered_set<std::string> declared_;
  std::vector<Op> backward_;
};

bool BackwardBuilder::NeedsGrad(const std::string& var) const {
  const Var* v = program_.FindVar(var);
  return v && v->dtype == DataType::kFloat32 && from_param_.count(var) && reaches_loss_.count(var);
}

void BackwardBuilder::ComputeNeedsGrad(const std::string& loss, size_t loss_op) {
  const std::vector<Op>& ops = program_.ops();
  for (const Var& v : program_.vars())
    if (v.is_parameter) from_param_.insert(v.name);
  for (size_t i = 0; i <= loss_op; ++i) {
    bool reached = false;
    ops[i].ForEachInput([&](const std::string& in) { reached = reached || from_param_.count(in); });
    if (reached) ops[i].ForEachOutput([&](const std::string& out) { from_param_.insert(out); });
  }
  reaches_loss_.insert(loss);
  for (size_t i = loss_op + 1; i-- > 0;) {
    bool reaches = false;
    ops[i].ForEachOutput(
        [&](const std::string& o) { reaches = reaches || reaches_loss_.count(o); });
    if (reaches) ops[i].ForEachInput([&](const std::string& in) { reaches_loss_.insert(in); });
  }
}

Status BackwardBuilder::Build(const std::string& loss, size_t loss_op) {
  ComputeNeedsGrad(loss, loss_op);
  if (!NeedsGrad(loss))
    return FailedPrecondition("the loss '", loss, "' is not f32 or depends on no parameter");

  // Seed: d loss / d loss = 1.
  const Op& loss_def = program_.ops()[loss_op];
  const Var loss_var = *program_.FindVar(loss);
  Op& seed = EmitPlaced("fill_constant", loss_def.stage, loss_def.chunk, OriginName(loss_def));
  seed.SetOutput("Out", {GradVarName(loss)});
  seed.SetAttr("shape", loss_var.shape).SetAttr("dtype", std::string("f32")).SetAttr("value", 1.0);
  PW_RETURN_IF_ERROR(DeclareGradLike(GradVarName(loss), loss));
  grads_[loss].parts.push_back({GradVarName(loss), static_cast<int>(backward_.size()) - 1, 0, 0,
                                loss_def.stage, loss_def.chunk, OriginName(loss_def)});

  for (size_t i = loss_op + 1; i-- > 0;) PW_RETURN_IF_ERROR(ProcessOp(i));
  return OkStatus();
}

Status BackwardBuilder::ProcessOp(size_t index) {
  const Op& fwd = program_.ops()[index];
  auto where = [&] { return StrCat("op ", index, " (", fwd.type, ")"); };

  bool has_output_grad = false;
  fwd.ForEachOutput([&](const std::string& out) {
    auto it = grads_.find(out);
    has_output_grad = has_output_grad || (it != grads_.end() && !it->second.parts.empty());
  });
  std::string input_needing_grad;
  fwd.ForEachInput([&](const std::string& in) {
    if (input_needing_grad.empty() && NeedsGrad(in)) input_needing_grad = in;
  });
  if (!has_output_grad || input_needing_grad.empty()) return OkStatus();

  const OpDef* def = ops_.Find(fwd.type);
  if (!def) return InvalidArgument(where(), ": unknown op type");
  if (!def->grad)
    return FailedPrecondition(where(), " has no gradient, but its input '", input_needing_grad,
                              "' needs one");

  GradContext ctx(
      fwd, [&](const std::string& name) { return program_.FindVar(name); },
      [&](const std::string& name) { return NeedsGrad(name); });
  if (Status s = def->grad(ctx); !s.ok()) return s.WithContext(StrCat("gradient of ", where()));
  std::vector<Op>& emitted = ctx.emitted();

  // Temps are unique within one maker call only; make them unique in the program.
  std::unordered_set<std::string> temps;
  for (Var temp : ctx.temps()) {
    std::string unique = UniqueName(temp.name);
    for (Op& op : emitted) {
      op.RenameInput(temp.name, unique);
      op.RenameOutput(temp.name, unique);
    }
    temp.name = unique;
    temps.insert(unique);
    PW_RETURN_IF_ERROR(Declare(std::move(temp)));
  }

  auto is_output = [&](const std::string& var) {
    bool found = false;
    fwd.ForEachOutput([&](const std::string& out) { found = found || out == var; });
    return found;
  };
  auto is_input = [&](const std::string& var) {
    bool found = false;
    fwd.ForEachInput([&](const std::string& in) { found = found || in == var; });
    return found;
  };

  // Output gradients the grad ops read (or alias) must be final before they run; this
  // may emit sum or zero ops, which therefore precede the grad ops.
  for (Op& op : emitted) {
    for (Slot& slot : op.inputs) {
      for (std::string& name : slot.vars) {
        if (temps.count(name) || !IsGradVarName(name)) continue;
        std::string var = ForwardVarName(name);
        if (!is_output(var))
          return Internal("gradient of ", where(), " reads '", name,
                          "', the gradient of a var the op does not produce");
        PW_ASSIGN_OR_RETURN(name, Finalize(var, fwd));
      }
    }
  }
  std::vector<std::pair<std::string, std::string>> aliases;  // (input, final output grad)
  for (const auto& [input_grad, output_grad] : ctx.aliases()) {
    PW_ASSIGN_OR_RETURN(std::string final_grad, Finalize(ForwardVarName(output_grad), fwd));
    aliases.emplace_back(ForwardVarName(input_grad), final_grad);
  }

  // Append the grad ops; every gradient they write is one contribution to an input.
  for (Op& op : emitted) {
    backward_.push_back(std::move(op));
    int op_index = static_cast<int>(backward_.size()) - 1;
    context_.AddStatistic("grad-ops");
    for (size_t s = 0; s < backward_[op_index].outputs.size(); ++s) {
      for (size_t j = 0; j < backward_[op_index].outputs[s].vars.size(); ++j) {
        std::string name = backward_[op_index].outputs[s].vars[j];
        if (temps.count(name)) continue;
        std::string var = ForwardVarName(name);
        if (!IsGradVarName(name) || !is_input(var))
          return Internal("gradient of ", where(), " writes '", name,
                          "', which is neither the gradient of one of its inputs nor a temp");
        PW_RETURN_IF_ERROR(
            AddContribution(var, {name, op_index, s, j, fwd.stage, fwd.chunk, OriginName(fwd)}));
      }
    }
  }
  for (const auto& [input, grad] : aliases) {
    context_.AddStatistic("aliased-grads");
    PW_RETURN_IF_ERROR(
        AddContribution(input, {grad, -1, 0, 0, fwd.stage, fwd.chunk, OriginName(fwd)}));
  }
  return OkStatus();
}

Status BackwardBuilder::AddContribution(const std::string& var, Contribution part) {
  GradState& grad = grads_[var];
  if (grad.finalized)
    return Internal("the gradient of '", var,
                    "' gets a contribution after it was used: is the var written twice?");
  // A written contribution is named x@GRAD while it is the only one; from the second on
  // each gets its own x@GRAD@RENAME@k (k: its position in the sum), and a first one named
  // x@GRAD is renamed, since the sum will write x@GRAD. Aliases keep their names.
  size_t k = grad.parts.size();
  if (k == 1) {
    Contribution& first = grad.parts[0];
    if (first.op >= 0 && first.name == GradVarName(var)) {
      first.name = StrCat(GradVarName(var), "@RENAME@0");
      backward_[first.op].outputs[first.slot].vars[first.index] = first.name;
      PW_RETURN_IF_ERROR(DeclareGradLike(first.name, var));
    }
  }
  if (part.op >= 0) {
    part.name = k == 0 ? GradVarName(var) : StrCat(GradVarName(var), "@RENAME@", k);
    backward_[part.op].outputs[part.slot].vars[part.index] = part.name;
    PW_RETURN_IF_ERROR(DeclareGradLike(part.name, var));
  }
  grad.parts.push_back(std::move(part));
  return OkStatus();
}

StatusOr<std::string> BackwardBuilder::Finalize(const std::string& var, const Op& reader) {
  GradState& grad = grads_[var];
  if (grad.finalized) return grad.final_name;
  grad.finalized = true;
  if (grad.parts.size() == 1) {
    grad.final_name = grad.parts[0].name;
    return grad.final_name;
  }
  grad.final_name = GradVarName(var);
  const Var* forward = program_.FindVar(var);
  if (!forward) return Internal("var '", var, "' is not declared");
  if (grad.parts.empty()) {
    // Read by a grad op but produced by nobody (e.g. an output that does not reach the
    // loss): its gradient is zero.
    Op& fill = EmitPlaced("fill_constant", reader.stage, reader.chunk, OriginName(reader));
    fill.SetOutput("Out", {grad.final_name});
    fill.SetAttr("shape", forward->shape)
        .SetAttr("dtype", std::string(DataTypeName(forward->dtype)))
        .SetAttr("value", 0.0);
    context_.AddStatistic("zero-grad-ops");
  } else {
    // Summed with the consumers when they all sit on one stage, so one gradient instead
    // of several crosses a pipeline boundary; consumers on several stages (a skip
    // connection) each send their part back to the producer's stage, which sums them:
    // every backward edge then mirrors a forward one, as insert-p2p plans it.
    // A sum of weight gradients is itself part of the weight-gradient (W) work.
    std::vector<std::string> parts;
    bool weight_grad = true;
    bool one_place = true;
    for (const Contribution& part : grad.parts) {
      parts.push_back(part.name);
      weight_grad = weight_grad && part.op >= 0 && backward_[part.op].weight_grad;
      one_place =
          one_place && part.stage == grad.parts[0].stage && part.chunk == grad.parts[0].chunk;
    }
    const bool at_reader = !one_place && reader.stage >= 0;
    Op& sum = EmitPlaced("sum", at_reader ? reader.stage : grad.parts.back().stage,
                         at_reader ? reader.chunk : grad.parts.back().chunk,
                         at_reader ? OriginName(reader) : grad.parts.back().origin);
    sum.SetInput("X", std::move(parts)).SetOutput("Out", {grad.final_name});
    sum.weight_grad = weight_grad;
    context_.AddStatistic("sum-ops");
  }
  PW_RETURN_IF_ERROR(DeclareGradLike(grad.final_name, var));
  return grad.final_name;
}

StatusOr<std::string> BackwardBuilder::ParameterGrad(const std::string& param) {
  auto it = grads_.find(param);
  if (it == grads_.end() || it->second.parts.empty()) return std::string();
  return Finalize(param, Op());  // has contributions: no zero fill to place
}

Op& BackwardBuilder::EmitPlaced(std::string type, int stage, int chunk, std::string origin) {
  Op op;
  op.type = std::move(type);
  op.role = OpRole::kBackward;
  op.stage = stage;
  op.chunk = chunk;
  op.origin = std::move(origin);
  backward_.push_back(std::move(op));
  return backward_.back();
}

Status BackwardBuilder::Declare(Var var) {
  if (declared_.count(var.name)) return OkStatus();
  std::string name = var.name;
  if (!program_.AddVar(std::move(var)))
    return FailedPrecondition("var '", name, "' is already declared");
  declared_.insert(name);
  context_.AddStatistic("vars-added");
  return OkStatus();
}

Status BackwardBuilder::DeclareGradLike(const std::string& name, const std::string& forward_var) {
  const Var* forward = program_.FindVar(forward_var);
  if (!forward) return Internal("var '", forward_var, "' is not declared");
  Var grad;
  grad.name = name;
  grad.dtype = forward->dtype;
  grad.shape = forward->shape;
  grad.stage = forward->stage;
  return Declare(std::move(grad));
}

std::string BackwardBuilder::UniqueName(const std::string& hint) const {
  if (!program_.HasVar(hint)) return hint;
  for (int i = 1;; ++i) {
    std::string name = StrCat(hint, "_", i);
    if (!program_.HasVar(name)) return name;
  }
}

// ----------------------------------------------------------------------------------------

class AppendBackwardPass : public Pass {
 public:
  std::string_view name() const override { return "append-backward"; }
  std::string_view description() const override {
    return "Appends the backward ops and one optimizer op per parameter to the program of an "
           "unsplit module. The loss is the module metadata string 'loss', else the first "
           "output of the last op with role loss. loss@GRAD is seeded with 1; the forward ops "
           "are walked in reverse, each through its op's grad maker; a var used by several ops "
           "gets x@GRAD@RENAME@k per use and a sum before x@GRAD is read; a gradient nobody "
           "produces is filled with zeros. adam keeps persistable <param>@MOMENT1, @MOMENT2, "
           "@BETA1_POW and @BETA2_POW. Gradients are those of one micro-batch: runners sum "
           "them over the M micro-batches of a step and scale by 1/M before the optimizer ops.";
  }

  Option<std::string> optimizer{this, "optimizer", "the update rule", "sgd", {"sgd", "adam"}};
  Option<double> lr{this, "lr", "learning rate (default 0.01 for sgd, 0.001 for adam)"};
  Option<double> beta1{this, "beta1", "adam: decay rate of the first moment", 0.9};
  Option<double> beta2{this, "beta2", "adam: decay rate of the second moment", 0.999};
  Option<double> epsilon{this, "epsilon", "adam: added to the denominator", 1e-8};

  Status ValidateOptions() const override {
    if (lr.has_value() && !(lr.value() > 0)) return InvalidArgument("lr must be > 0");
    if (optimizer.value() == "sgd" && (beta1.is_set() || beta2.is_set() || epsilon.is_set()))
      return InvalidArgument("beta1, beta2 and epsilon apply only to optimizer=adam");
    for (const Option<double>* beta : {&beta1, &beta2}) {
      if (!(beta->value() >= 0 && beta->value() < 1))
        return InvalidArgument(beta->name(), " must be in [0, 1)");
    }
    if (!(epsilon.value() > 0)) return InvalidArgument("epsilon must be > 0");
    return OkStatus();
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override;

 private:
  double LearningRate() const {
    if (lr.has_value()) return lr.value();
    return optimizer.value() == "adam" ? kAdamDefaultLr : kSgdDefaultLr;
  }
  Status AppendOptimizer(BackwardBuilder& builder, const Var& param, const std::string& grad,
                         const Op& placement, PassContext& context) const;
};

// The loss var and the index of the op that produces it.
StatusOr<std::pair<std::string, size_t>> FindLoss(const Module& module, const Program& program) {
  const std::vector<Op>& ops = program.ops();
  std::string loss;
  if (const Attribute* attr = module.metadata.Find("loss")) {
    const std::string* name = std::get_if<std::string>(attr);
    if (!name || name->empty())
      return InvalidArgument("module metadata 'loss' must be a non-empty string");
    loss = *name;
    if (!program.HasVar(loss))
      return NotFound("the loss var '", loss, "' named by the module metadata is not declared");
  } else {
    for (size_t i = ops.size(); i-- > 0 && loss.empty();) {
      if (ops[i].role != OpRole::kLoss) continue;
      ops[i].ForEachOutput([&](const std::string& out) {
        if (loss.empty()) loss = out;
      });
      if (loss.empty())
        return InvalidArgument("op ", i, " (", ops[i].type, ") has role loss but no output");
    }
    if (loss.empty())
      return NotFound(
          "no loss: set the module metadata string 'loss' or give the loss op role loss");
  }
  for (size_t i = ops.size(); i-- > 0;) {
    bool writes = false;
    ops[i].ForEachOutput([&](const std::string& out) { writes = writes || out == loss; });
    if (writes) return std::make_pair(loss, i);
  }
  return NotFound("the loss var '", loss, "' is produced by no op");
}

StatusOr<bool> AppendBackwardPass::Run(Module& module, PassContext& context) {
  if (module.programs().size() != 1)
    return FailedPrecondition("expects an unsplit module with one program, got ",
                              module.programs().size(), " (run it before split-program)");
  Program& program = module.main_program();
  for (const Op& op : program.ops()) {
    if (op.role == OpRole::kBackward) return FailedPrecondition("module already has backward ops");
    if (op.role == OpRole::kOptimize) return FailedPrecondition("module already has optimizer ops");
  }
  PW_ASSIGN_OR_RETURN(auto loss, FindLoss(module, program));

  BackwardBuilder builder(program, context.ops(), context);
  PW_RETURN_IF_ERROR(builder.Build(loss.first, loss.second));

  // One update per trained parameter, placed with the parameter's first consumer.
  std::vector<Var> params;
  for (const Var& v : program.vars())
    if (v.is_parameter) params.push_back(v);
  std::unordered_map<std::string, const Op*> first_consumers;
  for (const Op& op : program.ops())
    op.ForEachInput([&](const std::string& in) { first_consumers.emplace(in, &op); });
  for (const Var& param : params) {
    auto consumer = first_consumers.find(param.name);
    if (consumer == first_consumers.end()) continue;
    const Op* first_consumer = consumer->second;
    PW_ASSIGN_OR_RETURN(std::string grad, builder.ParameterGrad(param.name));
    if (grad.empty()) {
      context.AddStatistic("params-without-grad");
      continue;
    }
    PW_RETURN_IF_ERROR(AppendOptimizer(builder, param, grad, *first_consumer, context));
  }

  std::vector<Op>& ops = program.ops();
  ops.reserve(ops.size() + builder.ops().size());
  for (Op& op : builder.ops()) ops.push_back(std::move(op));
  return true;
}

Status AppendBackwardPass::AppendOptimizer(BackwardBuilder& builder, const Var& param,
                                           const std::string& grad, const Op& placement,
                                           PassContext& context) const {
  Op update;
  update.type = optimizer.value();
  update.role = OpRole::kOptimize;
  update.stage = placement.stage;
  update.chunk = placement.chunk;
  update.origin = OriginName(placement);
  update.SetInput("Param", {param.name}).SetInput("Grad", {grad});
  update.SetOutput("ParamOut", {param.name});
  update.SetAttr("lr", LearningRate());
  if (optimizer.value() == "adam") {
    // Optimizer state: persistable, shaped and sharded like the parameter.
    auto state = [&](const std::string& suffix, Shape shape,
                     Initializer init) -> StatusOr<std::string> {
      Var v;
      v.name = param.name + suffix;
      v.dtype = DataType::kFloat32;
      v.shape = std::move(shape);
      v.persistable = true;
      v.stage = placement.stage;
      if (!param.init.key.empty()) init.key = param.init.key + suffix;
      v.init = std::move(init);
      std::string name = v.name;
      PW_RETURN_IF_ERROR(builder.Declare(std::move(v)));
      return name;
    };
    Initializer zeros;
    zeros.kind = Initializer::Kind::kZeros;
    zeros.full_shape = param.init.full_shape;
    zeros.shard_axis = param.init.shard_axis;
    zeros.shard_index = param.init.shard_index;
    zeros.num_shards = param.init.num_shards;
    auto constant = [](double value) {
      Initializer init;
      init.kind = Initializer::Kind::kConstant;
      init.value = value;
      return init;
    };
    PW_ASSIGN_OR_RETURN(std::string m1, state("@MOMENT1", param.shape, zeros));
    PW_ASSIGN_OR_RETURN(std::string m2, state("@MOMENT2", param.shape, zeros));
    PW_ASSIGN_OR_RETURN(std::string b1, state("@BETA1_POW", {1}, constant(beta1.value())));
    PW_ASSIGN_OR_RETURN(std::string b2, state("@BETA2_POW", {1}, constant(beta2.value())));
    update.SetInput("Moment1", {m1}).SetInput("Moment2", {m2});
    update.SetInput("Beta1Pow", {b1}).SetInput("Beta2Pow", {b2});
    update.SetOutput("Moment1Out", {m1}).SetOutput("Moment2Out", {m2});
    update.SetOutput("Beta1PowOut", {b1}).SetOutput("Beta2PowOut", {b2});
    update.SetAttr("beta1", beta1.value()).SetAttr("beta2", beta2.value());
    update.SetAttr("epsilon", epsilon.value());
  }
  builder.ops().push_back(std::move(update));
  context.AddStatistic("optimizer-ops");
  return OkStatus();
}

}  // namespace

PW_REGISTER_PASS(AppendBackwardPass)

}  // namespace pw
