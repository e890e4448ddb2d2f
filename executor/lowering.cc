#include "executor/lowering.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/event_ref.h"
#include "ir/p2p_vars.h"
#include "ir/rank_layout.h"

namespace pw {
namespace {

constexpr int kRootTable = -2;  // parameters, optimizer state, gradient accumulators
constexpr int kStepTable = -1;  // the optimizer job's own intermediates

using Clock = std::array<int64_t, kNumStreamTypes>;  // per stream: instructions known done

Clock Max(const Clock& a, const Clock& b) {
  Clock c;
  for (int i = 0; i < kNumStreamTypes; ++i) c[i] = std::max(a[i], b[i]);
  return c;
}

struct EventInfo {
  Event* event = nullptr;
  Clock clock{};
  bool recorded = false;
};

// What the dependency check remembers about an emitted instruction.
struct InstrInfo {
  StreamType stream;
  int64_t seq;      // position on its stream, from 1
  Clock after;      // what is known done once it has run
  Event* internal;  // recorded after it for added dependencies, created on demand
};

// Who touched a slot since it was last written.
struct Access {
  int64_t writer = -1;
  std::array<int64_t, kNumStreamTypes> readers;  // last reader per stream, -1: none
  Access() { readers.fill(-1); }
};

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
        coord_(layout_.Coord(rank)),
        backend_(backend),
        memory_(memory),
        options_(options),
        out_(std::make_unique<LoweredPlan>()) {
    stream_clock_.fill(Clock{});
    seq_.fill(0);
  }

  StatusOr<std::unique_ptr<LoweredPlan>> Run();

 private:
  Status CollectJobs();
  void FindGradients();
  void FindLastWrites();
  Status LowerProgramJob(size_t job_index, const Job& job, const Program& program);
  Status LowerP2pJob(const Job& job);
  Status LowerGradFinalize(const Program& optimizer, const Job& job);

  StatusOr<ValueSlot*> SlotFor(const std::string& var, int table, const Program& program);
  const Var* FindDecl(const std::string& var, const Program& program) const;
  StatusOr<EventInfo*> WaitTarget(const std::string& ref, int micro_batch,
                                  const std::string& where);
  StatusOr<EventInfo*> RecordTarget(const std::string& ref, int micro_batch,
                                    const std::string& where);

  // Builds a kernel instruction for `op` whose vars resolve through `resolve`.
  template <typename Resolve>
  StatusOr<Instr> KernelInstr(const Op& op, StreamType stream, std::string where, Resolve resolve,
                              std::vector<ValueSlot*>& reads, std::vector<ValueSlot*>& writes);
  Status Emit(Instr instr, const std::vector<ValueSlot*>& reads,
              const std::vector<ValueSlot*>& writes, const std::vector<EventInfo*>& waits,
              const std::vector<EventInfo*>& records, bool from_plan);
  Status Need(int64_t dependency, StreamType stream, Clock& clock, Instr& instr, bool from_plan,
              const ValueSlot& slot);

  const Module& module_;
  RankLayout layout_;
  int rank_;
  RankCoord coord_;
  Backend& backend_;
  MemoryTracker& memory_;
  const LoweringOptions& options_;
  std::unique_ptr<LoweredPlan> out_;

  int micro_batches_ = 0;
  std::vector<const Job*> jobs_;
  std::set<std::string> grads_;  // what the optimizer reads from the micro-batches
  std::map<std::pair<std::string, int>, std::pair<size_t, size_t>> last_write_;  // (job, op)

  std::map<std::pair<int, std::string>, ValueSlot*> slot_index_;
  std::map<std::string, ValueSlot*> accumulator_index_;
  std::set<const ValueSlot*> fed_;
  std::map<std::pair<std::string, int>, EventInfo> events_;

  std::vector<InstrInfo> info_;
  std::unordered_map<const ValueSlot*, Access> access_;
  std::array<Clock, kNumStreamTypes> stream_clock_;
  std::array<int64_t, kNumStreamTypes> seq_;
};

Status Lowerer::CollectJobs() {
  const Plan& plan = module_.plan;
  if (plan.empty()) return FailedPrecondition("module has no plan");
  micro_batches_ = plan.num_micro_batches;
  const RankPlan* mine = nullptr;
  for (const RankPlan& r : plan.ranks)
    if (r.rank == coord_.pp) mine = &r;
  if (!mine && plan.ranks.size() == 1 && module_.mesh.pp == 1) mine = &plan.ranks.front();
  if (!mine) return FailedPrecondition("plan has no jobs for pipeline rank ", coord_.pp);
  FlattenJobs(mine->jobs, jobs_);
  return OkStatus();
}

// Gradients: vars optimizer programs read that other programs of this rank write.
void Lowerer::FindGradients() {
  std::set<std::string> written;
  std::vector<const Program*> optimizers;
  for (const Job* job : jobs_) {
    const Program* p = module_.FindProgram(job->program);
    if (!p) continue;
    if (job->kind == JobKind::kOptimizer) {
      optimizers.push_back(p);
      continue;
    }
    for (const Op& op : p->ops())
      op.ForEachOutput([&](const std::string& v) { written.insert(v); });
  }
  for (const Program* p : optimizers)
    for (const Op& op : p->ops())
      op.ForEachInput([&](const std::string& v) {
        const Var* decl = p->FindVar(v);
        if (written.count(v) && !(decl && decl->persistable)) grads_.insert(v);
      });
}

void Lowerer::FindLastWrites() {
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const Job& job = *jobs_[j];
    if (job.kind == JobKind::kOptimizer || IsP2pJob(job.kind)) continue;
    const Program* p = module_.FindProgram(job.program);
    if (!p) continue;
    for (size_t o = 0; o < p->ops().size(); ++o)
      p->ops()[o].ForEachOutput([&](const std::string& v) {
        if (grads_.count(v) || v == options_.loss) last_write_[{v, job.micro_batch}] = {j, o};
      });
  }
}

const Var* Lowerer::FindDecl(const std::string& var, const Program& program) const {
  if (const Var* v = program.FindVar(var)) return v;
  for (const Program& p : module_.programs())
    if (const Var* v = p.FindVar(var)) return v;
  return nullptr;
}

StatusOr<ValueSlot*> Lowerer::SlotFor(const std::string& var, int table, const Program& program) {
  const Var* decl = FindDecl(var, program);
  if (!decl) return NotFound("var '", var, "' is not declared in program '", program.name(), "'");
  bool accumulator = table == kStepTable && grads_.count(var);
  bool persistent = decl->persistable;
  int key_table = persistent || accumulator ? kRootTable : table;
  auto [it, inserted] = slot_index_.try_emplace({key_table, var}, nullptr);
  if (!inserted) return it->second;
  ValueSlot& slot = out_->slots.emplace_back();
  slot.name = var;
  slot.micro_batch = key_table >= 0 ? key_table : -1;
  slot.dtype = decl->dtype;
  slot.shape = decl->shape;
  slot.persistent = persistent;
  if (persistent) {
    out_->persistent[var] = &slot;
    out_->persistent_decls[var] = *decl;
  }
  if (accumulator) {
    out_->accumulators.push_back(&slot);
    accumulator_index_[var] = &slot;
    fed_.insert(&slot);  // zeroed by the host at the start of every step
  }
  it->second = &slot;
  return &slot;
}

StatusOr<EventInfo*> Lowerer::WaitTarget(const std::string& text, int micro_batch,
                                         const std::string& where) {
  PW_ASSIGN_OR_RETURN(EventRef ref, ParseEventRef(text));
  int mb = ref.MicroBatch(micro_batch);
  if (mb < 0 || mb >= micro_batches_) {
    if (ref.relative) return static_cast<EventInfo*>(nullptr);  // nothing before the first
    return InvalidArgument(where, ": waits on '", text, "', micro-batch ", mb, " out of range");
  }
  auto it = events_.find({ref.name, mb});
  if (it == events_.end() || !it->second.recorded)
    return FailedPrecondition(where, ": waits on event '", ref.name, "' of micro-batch ", mb,
                              ", which no earlier job of pipeline rank ", coord_.pp, " records");
  return &it->second;
}

StatusOr<EventInfo*> Lowerer::RecordTarget(const std::string& text, int micro_batch,
                                           const std::string& where) {
  PW_ASSIGN_OR_RETURN(EventRef ref, ParseEventRef(text));
  int mb = ref.MicroBatch(micro_batch);
  if (mb < 0 || mb >= micro_batches_)
    return InvalidArgument(where, ": records '", text, "' for micro-batch ", mb, ", outside [0, ",
                           micro_batches_, ")");
  EventInfo& e = events_[{ref.name, mb}];
  if (e.recorded)
    return FailedPrecondition(where, ": event '", ref.name, "' of micro-batch ", mb,
                              " is recorded twice in one step");
  if (!e.event) {
    out_->events.push_back(backend_.CreateEvent());
    e.event = out_->events.back().get();
    ++out_->plan_events;
  }
  return &e;
}

Status Lowerer::Need(int64_t dep, StreamType stream, Clock& clock, Instr& instr, bool from_plan,
                     const ValueSlot& slot) {
  const InstrInfo& d = info_[dep];
  if (d.stream == stream || clock[StreamIndex(d.stream)] >= d.seq) return OkStatus();
  if (from_plan && options_.strict_events)
    return FailedPrecondition(instr.where, " (stream ", StreamTypeName(stream), ") uses '",
                              slot.name, "', which ", out_->instrs[dep].where, " (stream ",
                              StreamTypeName(d.stream), ") touches, with no event between them");
  InstrInfo& dm = info_[dep];
  if (!dm.internal) {
    out_->events.push_back(backend_.CreateEvent());
    dm.internal = out_->events.back().get();
    out_->instrs[dep].records.push_back(dm.internal);
    ++out_->auto_events;
  }
  AppendDistinct(instr.waits, dm.internal);
  clock = Max(clock, dm.after);
  return OkStatus();
}

Status Lowerer::Emit(Instr instr, const std::vector<ValueSlot*>& reads,
                     const std::vector<ValueSlot*>& writes, const std::vector<EventInfo*>& waits,
                     const std::vector<EventInfo*>& records, bool from_plan) {
  const int s = StreamIndex(instr.stream);
  const int64_t index = static_cast<int64_t>(out_->instrs.size());
  Clock clock = stream_clock_[s];
  for (EventInfo* w : waits) {
    clock = Max(clock, w->clock);
    AppendDistinct(instr.waits, w->event);
  }
  for (ValueSlot* slot : reads) {
    Access& a = access_[slot];
    if (a.writer >= 0) {
      PW_RETURN_IF_ERROR(Need(a.writer, instr.stream, clock, instr, from_plan, *slot));
    } else if (!slot->persistent && !fed_.count(slot)) {
      return FailedPrecondition(
          instr.where, " reads '", slot->name, "'",
          slot->micro_batch >= 0 ? StrCat(" of micro-batch ", slot->micro_batch) : "",
          " before any job of pipeline rank ", coord_.pp, " produces it");
    }
  }
  for (ValueSlot* slot : writes) {
    Access& a = access_[slot];
    if (a.writer >= 0)
      PW_RETURN_IF_ERROR(Need(a.writer, instr.stream, clock, instr, from_plan, *slot));
    for (int64_t r : a.readers)
      if (r >= 0) PW_RETURN_IF_ERROR(Need(r, instr.stream, clock, instr, from_plan, *slot));
  }
  clock[s] = ++seq_[s];
  stream_clock_[s] = clock;
  info_.push_back(InstrInfo{instr.stream, seq_[s], clock, nullptr});
  for (EventInfo* r : records) {
    r->clock = clock;
    r->recorded = true;
    instr.records.push_back(r->event);
  }
  for (ValueSlot* slot : reads) access_[slot].readers[s] = index;
  for (ValueSlot* slot : writes) {
    Access& a = access_[slot];
    a.writer = index;
    a.readers.fill(-1);
  }
  for (ValueSlot* slot : reads) AppendDistinct(instr.uses, slot);
  for (ValueSlot* slot : writes) AppendDistinct(instr.uses, slot);
  for (ValueSlot* slot : instr.uses) ++slot->uses_per_step;
  instr.memory = &memory_;
  out_->streams.insert(instr.stream);
  PW_RETURN_IF_ERROR(backend_.Prepare(instr));
  out_->instrs.push_back(std::move(instr));
  return OkStatus();
}

template <typename Resolve>
StatusOr<Instr> Lowerer::KernelInstr(const Op& op, StreamType stream, std::string where,
                                     Resolve resolve, std::vector<ValueSlot*>& reads,
                                     std::vector<ValueSlot*>& writes) {
  Instr instr;
  instr.kind = Instr::Kind::kKernel;
  instr.stream = stream;
  instr.where = std::move(where);
  instr.op = &op;
  KernelContext ctx{op, {}, {}, nullptr};
  ctx.inputs.resize(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i)
    for (const std::string& v : op.inputs[i].vars) {
      PW_ASSIGN_OR_RETURN(ValueSlot * slot, resolve(v));
      ctx.inputs[i].push_back(&slot->tensor);
      AppendDistinct(reads, slot);
    }
  ctx.outputs.resize(op.outputs.size());
  for (size_t i = 0; i < op.outputs.size(); ++i)
    for (const std::string& v : op.outputs[i].vars) {
      PW_ASSIGN_OR_RETURN(ValueSlot * slot, resolve(v));
      ctx.outputs[i].push_back(&slot->tensor);
      AppendDistinct(writes, slot);
    }
  instr.outputs = writes;
  instr.context.emplace(std::move(ctx));
  return instr;
}

Status Lowerer::LowerGradFinalize(const Program& optimizer, const Job& job) {
  bool has_dp_allreduce = false;
  for (const Op& op : optimizer.ops())
    has_dp_allreduce |= op.type == "c_allreduce_sum" && op.attrs.GetString("group") == "dp";
  const int dp = module_.mesh.dp;
  const float inv = 1.0f / static_cast<float>(micro_batches_ * dp);
  std::set<std::string> reads;  // this program's gradients (a rank may hold several stages)
  for (const Op& op : optimizer.ops())
    op.ForEachInput([&](const std::string& v) {
      if (grads_.count(v)) reads.insert(v);
    });
  for (const std::string& g : reads) {
    auto it = accumulator_index_.find(g);
    if (it == accumulator_index_.end()) {
      // Created here so the optimizer reads a (zero) sum even if no job produced it.
      PW_ASSIGN_OR_RETURN(ValueSlot * slot, SlotFor(g, kStepTable, optimizer));
      it = accumulator_index_.find(g);
      (void)slot;
    }
    ValueSlot* acc = it->second;
    auto resolve = [&](const std::string&) -> StatusOr<ValueSlot*> { return acc; };
    std::vector<std::pair<Op, StreamType>> steps;
    if (dp > 1 && !has_dp_allreduce) {
      Op reduce;
      reduce.type = "c_allreduce_sum";
      reduce.role = OpRole::kCommunication;
      reduce.SetInput("X", {g}).SetOutput("Out", {g}).SetAttr("group", std::string("dp"));
      steps.emplace_back(std::move(reduce), StreamType::kDpComm);
    }
    Op scale;
    scale.type = "scale";
    scale.role = OpRole::kOptimize;
    scale.SetInput("X", {g}).SetOutput("Out", {g});
    scale.SetAttr("scale", static_cast<double>(inv)).SetAttr("bias", 0.0);
    steps.emplace_back(std::move(scale), StreamType::kCompute);
    for (auto& [op, stream] : steps) {
      const Op& stored = out_->synthetic_ops.emplace_back(std::move(op));
      std::vector<ValueSlot*> reads, writes;
      PW_ASSIGN_OR_RETURN(Instr instr, KernelInstr(stored, stream,
                                                   StrCat(stored.type, " of gradient '", g,
                                                          "' before ", JobName(job)),
                                                   resolve, reads, writes));
      instr.micro_batch = -1;
      PW_RETURN_IF_ERROR(Emit(std::move(instr), reads, writes, {}, {}, false));
    }
  }
  return OkStatus();
}

Status Lowerer::LowerProgramJob(size_t job_index, const Job& job, const Program& program) {
  const bool optimizer = job.kind == JobKind::kOptimizer;
  const int table = optimizer ? kStepTable : job.micro_batch;
  const int mb = optimizer ? -1 : job.micro_batch;
  if (optimizer) PW_RETURN_IF_ERROR(LowerGradFinalize(program, job));

  auto resolve = [&](const std::string& v) { return SlotFor(v, table, program); };
  const std::vector<Op>& ops = program.ops();
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    std::string where = StrCat("op ", o, " (", op.type, ") of program '", program.name(), "'",
                               mb >= 0 ? StrCat(" for micro-batch ", mb) : "");
    StatusOr<StreamType> stream = ParseStreamType(op.stream);
    if (!stream.ok()) return stream.status().WithContext(where);
    std::vector<ValueSlot*> reads, writes;
    PW_ASSIGN_OR_RETURN(Instr instr, KernelInstr(op, *stream, where, resolve, reads, writes));
    instr.micro_batch = mb;
    for (const std::string& feed : options_.feeds) {
      bool reads_feed = false;
      op.ForEachInput([&](const std::string& v) { reads_feed |= v == feed; });
      if (!reads_feed) continue;
      PW_ASSIGN_OR_RETURN(ValueSlot * slot, resolve(feed));
      if (!fed_.insert(slot).second) continue;
      instr.feeds.push_back(Instr::Feed{slot, feed});
    }
    std::vector<EventInfo*> waits, records;
    for (const std::string& w : op.wait_events) {
      PW_ASSIGN_OR_RETURN(EventInfo * e, WaitTarget(w, job.micro_batch, where));
      if (e) waits.push_back(e);
    }
    for (const std::string& r : op.record_events) {
      PW_ASSIGN_OR_RETURN(EventInfo * e, RecordTarget(r, job.micro_batch, where));
      records.push_back(e);
    }
    PW_RETURN_IF_ERROR(Emit(std::move(instr), reads, writes, waits, records, true));

    if (optimizer) continue;
    std::vector<std::string> finished;
    op.ForEachOutput([&](const std::string& v) {
      auto it = last_write_.find({v, mb});
      if (it != last_write_.end() && it->second == std::make_pair(job_index, o))
        AppendDistinct(finished, v);
    });
    for (const std::string& v : finished) {
      PW_ASSIGN_OR_RETURN(ValueSlot * value, resolve(v));
      if (grads_.count(v)) {
        // acc += g, on the stream that produced g.
        PW_ASSIGN_OR_RETURN(ValueSlot * acc, SlotFor(v, kStepTable, program));
        Op add;
        add.type = "add";
        add.role = OpRole::kBackward;
        add.SetInput("X", {v}).SetInput("Y", {v}).SetOutput("Out", {v});
        const Op& stored = out_->synthetic_ops.emplace_back(std::move(add));
        KernelContext ctx{stored, {{&acc->tensor}, {&value->tensor}}, {{&acc->tensor}}, nullptr};
        Instr sum;
        sum.kind = Instr::Kind::kKernel;
        sum.stream = *stream;
        sum.where = StrCat("accumulation of gradient '", v, "' of micro-batch ", mb);
        sum.op = &stored;
        sum.context.emplace(std::move(ctx));
        sum.outputs = {acc};
        sum.micro_batch = mb;
        PW_RETURN_IF_ERROR(Emit(std::move(sum), {acc, value}, {acc}, {}, {}, false));
      }
      if (v == options_.loss) {
        Instr fetch;
        fetch.kind = Instr::Kind::kFetch;
        fetch.stream = *stream;
        fetch.where = StrCat("fetch of '", v, "' of micro-batch ", mb);
        fetch.value = value;
        fetch.fetch_to = &out_->losses[mb];
        fetch.micro_batch = mb;
        out_->computes_loss = true;
        PW_RETURN_IF_ERROR(Emit(std::move(fetch), {value}, {}, {}, {}, false));
      }
    }
  }
  return OkStatus();
}

Status Lowerer::LowerP2pJob(const Job& job) {
  PW_ASSIGN_OR_RETURN(std::vector<std::string> vars, P2pVars(module_, coord_.pp, job));
  const Program* program = module_.FindProgram(job.program);
  if (!program) {
    for (const Program& p : module_.programs())
      if (ProgramPipelineRank(module_, p) == coord_.pp) program = &p;
  }
  if (!program) return NotFound(JobName(job), ": pipeline rank ", coord_.pp, " has no program");
  const bool send = IsSendJob(job.kind);
  const bool backward = IsBackwardP2p(job.kind);
  for (const std::string& v : vars) {
    PW_ASSIGN_OR_RETURN(ValueSlot * slot, SlotFor(v, job.micro_batch, *program));
    Instr instr;
    instr.kind = send ? Instr::Kind::kSend : Instr::Kind::kRecv;
    instr.stream = send ? StreamType::kPpSend : StreamType::kPpRecv;
    instr.where =
        StrCat(JobName(job), " of '", v, "' ", send ? "to" : "from", " pipeline rank ", job.peer);
    instr.value = slot;
    instr.peer = layout_.PipelinePeer(rank_, job.peer);
    instr.tag = P2pTag(backward, job.micro_batch, v);
    instr.micro_batch = job.micro_batch;
    if (send)
      PW_RETURN_IF_ERROR(Emit(std::move(instr), {slot}, {}, {}, {}, false));
    else
      PW_RETURN_IF_ERROR(Emit(std::move(instr), {}, {slot}, {}, {}, false));
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<LoweredPlan>> Lowerer::Run() {
  if (rank_ < 0 || rank_ >= layout_.world_size())
    return InvalidArgument("rank ", rank_, " is outside the mesh's world of ",
                           layout_.world_size());
  PW_RETURN_IF_ERROR(CollectJobs());
  out_->rank = rank_;
  out_->num_micro_batches = micro_batches_;
  out_->losses.assign(micro_batches_, std::numeric_limits<double>::quiet_NaN());
  FindGradients();
  FindLastWrites();
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const Job& job = *jobs_[j];
    if (IsP2pJob(job.kind)) {
      PW_RETURN_IF_ERROR(LowerP2pJob(job));
      continue;
    }
    const Program* program = module_.FindProgram(job.program);
    if (!program) return NotFound(JobName(job), ": no program named '", job.program, "'");
    if (job.kind != JobKind::kOptimizer &&
        (job.micro_batch < 0 || job.micro_batch >= micro_batches_))
      return FailedPrecondition(JobName(job), ": micro-batch ", job.micro_batch, " is outside [0, ",
                                micro_batches_, ")");
    PW_RETURN_IF_ERROR(LowerProgramJob(j, job, *program));
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
