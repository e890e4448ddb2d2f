#include "executor/interpreter.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "executor/initializer.h"
#include "executor/instr.h"
#include "executor/plan_check.h"
#include "executor/sequential_plan.h"
#include "ir/post_validation.h"

namespace pw {

StatusOr<std::unique_ptr<Interpreter>> Interpreter::Create(Module module, int rank,
                                                           Backend& backend,
                                                           InterpreterOptions options) {
  if (module.plan.empty()) {
    PW_ASSIGN_OR_RETURN(module, WithSequentialPlan(module, options.micro_batches));
  }
  PW_RETURN_IF_ERROR(CheckPlan(module));
  std::unique_ptr<Interpreter> interp(new Interpreter(std::move(module), rank, backend));
  PW_ASSIGN_OR_RETURN(interp->plan_, LowerRankPlan(interp->module_, rank, backend, interp->memory_,
                                                   options.lowering));
  for (StreamType type : interp->plan_->streams) {
    PW_ASSIGN_OR_RETURN(interp->streams_[StreamIndex(type)], backend.GetStream(type));
  }
  return interp;
}

Status Interpreter::InitializeParameters() {
  int mp_rank = layout_.Coord(rank_).mp;
  for (auto& [name, slot] : plan_->persistent) {
    PW_ASSIGN_OR_RETURN(Tensor t,
                        MaterializeVar(ShardForRank(plan_->persistent_decls.at(name), mp_rank)));
    PW_RETURN_IF_ERROR(SetPersistent(name, std::move(t)));
  }
  return OkStatus();
}

const Tensor* Interpreter::FindPersistent(const std::string& name) const {
  auto it = plan_->persistent.find(name);
  return it == plan_->persistent.end() || !it->second->tensor.defined() ? nullptr
                                                                        : &it->second->tensor;
}

StatusOr<Tensor> Interpreter::PersistentOnHost(const std::string& name) const {
  const Tensor* t = FindPersistent(name);
  if (!t) return NotFound("rank ", rank_, " holds no persistable var '", name, "'");
  auto deferred = [&] {
    for (int i : plan_->param_gathers)
      if (plan_->instrs[i].outputs.front()->name == name) return true;
    for (const Instr& instr : plan_->sync_gathers)
      if (instr.outputs.front()->name == name) return true;
    return false;
  };
  if (parameters_stale_ && deferred())
    return FailedPrecondition(
        "rank ", rank_, ": '", name,
        "' holds only this dp rank's rows since the last step (overlap-param-gather "
        "defers its all-gather to the next step): call SyncParameters on every rank first");
  return backend_.ToHost(*t);
}

StatusOr<Tensor> Interpreter::PersistentCopyOnHost(const std::string& name) const {
  PW_ASSIGN_OR_RETURN(Tensor host, PersistentOnHost(name));
  return host.SharesStorage(*FindPersistent(name)) ? host.Clone() : host;
}

Status Interpreter::SetPersistent(const std::string& name, Tensor value) {
  auto it = plan_->persistent.find(name);
  if (it == plan_->persistent.end())
    return NotFound("rank ", rank_, " holds no persistable var '", name, "'");
  ValueSlot& slot = *it->second;
  if (value.dtype() != slot.dtype || value.shape() != slot.shape)
    return InvalidArgument("'", name, "' is ", DataTypeName(slot.dtype), " ",
                           ShapeToString(slot.shape), ", got ", DataTypeName(value.dtype()), " ",
                           ShapeToString(value.shape()));
  PW_ASSIGN_OR_RETURN(Tensor stored, backend_.FromHost(std::move(value)));
  if (slot.tensor.defined()) memory_.Free(slot.tensor.nbytes());
  slot.Bind(std::move(stored), memory_);
  return OkStatus();
}

std::vector<std::string> Interpreter::PersistentNames() const {
  std::vector<std::string> names;
  for (const auto& [name, slot] : plan_->persistent) names.push_back(name);
  return names;
}

// Between steps no stream runs, so plain writes are safe. Values a failed step left
// behind are dropped here.
Status Interpreter::ResetForStep() {
  for (ValueSlot& slot : plan_->slots) {
    if (!slot.persistent && slot.tensor.defined()) {
      if (!slot.view) memory_.Free(slot.tensor.nbytes());
      slot.tensor = Tensor();
    }
    slot.pending.store(slot.uses_per_step, std::memory_order_relaxed);
  }
  for (auto& e : plan_->events) e->Reset();
  for (ValueSlot* acc : plan_->accumulators) {
    if (acc->uses_per_step == 0 || acc->view) continue;
    PW_ASSIGN_OR_RETURN(Tensor zeros, backend_.NewTensor(acc->dtype, acc->shape));
    acc->Bind(std::move(zeros), memory_);
  }
  // A bucket's sums: one allocation, held to the step's end (as the sums are, which the
  // optimizer reads last).
  memory_.Free(bucket_bytes_);
  bucket_bytes_ = 0;
  for (const std::vector<ValueSlot*>& bucket : plan_->accumulator_buckets) {
    int64_t count = 0;
    for (const ValueSlot* acc : bucket) count += NumElements(acc->shape);
    const DataType dtype = bucket.front()->dtype;
    PW_ASSIGN_OR_RETURN(Tensor zeros, backend_.NewTensor(dtype, {count}));
    int64_t offset = 0;
    for (ValueSlot* acc : bucket) {
      acc->tensor = zeros.View(offset, acc->shape);
      offset += NumElements(acc->shape) * DataTypeSize(dtype);
    }
    bucket_bytes_ += zeros.nbytes();
    memory_.Allocate(zeros.nbytes());
  }
  plan_->losses.assign(plan_->losses.size(), std::numeric_limits<double>::quiet_NaN());
  PW_RETURN_IF_ERROR(HoldOwnRows());
  memory_.ResetPeak();
  return OkStatus();
}

// Through the host, so that any backend can: whole again only at a sync (a checkpoint, the
// end of training), cut again at the next step's start.
Status Interpreter::HoldOwnRows() {
  for (ValueSlot* slot : plan_->held_in_rows) {
    if (!slot->tensor.defined() || slot->HoldsRows()) continue;
    PW_ASSIGN_OR_RETURN(Tensor whole, backend_.ToHost(slot->tensor));
    PW_ASSIGN_OR_RETURN(Tensor rows,
                        backend_.FromHost(whole.View(slot->held_offset, slot->held_shape).Clone()));
    memory_.Free(slot->tensor.nbytes());
    slot->Bind(std::move(rows), memory_);
    parameters_stale_ = true;  // the others' rows are gone until the sync
  }
  return OkStatus();
}

Status Interpreter::WidenToWhole() {
  for (ValueSlot* slot : plan_->held_in_rows) {
    if (!slot->HoldsRows()) continue;
    PW_ASSIGN_OR_RETURN(Tensor rows, backend_.ToHost(slot->tensor));
    Tensor whole = Tensor::Allocated(slot->dtype, slot->shape, /*zeroed=*/true);
    std::memcpy(static_cast<char*>(whole.raw()) + slot->held_offset, rows.raw(),
                static_cast<size_t>(rows.nbytes()));
    PW_ASSIGN_OR_RETURN(Tensor stored, backend_.FromHost(std::move(whole)));
    memory_.Free(slot->tensor.nbytes());
    slot->Bind(std::move(stored), memory_);
  }
  return OkStatus();
}

// The first real failure; streams that only skipped work because of it report kAborted.
Status Interpreter::Synchronize() {
  Status first, skipped;
  for (Stream* s : streams_) {
    if (!s) continue;
    Status st = s->Synchronize();
    Status& slot = st.code() == StatusCode::kAborted ? skipped : first;
    if (slot.ok() && !st.ok()) slot = st;
  }
  return first.ok() ? skipped : first;
}

StatusOr<StepStats> Interpreter::RunStep(const FeedFn& feed) {
  PW_ASSIGN_OR_RETURN(StepStats first, RunStepOnce(feed));
  PW_ASSIGN_OR_RETURN(bool overflowed, LastStepOverflowed());
  if (!overflowed) return first;
  // The step before overflowed on some rank: every rank learns it here and redoes this
  // step, which ran on that step's updates.
  PW_RETURN_IF_ERROR(UndoLastUpdate());
  PW_ASSIGN_OR_RETURN(StepStats again, RunStepOnce(feed));
  again.step_ms += first.step_ms;
  again.peak_bytes = std::max(again.peak_bytes, first.peak_bytes);
  again.redone = true;
  return again;
}

StatusOr<bool> Interpreter::LastStepOverflowed() const {
  if (plan_->last_overflow_reduction < 0) return false;
  PW_ASSIGN_OR_RETURN(Tensor flag, PersistentOnHost(kLastOverflowPpVar));
  return flag.f32()[0] > 0;
}

Status Interpreter::SetScalar(const std::string& name, float value) {
  Tensor t(DataType::kFloat32, {});
  t.f32()[0] = value;
  return SetPersistent(name, std::move(t));
}

Status Interpreter::UndoLastUpdate() {
  // On the device: the copies back (copy_unless skips unless its flag, this one, is 0),
  // the 16-bit copies cast again.
  PW_RETURN_IF_ERROR(SetScalar(kLastOverflowVar, 0));
  std::vector<const Instr*> undo;
  for (const Instr& instr : plan_->undo) undo.push_back(&instr);
  PW_RETURN_IF_ERROR(RunBetweenSteps(undo, "putting the last step's state back"));
  // The skipped step's loss-scale update, on the host (three scalars).
  PW_ASSIGN_OR_RETURN(Tensor scale, PersistentOnHost(kLossScaleVar));
  PW_ASSIGN_OR_RETURN(Tensor good, PersistentOnHost(kGoodStepsVar));
  PW_ASSIGN_OR_RETURN(Tensor skipped, PersistentOnHost(kSkippedStepsVar));
  ops::LossScaleState s{scale.f32()[0], good.f32()[0], skipped.f32()[0]};
  s.Update(/*overflow=*/true, plan_->loss_scale_rule);
  PW_RETURN_IF_ERROR(SetScalar(kLossScaleVar, s.scale));
  PW_RETURN_IF_ERROR(SetScalar(kGoodStepsVar, s.good_steps));
  PW_RETURN_IF_ERROR(SetScalar(kSkippedStepsVar, s.skipped_steps));
  PW_RETURN_IF_ERROR(SetScalar(kLastOverflowPpVar, 0));
  validation_pending_ = false;
  return OkStatus();
}

Status Interpreter::RunBetweenSteps(const std::vector<const Instr*>& instrs,
                                    std::string_view what) {
  for (auto& e : plan_->events) e->Reset();
  for (const Instr* instr : instrs) streams_[StreamIndex(instr->stream)]->Enqueue(instr);
  return Synchronize().WithContext(StrCat("rank ", rank_, ": ", what));
}

Status Interpreter::ForgetLastStep() {
  validation_pending_ = false;
  if (plan_->last_overflow_reduction < 0) return OkStatus();
  PW_RETURN_IF_ERROR(SetScalar(kLastOverflowVar, 0));
  return SetScalar(kLastOverflowPpVar, 0);
}

Status Interpreter::ValidateLastStep() {
  if (!validation_pending_) return OkStatus();
  PW_RETURN_IF_ERROR(RunBetweenSteps({&plan_->instrs[plan_->last_overflow_reduction]},
                                     "the last step's overflow check"));
  validation_pending_ = false;
  PW_ASSIGN_OR_RETURN(bool overflowed, LastStepOverflowed());
  return overflowed ? UndoLastUpdate() : OkStatus();
}

StatusOr<StepStats> Interpreter::RunStepOnce(const FeedFn& feed) {
  if (Status s = ResetForStep(); !s.ok()) return s.WithContext(StrCat("rank ", rank_));
  for (Stream* stream : streams_)
    if (stream) stream->SetTracing(tracing_);
  auto start = std::chrono::steady_clock::now();
  step_began_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count();
  Status status;
  for (const Instr& instr : plan_->instrs) {
    for (const Instr::Feed& f : instr.feeds) {
      StatusOr<Tensor> value = feed ? feed(f.var, instr.micro_batch)
                                    : StatusOr<Tensor>(NotFound("no feed for '", f.var, "'"));
      if (value.ok() && (value->dtype() != f.slot->dtype || value->shape() != f.slot->shape))
        value = InvalidArgument("feed '", f.var, "' must be ", DataTypeName(f.slot->dtype), " ",
                                ShapeToString(f.slot->shape), ", got ",
                                DataTypeName(value->dtype()), " ", ShapeToString(value->shape()));
      if (value.ok()) value = backend_.FromHost(std::move(value).value());
      if (!value.ok()) {
        status = value.status().WithContext(StrCat("micro-batch ", instr.micro_batch));
        break;
      }
      f.slot->Bind(std::move(value).value(), memory_);
    }
    if (!status.ok()) break;
    streams_[StreamIndex(instr.stream)]->Enqueue(&instr);
  }
  // Every queued wait names an event queued before it, so the streams always drain.
  Status synced = Synchronize();
  if (status.ok()) status = synced;
  parameters_stale_ = !plan_->param_gathers.empty() || !plan_->sync_gathers.empty();
  if (!status.ok()) return status.WithContext(StrCat("rank ", rank_));
  validation_pending_ = plan_->last_overflow_reduction >= 0;

  StepStats stats;
  stats.step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  stats.peak_bytes = memory_.peak();
  if (plan_->computes_loss) stats.losses = plan_->losses;
  return stats;
}

Status Interpreter::SyncParameters() {
  PW_RETURN_IF_ERROR(ValidateLastStep());
  if (!parameters_stale_) return OkStatus();
  PW_RETURN_IF_ERROR(WidenToWhole());
  std::vector<const Instr*> gathers;
  for (int i : plan_->param_gathers) gathers.push_back(&plan_->instrs[i]);
  for (const Instr& instr : plan_->sync_gathers) gathers.push_back(&instr);
  PW_RETURN_IF_ERROR(RunBetweenSteps(gathers, "parameter all-gathers"));
  parameters_stale_ = false;
  return OkStatus();
}

StatusOr<double> Interpreter::WarmUp(const FeedFn& feed) {
  const auto start = std::chrono::steady_clock::now();
  PW_RETURN_IF_ERROR(SyncParameters());
  std::vector<std::pair<std::string, Tensor>> saved;
  std::vector<ValueSlot*> unset;  // to unset again if the step sets them
  for (const auto& [name, slot] : plan_->persistent) {
    if (!slot->tensor.defined()) {
      unset.push_back(slot);
      continue;
    }
    PW_ASSIGN_OR_RETURN(Tensor copy, PersistentCopyOnHost(name));  // the step updates in place
    saved.emplace_back(name, std::move(copy));
  }
  PW_RETURN_IF_ERROR(RunStep(feed).status().WithContext("warm-up step"));
  for (auto& [name, value] : saved) PW_RETURN_IF_ERROR(SetPersistent(name, std::move(value)));
  parameters_stale_ = false;    // whole again: the values from before the step
  validation_pending_ = false;  // and validated, as they were
  for (ValueSlot* slot : unset) {
    if (!slot->tensor.defined()) continue;
    memory_.Free(slot->tensor.nbytes());
    slot->tensor = Tensor();
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace pw
