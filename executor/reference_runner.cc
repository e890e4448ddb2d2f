#include "executor/reference_runner.h"

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "executor/data.h"
#include "executor/initializer.h"
#include "executor/process_resources.h"
#include "executor/scope.h"
#include "ir/alias_ops.h"
#include "ir/thread_cpu_clock.h"
#include "ir/verifier.h"
#include "ops/dropout_mask.h"
#include "ops/kernel.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/vector_math.h"
#include "ops/registry.h"

namespace pw {

namespace {

// An op ready to run: its kernel and the intermediates nothing reads after it.
struct PlannedOp {
  size_t index = 0;  // in the program, for error messages
  const Op* op = nullptr;
  CpuKernel kernel = nullptr;
  std::vector<std::string> free_after;
  bool zero_outputs = true;  // false when the kernel writes every element of its outputs
  bool view = false;         // runs as a view of its input (ir/alias_ops.h): no kernel
};

std::string Where(const PlannedOp& p) { return StrCat("op ", p.index, " (", p.op->type, ")"); }

bool ReadsVar(const Op& op, const std::string& var) {
  bool found = false;
  op.ForEachInput([&](const std::string& v) { found = found || v == var; });
  return found;
}

class ReferenceRunner {
 public:
  ReferenceRunner(const Module& module, const ReferenceOptions& options)
      : module_(module), program_(module.main_program()), options_(options) {}

  Status Prepare();
  StatusOr<ReferenceResult> Run();

 private:
  Status CheckModule() const;
  Status PlanOps();
  Status CheckInputsAvailable() const;
  Status OpenData();
  Status MaterializeState();
  StatusOr<int64_t> Resume();
  Status SaveCheckpoint(int64_t steps_done);
  RankVars Vars() const;
  CheckpointManifest Header() const;

  StatusOr<double> RunMicroBatch(int64_t step, int64_t micro_batch);
  Status ApplyOptimizer();
  // One step: every micro-batch, then the optimizer. Returns the mean loss.
  StatusOr<double> RunStep(int64_t step);
  // A step on `step`'s data whose updates are undone (the root scope copied before it and
  // put back after it), so that the first timed step does not pay for warming up.
  Status WarmUp(int64_t step);
  Status RunOp(const PlannedOp& p, Scope& scope) const;

  const Module& module_;
  const Program& program_;
  const ReferenceOptions& options_;

  std::vector<PlannedOp> train_ops_;     // forward, loss and backward: once per micro-batch
  std::vector<PlannedOp> optimize_ops_;  // once per step, on the accumulated gradients
  std::vector<std::string> feeds_;       // tokens, labels
  std::string loss_var_;
  std::vector<std::string> grads_;  // what the optimizer reads from the micro-batches
  std::optional<TrainingData> data_;

  Scope root_;
  std::map<std::string, Tensor> grad_acc_;
};

Status ReferenceRunner::CheckModule() const {
  if (module_.programs().size() != 1)
    return FailedPrecondition("the reference runner needs an unsplit module, this one has ",
                              module_.programs().size(), " programs");
  if (module_.mesh.mp != 1 || module_.mesh.pp != 1)
    return FailedPrecondition("the reference runner needs a module built with mp=1, pp=1, ",
                              "this one has mp=", module_.mesh.mp, ", pp=", module_.mesh.pp);
  bool has_backward = false, has_optimize = false;
  for (const Op& op : program_.ops()) {
    has_backward = has_backward || op.role == OpRole::kBackward;
    has_optimize = has_optimize || op.role == OpRole::kOptimize;
  }
  if (!has_backward)
    return FailedPrecondition("module has no backward ops (run the append-backward pass first)");
  if (!has_optimize)
    return FailedPrecondition("module has no optimizer ops (run the append-backward pass first)");
  return VerifyModule(module_, ops::Registry());
}

Status ReferenceRunner::PlanOps() {
  const std::vector<Op>& ops = program_.ops();
  const std::set<std::string> in_place = InPlaceVars(program_);
  for (size_t i = 0; i < ops.size(); ++i) {
    PlannedOp p{
        i, &ops[i], FindCpuKernel(ops[i].type), {}, !CpuKernelWritesEveryOutput(ops[i].type)};
    // Collectives run over a group of one here.
    p.view = RunsAsView(ops[i], 1, in_place);
    if (!p.kernel)
      return Unimplemented(Where(p), ": no CPU kernel for op type '", ops[i].type, "'");
    (ops[i].role == OpRole::kOptimize ? optimize_ops_ : train_ops_).push_back(std::move(p));
  }

  // Gradients: what optimize ops read that the micro-batch ops compute.
  std::unordered_set<std::string> computed;
  for (const PlannedOp& p : train_ops_)
    p.op->ForEachOutput([&](const std::string& v) { computed.insert(v); });
  std::set<std::string> grads;
  for (const PlannedOp& p : optimize_ops_)
    p.op->ForEachInput([&](const std::string& v) {
      if (computed.count(v)) grads.insert(v);
    });
  grads_.assign(grads.begin(), grads.end());

  // Free every micro-batch intermediate after the last op that touches it.
  std::unordered_set<std::string> keep(grads.begin(), grads.end());
  keep.insert(loss_var_);
  std::unordered_map<std::string, size_t> last_use;
  for (size_t i = 0; i < train_ops_.size(); ++i) {
    auto touch = [&](const std::string& v) { last_use[v] = i; };
    train_ops_[i].op->ForEachInput(touch);
    train_ops_[i].op->ForEachOutput(touch);
  }
  for (const auto& [var, i] : last_use) {
    const Var* decl = program_.FindVar(var);
    if (decl && !decl->persistable && !keep.count(var)) train_ops_[i].free_after.push_back(var);
  }
  return OkStatus();
}

// A clear error for a var no one provides, before any kernel runs.
Status ReferenceRunner::CheckInputsAvailable() const {
  std::unordered_set<std::string> available(feeds_.begin(), feeds_.end());
  for (const Var& v : program_.vars())
    if (v.persistable) available.insert(v.name);
  auto check = [&](const std::vector<PlannedOp>& ops) -> Status {
    for (const PlannedOp& p : ops) {
      Status status;
      p.op->ForEachInput([&](const std::string& v) {
        if (status.ok() && !available.count(v))
          status = FailedPrecondition(Where(p), " reads '", v,
                                      "', which is neither a module input, a persistable var nor "
                                      "computed before it");
      });
      PW_RETURN_IF_ERROR(status);
      p.op->ForEachOutput([&](const std::string& v) { available.insert(v); });
    }
    return OkStatus();
  };
  PW_RETURN_IF_ERROR(check(train_ops_));
  if (!available.count(loss_var_))
    return FailedPrecondition("loss var '", loss_var_, "' is not computed by the program");
  return check(optimize_ops_);
}

Status ReferenceRunner::OpenData() {
  const Var* tokens = program_.FindVar("tokens");
  if (!tokens || tokens->dtype != DataType::kInt64 || tokens->shape.size() != 2)
    return FailedPrecondition("module input 'tokens' must be an i64 [batch, seq] var");
  const Var* labels = program_.FindVar("labels");
  if (labels && (labels->dtype != DataType::kInt64 || labels->shape != tokens->shape))
    return FailedPrecondition("module input 'labels' must be i64 ", ShapeToString(tokens->shape),
                              " like 'tokens'");
  int64_t vocab = module_.metadata.GetInt("vocab", 0);
  if (vocab <= 0) return FailedPrecondition("module metadata has no positive 'vocab'");
  DataConfig config{tokens->shape[0], tokens->shape[1], vocab, options_.data_seed,
                    options_.data_file};
  PW_ASSIGN_OR_RETURN(TrainingData data, TrainingData::Open(config));
  data_.emplace(std::move(data));
  return OkStatus();
}

Status ReferenceRunner::MaterializeState() {
  for (const Var& v : program_.vars()) {
    if (!v.persistable) continue;
    PW_ASSIGN_OR_RETURN(Tensor t, MaterializeVar(v));
    root_.Set(v.name, std::move(t));
  }
  return OkStatus();
}

RankVars ReferenceRunner::Vars() const {
  RankVars r;
  r.stages = {0};
  for (const Var& v : program_.vars())
    if (v.persistable) r.vars.push_back(v);
  return r;
}

CheckpointManifest ReferenceRunner::Header() const {
  return RunHeader(module_, options_.micro_batches,
                   options_.data_file.empty() ? "synthetic" : "file", options_.data_seed,
                   options_.data_file);
}

// The step to continue from: 0, or the resumed checkpoint's with its state loaded.
StatusOr<int64_t> ReferenceRunner::Resume() {
  if (options_.checkpoint.resume.empty()) return 0;
  PW_ASSIGN_OR_RETURN(auto reader, CheckpointReader::Open(options_.checkpoint.resume));
  PW_RETURN_IF_ERROR(CheckSameModel(reader->manifest(), module_, reader->manifest_path()));
  PW_RETURN_IF_ERROR(CheckSameData(*reader, Header()));
  PW_RETURN_IF_ERROR(RestoreRank(*reader, Vars(), [&](const std::string& name, Tensor t) {
    root_.Set(name, std::move(t));
    return OkStatus();
  }));
  const int64_t step = reader->manifest().step();
  if (step >= options_.steps)
    return FailedPrecondition(reader->path(), " holds step ", step, ": --steps ", options_.steps,
                              " leaves nothing to train");
  return step;
}

Status ReferenceRunner::SaveCheckpoint(int64_t steps_done) {
  auto begin = std::chrono::steady_clock::now();
  PW_ASSIGN_OR_RETURN(int64_t bytes, SaveRank(options_.checkpoint, Header(), steps_done, Vars(),
                                              [&](const std::string& name) -> StatusOr<Tensor> {
                                                const Tensor* t = root_.Find(name);
                                                if (!t) return NotFound("no value of '", name, "'");
                                                return *t;
                                              }));
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  if (options_.on_checkpoint) options_.on_checkpoint(steps_done - 1, bytes, ms);
  return OkStatus();
}

Status ReferenceRunner::Prepare() {
  if (options_.steps < 1) return InvalidArgument("steps must be >= 1, got ", options_.steps);
  if (options_.micro_batches < 1)
    return InvalidArgument("micro-batches must be >= 1, got ", options_.micro_batches);
  if (module_.programs().empty()) return FailedPrecondition("module has no program");
  PW_RETURN_IF_ERROR(CheckModule());

  loss_var_ = module_.metadata.GetString("loss", "loss");
  const Attribute* inputs = module_.metadata.Find("inputs");
  feeds_ = inputs && TypeOf(*inputs) == AttrType::kStrings
               ? std::get<std::vector<std::string>>(*inputs)
               : std::vector<std::string>{"tokens", "labels"};
  for (const std::string& feed : feeds_) {
    if (feed != "tokens" && feed != "labels" && feed != ops::kDropoutSeedVar)
      return Unimplemented("module input '", feed,
                           "': the reference runner feeds only 'tokens', 'labels' and '",
                           ops::kDropoutSeedVar, "'");
    if (!program_.HasVar(feed))
      return FailedPrecondition("module input '", feed, "' is not a var of program '",
                                program_.name(), "'");
  }
  if (!program_.HasVar(loss_var_))
    return FailedPrecondition("loss var '", loss_var_, "' is not a var of program '",
                              program_.name(), "'");

  for (const std::string& name : options_.track) {
    const Var* v = program_.FindVar(name);
    if (!v || !v->persistable || v->dtype != DataType::kFloat32 || v->num_elements() == 0)
      return InvalidArgument("cannot track '", name, "': not a persistable f32 var of program '",
                             program_.name(), "'");
  }
  PW_RETURN_IF_ERROR(PlanOps());
  PW_RETURN_IF_ERROR(CheckInputsAvailable());
  PW_RETURN_IF_ERROR(OpenData());
  return MaterializeState();
}

Status ReferenceRunner::RunOp(const PlannedOp& p, Scope& scope) const {
  const Op& op = *p.op;
  if (p.view) {  // the output holds the input's bytes; they live while either is held
    const Tensor* in = scope.Find(op.Input("X"));
    if (!in) return Internal(Where(p), ": input '", op.Input("X"), "' has no value");
    const Var* decl = program_.FindVar(op.Output("Out"));
    if (!decl) return Internal(Where(p), ": output '", op.Output("Out"), "' is not declared");
    scope.Set(op.Output("Out"), in->View(0, decl->shape));
    return OkStatus();
  }
  KernelContext ctx{op, {}, {}, nullptr};  // no communicator: collectives over a group of one
  ctx.inputs.resize(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    for (const std::string& v : op.inputs[i].vars) {
      const Tensor* t = scope.Find(v);
      if (!t) return Internal(Where(p), ": input '", v, "' has no value");
      ctx.inputs[i].push_back(t);
    }
  }
  ctx.outputs.resize(op.outputs.size());
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    for (const std::string& v : op.outputs[i].vars) {
      Tensor* t = ReadsVar(op, v) ? scope.Find(v) : nullptr;  // in place: the same Tensor
      if (!t) {
        const Var* decl = program_.FindVar(v);
        if (!decl) return Internal(Where(p), ": output '", v, "' is not declared");
        t = &scope.Set(v, Tensor::Allocated(decl->dtype, decl->shape, p.zero_outputs));
      }
      ctx.outputs[i].push_back(t);
    }
  }
  return p.kernel(ctx).WithContext(Where(p));
}

StatusOr<double> ReferenceRunner::RunMicroBatch(int64_t step, int64_t micro_batch) {
  Scope scope(&root_);
  MicroBatch batch = data_->Get(step, micro_batch);
  for (const std::string& feed : feeds_)
    scope.Set(feed, feed == "tokens"   ? batch.tokens
                    : feed == "labels" ? batch.labels
                                       : batch.dropout_seed);
  for (const PlannedOp& p : train_ops_) {
    PW_RETURN_IF_ERROR(RunOp(p, scope));
    for (const std::string& v : p.free_after) scope.Erase(v);
  }
  for (const std::string& g : grads_) {
    const Tensor* t = scope.FindLocal(g);
    Tensor& acc = grad_acc_.at(g);
    if (!t || t->dtype() != DataType::kFloat32 || t->numel() != acc.numel())
      return Internal("gradient '", g, "' was not computed as declared");
    // On the kernel threads, as the executor's accumulation runs (element-wise: the same
    // bits at any thread count).
    float* sum = acc.f32();
    const float* grad = t->f32();
    ops::cpu::ParallelFor(acc.numel(), ops::cpu::kCheapGrain, [&](int64_t begin, int64_t end) {
      ops::cpu::AddF32(sum + begin, grad + begin, sum + begin, end - begin);
    });
  }
  const Tensor* loss = scope.FindLocal(loss_var_);
  if (!loss || loss->dtype() != DataType::kFloat32 || loss->numel() != 1)
    return Internal("loss '", loss_var_, "' is not an f32 scalar");
  return static_cast<double>(loss->f32()[0]);
}

Status ReferenceRunner::ApplyOptimizer() {
  const float inv = 1.0f / static_cast<float>(options_.micro_batches);
  for (auto& [name, acc] : grad_acc_) {
    float* g = acc.f32();
    ops::cpu::ParallelFor(acc.numel(), ops::cpu::kCheapGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) g[i] *= inv;
    });
    root_.Set(name, acc);
  }
  for (const PlannedOp& p : optimize_ops_) PW_RETURN_IF_ERROR(RunOp(p, root_));
  for (const std::string& g : grads_) root_.Erase(g);
  return OkStatus();
}

StatusOr<double> ReferenceRunner::RunStep(int64_t step) {
  grad_acc_.clear();
  for (const std::string& g : grads_) {
    const Var* decl = program_.FindVar(g);
    if (!decl || decl->dtype != DataType::kFloat32)
      return FailedPrecondition("gradient '", g, "' must be a declared f32 var");
    grad_acc_.emplace(g, Tensor(DataType::kFloat32, decl->shape));
  }
  double loss_sum = 0;
  for (int64_t k = 0; k < options_.micro_batches; ++k) {
    PW_ASSIGN_OR_RETURN(double loss, RunMicroBatch(step, k));
    loss_sum += loss;
  }
  PW_RETURN_IF_ERROR(ApplyOptimizer());
  return loss_sum / static_cast<double>(options_.micro_batches);
}

Status ReferenceRunner::WarmUp(int64_t step) {
  std::map<std::string, Tensor> saved;
  for (const std::string& name : root_.LocalNames()) saved[name] = root_.Find(name)->Clone();
  PW_RETURN_IF_ERROR(RunStep(step).status().WithContext("warm-up step"));
  for (const std::string& name : root_.LocalNames())
    if (!saved.count(name)) root_.Erase(name);  // made by the step: not there before it
  for (auto& [name, value] : saved) root_.Set(name, std::move(value));
  return OkStatus();
}

StatusOr<ReferenceResult> ReferenceRunner::Run() {
  ReferenceResult result;
  result.tracked.resize(options_.track.size());
  PW_ASSIGN_OR_RETURN(result.first_step, Resume());
  if (!options_.checkpoint.dir.empty()) {
    PW_RETURN_IF_ERROR(CheckContinuesRun(options_.checkpoint.dir, result.first_step));
    PW_RETURN_IF_ERROR(RemovePartialCheckpoints(options_.checkpoint.dir));
  }
  for (int i = 0; i < options_.warmup_steps && result.first_step < options_.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    PW_RETURN_IF_ERROR(WarmUp(result.first_step));
    result.warmup_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  for (int64_t step = result.first_step; step < options_.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    const double cpu_before = ProcessCpuSeconds();
    PW_ASSIGN_OR_RETURN(const double loss, RunStep(step));
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    result.losses.push_back(loss);
    result.step_time_ms.push_back(ms);
    result.step_cpu_ms.push_back((ProcessCpuSeconds() - cpu_before) * 1e3);
    for (size_t i = 0; i < options_.track.size(); ++i)
      result.tracked[i].push_back(root_.Find(options_.track[i])->f32()[0]);
    if (options_.on_step) options_.on_step(step, loss, ms);
    if (CheckpointDue(options_.checkpoint, step + 1, options_.steps))
      PW_RETURN_IF_ERROR(SaveCheckpoint(step + 1));
  }
  return result;
}

}  // namespace

StatusOr<ReferenceResult> RunReference(const Module& module, const ReferenceOptions& options) {
  ops::SetKernelThreads(options.threads);
  KeepFreedMemory();
  ReferenceRunner runner(module, options);
  PW_RETURN_IF_ERROR(runner.Prepare().WithContext("reference run"));
  auto result = runner.Run();
  if (!result.ok()) return result.status().WithContext("reference run");
  return result;
}

}  // namespace pw
