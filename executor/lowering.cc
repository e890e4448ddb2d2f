#include "executor/lowering.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "ir/p2p_vars.h"
#include "ir/plan_actions.h"
#include "ir/post_validation.h"
#include "ir/rank_layout.h"
#include "ir/rank_sequence.h"
#include "ir/stream_order.h"

namespace pw {
namespace {

template <typename T>
void AppendDistinct(std::vector<T>& v, T x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

class Lowerer {
 public:
  Lowerer(const Module& module, int rank, Backend& backend, MemoryTracker& memory,
          const LoweringOptions& options)
      : module_(module),
        layout_(module.mesh),
        rank_(rank),
        backend_(backend),
        memory_(memory),
        options_(options),
        out_(std::make_unique<LoweredPlan>()) {}

  StatusOr<std::unique_ptr<LoweredPlan>> Run();

 private:
  void MakeSlots();
  void MakeInstr(int item, Instr& instr);
  // LoweredPlan::undo.
  Status MakeUndo();
  void FillKernel(Instr& instr, const Op& op, const WorkItem& item,
                  const std::function<ValueSlot*(const std::string&)>& resolve);
  StatusOr<int> Cover(const Dependency& dep);

  const Module& module_;
  RankLayout layout_;
  int rank_;
  Backend& backend_;
  MemoryTracker& memory_;
  const LoweringOptions& options_;
  std::unique_ptr<LoweredPlan> out_;

  RankSequence seq_;
  std::vector<ValueSlot*> slots_;      // per sequence slot
  std::vector<Event*> internal_;       // per item: the event recorded after it, if any
  std::vector<char> counted_as_plan_;  // per item: its event counted in auto_events
};

void Lowerer::MakeSlots() {
  slots_.reserve(seq_.slots.size());
  for (const SeqSlot& s : seq_.slots) {
    ValueSlot& slot = out_->slots.emplace_back();
    slot.name = s.var;
    slot.micro_batch = s.table >= 0 ? s.table : -1;
    slot.dtype = s.decl->dtype;
    slot.shape = s.decl->shape;
    slot.persistent = s.persistable;
    if (s.persistable) {
      out_->persistent[s.var] = &slot;
      out_->persistent_decls[s.var] = *s.decl;
    }
    if (s.accumulator) out_->accumulators.push_back(&slot);
    slot.view = s.view_of >= 0;
    if (s.held_as >= 0) {
      slot.held_offset = seq_.slots[s.held_as].view_offset;
      slot.held_shape = seq_.slots[s.held_as].decl->shape;
      out_->held_in_rows.push_back(&slot);
    }
    slots_.push_back(&slot);
  }
  for (const std::vector<int>& bucket : seq_.grad_buckets) {
    std::vector<ValueSlot*>& members = out_->accumulator_buckets.emplace_back();
    for (int s : bucket) {
      slots_[s]->view = true;  // the bucket's allocation holds its bytes
      members.push_back(slots_[s]);
    }
  }
}

void Lowerer::FillKernel(Instr& instr, const Op& op, const WorkItem& item,
                         const std::function<ValueSlot*(const std::string&)>& resolve) {
  instr.kind = Instr::Kind::kKernel;
  instr.op = &op;
  KernelContext ctx{op, {}, {}, nullptr};
  ctx.inputs.resize(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i)
    for (const std::string& v : op.inputs[i].vars) ctx.inputs[i].push_back(&resolve(v)->tensor);
  ctx.outputs.resize(op.outputs.size());
  for (size_t i = 0; i < op.outputs.size(); ++i)
    for (const std::string& v : op.outputs[i].vars) ctx.outputs[i].push_back(&resolve(v)->tensor);
  for (int s : item.writes) instr.outputs.push_back(slots_[s]);
  instr.context.emplace(std::move(ctx));
}

void Lowerer::MakeInstr(int i, Instr& instr) {
  const WorkItem& item = seq_.items[i];
  const Job& job = *seq_.jobs[item.job];
  switch (item.kind) {
    case WorkKind::kOp: {
      if (item.accumulate_into >= 0) {  // the GEMM adds into the gradient sum itself
        const Op& fused = out_->synthetic_ops.emplace_back(WithAccumulator(seq_.op(item)));
        const std::string& grad = fused.outputs[0].vars[0];
        ValueSlot* acc = slots_[item.accumulate_into];
        FillKernel(instr, fused, item, [&](const std::string& v) {
          return v == grad ? acc : slots_[seq_.SlotOf(item, v)];
        });
        break;
      }
      auto resolve = [&](const std::string& v) { return slots_[seq_.SlotOf(item, v)]; };
      FillKernel(instr, seq_.op(item), item, resolve);
      const Op& op = seq_.op(item);
      if (op.attrs.GetBool(kAtStepStartAttr, false)) out_->last_overflow_reduction = i;
      if (op.type == "copy_unless") {
        const std::vector<std::string>& state = *op.FindInput("X");
        const std::vector<std::string>& copies = *op.FindOutput("Out");
        for (size_t k = 0; k < state.size(); ++k)
          out_->backups.emplace_back(resolve(state[k]), resolve(copies[k]));
      }
      if (op.type == "update_loss_scaling")
        out_->loss_scale_rule = ops::LossScaleRule::Of(op.attrs);
      // A split{view} binds its blocks to its input's bytes (an op that writes a block
      // later, the distributed optimizer's update, writes through it), and an op that runs
      // as a view (ir/alias_ops.h) its output.
      if (seq_.BindsView(item)) {
        instr.view_source = slots_[seq_.slots[item.writes.front()].view_of];
        for (int s : item.writes) instr.view_offsets.push_back(seq_.slots[s].view_offset);
      }
      break;
    }
    case WorkKind::kAccumulate: {
      // acc += g, on the stream that produced g.
      const Op& add =
          out_->synthetic_ops.emplace_back(AddedWorkOp(item.kind, seq_.slots[item.slot].var));
      ValueSlot* acc = slots_[item.writes.front()];
      ValueSlot* value = slots_[item.slot];
      instr.kind = Instr::Kind::kKernel;
      instr.op = &add;
      instr.context.emplace(
          KernelContext{add, {{&acc->tensor}, {&value->tensor}}, {{&acc->tensor}}, nullptr});
      instr.outputs = {acc};
      break;
    }
    case WorkKind::kGradAllReduce: {  // one sum, or a bucket of them as one collective
      const Op& op = out_->synthetic_ops.emplace_back(BucketAllReduceOp(BucketGrads(seq_, item)));
      FillKernel(instr, op, item,
                 [&](const std::string& v) { return slots_[seq_.SlotOf(item, v)]; });
      break;
    }
    case WorkKind::kGradReduceScatter: {  // a bucket of the distributed optimizer's
      const Op& op = out_->synthetic_ops.emplace_back(CoalescedReduceScatterOp(seq_, item));
      FillKernel(instr, op, item,
                 [&](const std::string& v) { return slots_[seq_.SlotOf(item, v)]; });
      break;
    }
    case WorkKind::kParamGather: {  // the last step's updated rows, at this step's start
      const Op& op = out_->synthetic_ops.emplace_back(SyncShardsOp(seq_.op(item)));
      ValueSlot* param = slots_[item.slot];
      FillKernel(instr, op, item, [&](const std::string&) { return param; });
      out_->param_gathers.push_back(i);
      break;
    }
    case WorkKind::kGradScale: {
      const Op& op = out_->synthetic_ops.emplace_back(
          AddedWorkOp(item.kind, seq_.slots[item.slot].var, GradScale(seq_)));
      ValueSlot* acc = slots_[item.slot];
      FillKernel(instr, op, item, [&](const std::string&) { return acc; });
      break;
    }
    case WorkKind::kFetch:
      instr.kind = Instr::Kind::kFetch;
      instr.value = slots_[item.slot];
      instr.fetch_to = &out_->losses[item.micro_batch];
      out_->computes_loss = true;
      break;
    case WorkKind::kSend:
    case WorkKind::kRecv:
      instr.kind = item.kind == WorkKind::kSend ? Instr::Kind::kSend : Instr::Kind::kRecv;
      instr.value = slots_[item.slot];
      instr.peer = layout_.PipelinePeer(rank_, job.peer);
      instr.tag = P2pTag(IsBackwardP2p(job.kind), job.micro_batch, seq_.slots[item.slot].var);
      break;
  }
  instr.stream = item.stream;
  instr.where = seq_.Describe(i);
  instr.job = item.job;
  instr.micro_batch = item.micro_batch;
  for (int s : item.feeds) instr.feeds.push_back(Instr::Feed{slots_[s], seq_.slots[s].var});
  for (int s : item.reads) AppendDistinct(instr.uses, slots_[s]);
  for (int s : item.writes) AppendDistinct(instr.uses, slots_[s]);
  for (ValueSlot* slot : instr.uses) ++slot->uses_per_step;
  instr.memory = &memory_;
}

// A dependency the plan's events leave open: an event of the executor's own after the
// producer, or an error when the plan must order it itself.
StatusOr<int> Lowerer::Cover(const Dependency& dep) {
  const bool plan_work =
      seq_.items[dep.producer].carrier >= 0 && seq_.items[dep.consumer].carrier >= 0;
  if (plan_work && options_.strict_events) {
    const WorkItem& c = seq_.items[dep.consumer];
    const WorkItem& p = seq_.items[dep.producer];
    return FailedPrecondition(seq_.Describe(dep.consumer), " (stream ", StreamTypeName(c.stream),
                              ") uses '", seq_.slots[dep.slot].var, "', which ",
                              seq_.Describe(dep.producer), " (stream ", StreamTypeName(p.stream),
                              ") touches, with no event between them");
  }
  Event*& event = internal_[dep.producer];
  if (!event) {
    out_->events.push_back(backend_.CreateEvent());
    event = out_->events.back().get();
    out_->instrs[dep.producer].records.push_back(event);
    if (!plan_work) ++out_->internal_events;
  }
  if (plan_work && !counted_as_plan_[dep.producer]) {
    counted_as_plan_[dep.producer] = 1;
    ++out_->auto_events;
  }
  AppendDistinct(out_->instrs[dep.consumer].waits, event);
  return dep.producer;
}

Status Lowerer::MakeUndo() {
  if (out_->backups.empty()) return OkStatus();
  // Outside any step: persistent slots only, on the compute stream, with no events.
  auto add = [&](const Op& op, std::vector<ValueSlot*> writes, std::vector<ValueSlot*> uses,
                 const std::function<ValueSlot*(const std::string&)>& resolve, std::string where) {
    Instr& instr = out_->undo.emplace_back();
    FillKernel(instr, op, WorkItem{}, resolve);
    instr.outputs = std::move(writes);
    instr.uses = std::move(uses);
    instr.stream = StreamType::kCompute;
    instr.where = std::move(where);
    instr.memory = &memory_;
  };
  // The copies back into the state: copy_unless from the copies, its Skip the rank's own
  // last flag, which the executor zeroes first.
  auto flag = out_->persistent.find(kLastOverflowVar);
  if (flag == out_->persistent.end())
    return Internal("post-validation keeps copies but no '", kLastOverflowVar, "'");
  std::map<std::string, ValueSlot*> by_name{{kLastOverflowVar, flag->second}};
  std::vector<std::string> from, to;
  std::vector<ValueSlot*> state, uses{flag->second};
  for (const auto& [var, copy] : out_->backups) {
    from.push_back(copy->name);
    to.push_back(var->name);
    by_name[copy->name] = copy;
    by_name[var->name] = var;
    state.push_back(var);
    uses.push_back(var);
    uses.push_back(copy);
  }
  Op& restore = out_->synthetic_ops.emplace_back();
  restore.type = "copy_unless";
  restore.SetInput("X", from).SetInput("Skip", {kLastOverflowVar}).SetOutput("Out", to);
  add(
      restore, state, uses, [&](const std::string& v) { return by_name.at(v); },
      "the last step's state put back from its copies (redoing a step)");
  // Then amp's 16-bit parameter copies cast again from their masters.
  std::set<const ValueSlot*> masters(state.begin(), state.end());
  for (const WorkItem& item : seq_.items) {
    if (item.kind != WorkKind::kOp || seq_.jobs[item.job]->kind != JobKind::kOptimizer) continue;
    const Op& cast = seq_.op(item);
    if (cast.type != "cast") continue;
    ValueSlot* master = slots_[seq_.SlotOf(item, cast.Input("X"))];
    ValueSlot* copy = slots_[seq_.SlotOf(item, cast.Output("Out"))];
    if (!masters.count(master) || !copy->persistent || masters.count(copy)) continue;
    add(
        cast, {copy}, {master, copy},
        [&](const std::string& v) { return v == cast.Input("X") ? master : copy; },
        StrCat("cast of '", master->name, "' into '", copy->name, "' (redoing a step)"));
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<LoweredPlan>> Lowerer::Run() {
  RankSequenceOptions seq_options;
  seq_options.feeds = options_.feeds;
  seq_options.loss = options_.loss;
  seq_options.check_reads = true;
  PW_ASSIGN_OR_RETURN(seq_, BuildRankSequence(module_, rank_, seq_options));
  out_->rank = rank_;
  out_->num_micro_batches = seq_.num_micro_batches;
  for (const Job* job : seq_.jobs) out_->job_names.push_back(JobToString(*job));
  out_->losses.assign(seq_.num_micro_batches, std::numeric_limits<double>::quiet_NaN());
  MakeSlots();

  const int n = static_cast<int>(seq_.items.size());
  out_->instrs.reserve(n);
  for (int i = 0; i < n; ++i) MakeInstr(i, out_->instrs.emplace_back());
  // The plan's events, then the executor's own where they leave a dependency open.
  std::vector<Event*> plan_events;
  for (const SeqEvent& e : seq_.events) {
    out_->events.push_back(backend_.CreateEvent());
    plan_events.push_back(out_->events.back().get());
    out_->instrs[e.recorded_after].records.push_back(plan_events.back());
  }
  out_->plan_events = static_cast<int>(seq_.events.size());
  for (int i = 0; i < n; ++i)
    for (int e : seq_.items[i].wait_events) AppendDistinct(out_->instrs[i].waits, plan_events[e]);
  internal_.assign(n, nullptr);
  counted_as_plan_.assign(n, 0);
  StreamOrder order(seq_);
  StreamOrderHooks hooks;
  hooks.cover = [this](const Dependency& dep) { return Cover(dep); };
  PW_RETURN_IF_ERROR(order.Walk(hooks));

  for (const auto& [job, op] : seq_.sync_gathers) {
    // Outside any step: the parameter's slot, on dp_comm, with no events.
    const Op& gather = seq_.programs[job]->ops()[op];
    const Op& sync = out_->synthetic_ops.emplace_back(SyncShardsOp(gather));
    WorkItem item;
    item.job = job;
    item.slot = seq_.SlotOf(item, gather.Output("Out"));
    if (item.slot < 0) return NotFound("no slot for parameter '", gather.Output("Out"), "'");
    item.writes = {item.slot};
    Instr& instr = out_->sync_gathers.emplace_back();
    ValueSlot* param = slots_[item.slot];
    FillKernel(instr, sync, item, [&](const std::string&) { return param; });
    instr.stream = StreamType::kDpComm;
    instr.where = StrCat("c_sync_shards of parameter '", param->name, "' (between steps)");
    instr.uses = {param};
    instr.memory = &memory_;
  }
  for (Instr& instr : out_->instrs) {
    out_->streams.insert(instr.stream);
    PW_RETURN_IF_ERROR(backend_.Prepare(instr));
  }
  PW_RETURN_IF_ERROR(MakeUndo());
  for (std::deque<Instr>* alone : {&out_->sync_gathers, &out_->undo})
    for (Instr& instr : *alone) {
      out_->streams.insert(instr.stream);
      PW_RETURN_IF_ERROR(backend_.Prepare(instr));
    }
  return std::move(out_);
}

}  // namespace

StatusOr<std::unique_ptr<LoweredPlan>> LowerRankPlan(const Module& module, int rank,
                                                     Backend& backend, MemoryTracker& memory,
                                                     const LoweringOptions& options) {
  Lowerer lowerer(module, rank, backend, memory, options);
  auto result = lowerer.Run();
  if (!result.ok()) return result.status().WithContext(StrCat("rank ", rank));
  return result;
}

}  // namespace pw
