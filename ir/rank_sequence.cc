#include "ir/rank_sequence.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "ir/alias_ops.h"
#include "ir/event_ref.h"
#include "ir/grad_reduce.h"
#include "ir/p2p_vars.h"
#include "ir/post_validation.h"
#include "ir/rank_layout.h"
#include "ir/verifier.h"

namespace pw {
namespace {

template <typename T>
void AppendDistinct(std::vector<T>& v, T x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// Keys of (table or micro-batch, var id).
int64_t PairKey(int table, int var) {
  return (static_cast<int64_t>(table) << 32) | static_cast<uint32_t>(var);
}

// Gradient sums an optimizer program reduce-scatters over dp itself (distributed-optimizer):
// it also scales the shards, so the executor neither all-reduces nor scales them.
void AddSelfReducedGrads(const Program& optimizer, std::set<std::string>& grads) {
  for (const Op& op : optimizer.ops())
    if (op.type == "c_reduce_scatter_sum" && op.attrs.GetString("group") == "dp")
      op.ForEachInput([&](const std::string& v) { grads.insert(v); });
}

}  // namespace

bool HasOwnDpAllReduce(const Program& optimizer) {
  std::set<std::string> computed;
  for (const Op& op : optimizer.ops()) {
    if (op.attrs.GetString("group") == "dp" &&
        (op.type == "c_allreduce_sum" ||
         (op.type == "c_reduce_scatter_sum" && computed.count(op.Input("X")))))
      return true;
    op.ForEachOutput([&](const std::string& v) { computed.insert(v); });
  }
  return false;
}

bool RankSequence::BindsView(const WorkItem& item) const {
  if (item.kind != WorkKind::kOp || item.writes.empty()) return false;
  const SeqSlot& block = slots[item.writes.front()];
  if (block.view_of < 0) return false;
  if (block.alias) return true;
  const Op& o = op(item);
  return (o.type == "split" || o.type == "c_split") && o.attrs.GetBool("view", false);
}

int RankSequence::SlotOf(const WorkItem& item, const std::string& var) const {
  const bool optimizer = jobs[item.job]->kind == JobKind::kOptimizer;
  const int table = optimizer || item.micro_batch < 0 ? kStepTable : item.micro_batch;
  auto id = var_ids_.find(var);
  if (id == var_ids_.end()) return -1;
  auto it = slot_index_.find(PairKey(table, id->second));
  if (it == slot_index_.end()) it = slot_index_.find(PairKey(kRankTable, id->second));
  return it == slot_index_.end() ? -1 : it->second;
}

std::string RankSequence::Describe(int i) const {
  const WorkItem& item = items[i];
  const Job& job = *jobs[item.job];
  const std::string mb = item.micro_batch >= 0 ? StrCat(" of micro-batch ", item.micro_batch) : "";
  const std::string& var = item.slot >= 0 ? slots[item.slot].var : std::string();
  switch (item.kind) {
    case WorkKind::kOp:
      return StrCat("op ", item.op, " (", op(item).type, ") of program '", program(item).name(),
                    "'",
                    item.micro_batch >= 0 ? StrCat(" for micro-batch ", item.micro_batch) : "");
    case WorkKind::kSend:
    case WorkKind::kRecv:
      return StrCat(JobName(job), " of '", var, "' ", item.kind == WorkKind::kSend ? "to" : "from",
                    " pipeline rank ", job.peer);
    case WorkKind::kAccumulate:
      return StrCat("accumulation of gradient '", var, "'", mb);
    case WorkKind::kFetch:
      return StrCat("fetch of '", var, "'", mb);
    case WorkKind::kGradAllReduce:
      return StrCat(item.writes.size() > 1 ? StrCat("c_allreduce_coalesced of a bucket of ",
                                                    item.writes.size(), " gradients from '", var,
                                                    "' to '", slots[item.writes.back()].var, "'")
                                           : StrCat("c_allreduce_sum of gradient '", var, "'"),
                    job.kind == JobKind::kOptimizer ? " before " : " after ", JobName(job));
    case WorkKind::kGradScale:
      return StrCat("scale of gradient '", var, "' before ", JobName(job));
    case WorkKind::kGradReduceScatter:
      return StrCat("c_reduce_scatter_coalesced of a bucket of ", item.coalesced.size(),
                    " gradients from '", var, "' to '", slots[item.reads.back()].var, "' for ",
                    JobName(job));
    case WorkKind::kParamGather:
      return StrCat("c_sync_shards of parameter '", var, "' at the step's start (its update in ",
                    JobName(job), ")");
  }
  return "?";
}

class RankSequenceBuilder {
 public:
  RankSequenceBuilder(const Module& module, int rank, const RankSequenceOptions& options)
      : module_(module), options_(options) {
    seq_.rank = rank;
    seq_.pipeline_rank = RankLayout(module.mesh).Coord(rank).pp;
    seq_.dp = module.mesh.dp;
  }

  StatusOr<RankSequence> Run();

 private:
  Status CollectJobs();
  void FindGradients();
  void FindLastWrites();
  // Per program: each var's declaration as the program sees it (by var id) and each op's
  // vars as ids, in slot order; found once, as every job of the program reads them.
  struct ProgramVars {
    std::vector<std::pair<bool, const Var*>> decls;
    std::vector<std::vector<int>> inputs, outputs;
  };
  ProgramVars& VarsOf(const Program& program);
  StatusOr<int> SlotFor(const std::string& var, int table, const Program& program);
  StatusOr<int> SlotFor(int id, const std::string& var, int table, const Program& program,
                        ProgramVars& vars);
  int Add(WorkItem item);
  void MarkViews(const WorkItem& split);
  void MarkAlias(const WorkItem& item);
  void HoldViewSources();
  const std::set<std::string>& InPlaceOf(const Program& program);
  // The members of this rank's group of `kind` ("mp", "dp", "pp"), asked once per kind.
  int GroupSize(const std::string& kind);
  void MarkMemberView(const WorkItem& split, const Op& op);
  // Lowers job j's program; `only_op` >= 0: that one op alone (an optimizer op issued
  // early, see hoisted_).
  Status LowerProgramJob(int j, int only_op = -1);
  Status LowerP2pJob(int j);
  Status LowerGradFinalize(int j);
  StatusOr<int> WaitTarget(const std::string& ref, int micro_batch, const std::string& where);
  // The events a job's wait_events name (those outside the plan's micro-batches dropped).
  StatusOr<std::vector<int>> JobWaits(const Job& job, const std::string& where);
  Status Record(const std::string& ref, int micro_batch, int after, const std::string& where);
  StatusOr<const std::vector<std::string>*> TransferVars(const Job& job);

  const Module& module_;
  const RankSequenceOptions& options_;
  RankSequence seq_;
  std::set<std::string> grads_;
  std::set<std::string> feeds_;
  // (var, micro-batch) -> (job, op) of its last write: where attached work goes.
  std::unordered_map<int64_t, std::pair<int, int>> last_write_;  // by PairKey(mb, var id)
  std::vector<char> is_grad_;                                    // per var id
  // With the reduction in the backward (ir/grad_reduce.h): per gradient var id, the
  // (job, op) that finishes its last micro-batch on this rank, and the gradients whose
  // all-reduce is issued there rather than before the optimizer.
  bool reduce_in_backward_ = false;
  std::unordered_map<int, std::pair<int, int>> final_write_;
  std::set<std::string> reduced_early_;
  std::set<std::string> self_reduced_;  // AddSelfReducedGrads over the optimizer programs
  // Buckets (kMetaGradBucketBytes): the complete sums not yet reduced, their bytes, and
  // how many sums reduced in the backward are still to complete. A bucket goes out once it
  // holds bucket_bytes_ (0: every sum alone) or the last sum is in.
  int64_t bucket_bytes_ = 0;
  std::vector<int> bucket_;
  int64_t bucket_fill_ = 0;
  int early_left_ = 0;
  // kMetaParamGather: the optimizer programs' parameter all-gathers that wait for a sync
  // between steps, and with `next_step` those issued first in the step.
  Status IssueDeferredGathers(bool next_step);
  // The optimizer programs' ops marked kAtStepStartAttr, issued before anything else on
  // dp_comm (post-validated loss scaling's reduction of the last step's flags).
  Status IssueStepStartOps();
  // Marks the parameters of sync_gathers that nothing but their split and gather touches
  // as held in shards (SeqSlot::held_as).
  Status MarkShardHeldParameters();
  void AddToBucket(int acc, int job);
  // The distributed optimizer's reduce-scatters (hoist_), bucketed alike: (job, op) of each.
  Status AddToScatterBucket(std::pair<int, int> scatter);
  Status FlushScatterBucket();
  std::vector<std::pair<int, int>> scatter_bucket_;
  int64_t scatter_fill_ = 0;
  int scatters_left_ = 0;
  void FlushBucket(int job);
  // With the reduction in the backward: per gradient var id, the (optimizer job, op) of
  // the reduce-scatter its optimizer program starts with, issued after the gradient's last
  // accumulation instead of in the optimizer job.
  std::unordered_map<int, std::pair<int, int>> hoist_;
  std::set<std::pair<int, int>> hoisted_;
  std::unordered_map<const Program*, ProgramVars> program_vars_;
  // FusesGradAccumulation per (program, op), asked once, not for every micro-batch.
  std::map<std::pair<const Program*, size_t>, bool> fuses_;
  std::unordered_map<const Program*, std::set<std::string>> in_place_;  // InPlaceOf
  std::map<std::string, int> group_sizes_;                              // GroupSize
  bool Fuses(const Program& program, size_t op, const Var& grad) {
    auto [it, inserted] = fuses_.try_emplace({&program, op});
    if (inserted)
      it->second = options_.fuse_grad_accumulation && FusesGradAccumulation(program, op, grad);
    return it->second;
  }
  // Per table (kRankTable, kStepTable, then micro-batches), per var id: its slot or -1.
  std::vector<std::vector<int>> slot_of_;
  int VarId(const std::string& var);
  bool IsGrad(int var) const { return var < static_cast<int>(is_grad_.size()) && is_grad_[var]; }
  std::map<std::pair<std::string, int>, int> event_index_;  // (name, micro-batch)
  std::vector<int> writer_;  // per slot: has an item written it (for check_reads)
  std::map<std::tuple<JobKind, int, int, int, std::string>, std::vector<std::string>> vars_;
};

Status RankSequenceBuilder::CollectJobs() {
  const Plan& plan = module_.plan;
  if (plan.empty()) return FailedPrecondition("module has no plan");
  seq_.num_micro_batches = plan.num_micro_batches;
  const RankPlan* mine = nullptr;
  for (const RankPlan& r : plan.ranks)
    if (r.rank == seq_.pipeline_rank) mine = &r;
  if (!mine && plan.ranks.size() == 1 && module_.mesh.pp == 1) mine = &plan.ranks.front();
  if (!mine) return FailedPrecondition("plan has no jobs for pipeline rank ", seq_.pipeline_rank);
  FlattenJobs(mine->jobs, seq_.jobs);
  seq_.programs.assign(seq_.jobs.size(), nullptr);
  for (size_t j = 0; j < seq_.jobs.size(); ++j) {
    const Job& job = *seq_.jobs[j];
    const Program* program = module_.FindProgram(job.program);
    if (IsP2pJob(job.kind)) {
      if (!program)
        for (const Program& p : module_.programs())
          if (ProgramPipelineRank(module_, p) == seq_.pipeline_rank) program = &p;
      if (!program)
        return NotFound(JobName(job), ": pipeline rank ", seq_.pipeline_rank, " has no program");
    } else {
      if (!program) return NotFound(JobName(job), ": no program named '", job.program, "'");
      if (job.kind != JobKind::kOptimizer &&
          (job.micro_batch < 0 || job.micro_batch >= seq_.num_micro_batches))
        return FailedPrecondition(JobName(job), ": micro-batch ", job.micro_batch,
                                  " is outside [0, ", seq_.num_micro_batches, ")");
    }
    seq_.programs[j] = program;
  }
  return OkStatus();
}

// Gradients: vars the optimizer programs read that the rank's other programs write,
// except persistable ones.
void RankSequenceBuilder::FindGradients() {
  std::vector<const Op*> optimizer_ops, other_ops;
  for (size_t j = 0; j < seq_.jobs.size(); ++j) {
    const JobKind kind = seq_.jobs[j]->kind;
    if (IsP2pJob(kind)) continue;
    for (const Op& op : seq_.programs[j]->ops())
      (kind == JobKind::kOptimizer ? optimizer_ops : other_ops).push_back(&op);
  }
  grads_ = OptimizerGradients(optimizer_ops, other_ops, [&](const std::string& v) {
    const Var* decl = module_.FindVar(v);
    return decl && decl->persistable;
  });
  seq_.grads.assign(grads_.begin(), grads_.end());
  for (const std::string& g : grads_) {
    const int id = VarId(g);
    if (id >= static_cast<int>(is_grad_.size())) is_grad_.resize(id + 1, 0);
    is_grad_[id] = 1;
  }
}

int RankSequenceBuilder::VarId(const std::string& var) {
  return seq_.var_ids_.try_emplace(var, static_cast<int>(seq_.var_ids_.size())).first->second;
}

void RankSequenceBuilder::FindLastWrites() {
  for (size_t j = 0; j < seq_.jobs.size(); ++j) {
    const Job& job = *seq_.jobs[j];
    if (job.kind == JobKind::kOptimizer || IsP2pJob(job.kind)) continue;
    const std::vector<Op>& ops = seq_.programs[j]->ops();
    for (size_t o = 0; o < ops.size(); ++o)
      ops[o].ForEachOutput([&](const std::string& v) {
        if (v == options_.loss || grads_.count(v)) {
          last_write_[PairKey(job.micro_batch, VarId(v))] = {static_cast<int>(j),
                                                             static_cast<int>(o)};
          if (grads_.count(v)) final_write_[VarId(v)] = {static_cast<int>(j), static_cast<int>(o)};
        }
      });
  }
}

RankSequenceBuilder::ProgramVars& RankSequenceBuilder::VarsOf(const Program& program) {
  auto [it, inserted] = program_vars_.try_emplace(&program);
  ProgramVars& vars = it->second;
  if (inserted)
    for (const Op& op : program.ops()) {
      std::vector<int>& in = vars.inputs.emplace_back();
      std::vector<int>& out = vars.outputs.emplace_back();
      for (const Slot& s : op.inputs)
        for (const std::string& v : s.vars) in.push_back(VarId(v));
      op.ForEachOutput([&](const std::string& v) { out.push_back(VarId(v)); });
    }
  return vars;
}

StatusOr<int> RankSequenceBuilder::SlotFor(const std::string& var, int table,
                                           const Program& program) {
  return SlotFor(VarId(var), var, table, program, VarsOf(program));
}

StatusOr<int> RankSequenceBuilder::SlotFor(int id, const std::string& var, int table,
                                           const Program& program, ProgramVars& vars) {
  std::vector<std::pair<bool, const Var*>>& decls = vars.decls;
  if (id >= static_cast<int>(decls.size())) decls.resize(id + 1, {false, nullptr});
  if (!decls[id].first) decls[id] = {true, module_.FindVar(var, &program)};
  const Var* decl = decls[id].second;
  if (!decl) return NotFound("var '", var, "' is not declared in program '", program.name(), "'");
  const bool accumulator = table == kStepTable && IsGrad(id);
  const bool persistable = decl->persistable;
  const int key_table = persistable || accumulator ? kRankTable : table;
  if (key_table < kRankTable)
    return InvalidArgument("var '", var, "' of micro-batch ", table, ": no such micro-batch");
  const size_t t = static_cast<size_t>(key_table - kRankTable);
  if (t >= slot_of_.size()) slot_of_.resize(t + 1);
  std::vector<int>& index = slot_of_[t];
  if (id >= static_cast<int>(index.size())) index.resize(id + 1, -1);
  if (index[id] >= 0) return index[id];
  SeqSlot slot;
  slot.var = var;
  slot.table = key_table;
  slot.decl = decl;
  slot.persistable = persistable;
  slot.accumulator = accumulator;
  slot.fed = feeds_.count(var) && key_table >= 0;
  index[id] = static_cast<int>(seq_.slots.size());
  seq_.slot_index_.emplace(PairKey(key_table, id), index[id]);
  seq_.slots.push_back(std::move(slot));
  writer_.push_back(0);
  return index[id];
}

int RankSequenceBuilder::Add(WorkItem item) {
  const int id = static_cast<int>(seq_.items.size());
  if (item.carrier == -2) item.carrier = id;
  for (int s : item.writes) writer_[s] = 1;
  seq_.items.push_back(std::move(item));
  return id;
}

StatusOr<int> RankSequenceBuilder::WaitTarget(const std::string& text, int micro_batch,
                                              const std::string& where) {
  PW_ASSIGN_OR_RETURN(EventRef ref, ParseEventRef(text));
  const int mb = ref.MicroBatch(micro_batch);
  if (mb < 0 || mb >= seq_.num_micro_batches) {
    if (ref.relative) return -1;  // nothing before the first micro-batch to wait for
    return InvalidArgument(where, ": waits on '", text, "', micro-batch ", mb, " out of range");
  }
  auto it = event_index_.find({ref.name, mb});
  if (it == event_index_.end())
    return FailedPrecondition(where, ": waits on event '", ref.name, "' of micro-batch ", mb,
                              ", which no earlier job of pipeline rank ", seq_.pipeline_rank,
                              " records");
  return it->second;
}

StatusOr<std::vector<int>> RankSequenceBuilder::JobWaits(const Job& job, const std::string& where) {
  std::vector<int> waits;
  for (const std::string& w : job.wait_events) {
    PW_ASSIGN_OR_RETURN(int e, WaitTarget(w, job.micro_batch, where));
    if (e >= 0) AppendDistinct(waits, e);
  }
  return waits;
}

Status RankSequenceBuilder::Record(const std::string& text, int micro_batch, int after,
                                   const std::string& where) {
  PW_ASSIGN_OR_RETURN(EventRef ref, ParseEventRef(text));
  const int mb = ref.MicroBatch(micro_batch);
  if (mb < 0 || mb >= seq_.num_micro_batches)
    return InvalidArgument(where, ": records '", text, "' for micro-batch ", mb, ", outside [0, ",
                           seq_.num_micro_batches, ")");
  auto [it, inserted] =
      event_index_.try_emplace({ref.name, mb}, static_cast<int>(seq_.events.size()));
  if (!inserted)
    return FailedPrecondition(where, ": event '", ref.name, "' of micro-batch ", mb,
                              " is recorded twice in one step");
  seq_.events.push_back(SeqEvent{ref.name, mb, after});
  seq_.items[after].record_events.push_back(it->second);
  return OkStatus();
}

Status RankSequenceBuilder::LowerGradFinalize(int j) {
  const Program& optimizer = *seq_.programs[j];
  const bool reduce = module_.mesh.dp > 1 && !HasOwnDpAllReduce(optimizer);
  std::set<std::string> reads;  // this program's gradients (a rank may hold several stages)
  for (const Op& op : optimizer.ops())
    op.ForEachInput([&](const std::string& v) {
      if (grads_.count(v)) reads.insert(v);
    });
  for (const std::string& g : reads) {
    if (self_reduced_.count(g)) continue;
    PW_ASSIGN_OR_RETURN(int acc, SlotFor(g, kStepTable, optimizer));
    for (WorkKind kind : {WorkKind::kGradAllReduce, WorkKind::kGradScale}) {
      if (kind == WorkKind::kGradAllReduce && (!reduce || reduced_early_.count(g))) continue;
      WorkItem item;
      item.kind = kind;
      item.stream = kind == WorkKind::kGradAllReduce ? StreamType::kDpComm : StreamType::kCompute;
      item.job = j;
      item.slot = acc;
      item.reads = {acc};
      item.writes = {acc};
      Add(std::move(item));
    }
  }
  return OkStatus();
}

// A gather can wait when it all-gathers a parameter over dp from that parameter's own rows
// (a c_split{view} of it, which the update wrote in place) and nothing after the split
// touches the parameter (InPlaceShardGather): the next step's start is the first to need
// the whole, or no step at all.
Status RankSequenceBuilder::IssueDeferredGathers(bool next_step) {
  std::map<std::string, std::pair<int, int>> deferred;  // param -> (optimizer job, op)
  for (size_t j = 0; j < seq_.jobs.size(); ++j) {
    if (seq_.jobs[j]->kind != JobKind::kOptimizer) continue;
    const Program& program = *seq_.programs[j];
    for (size_t o = 0; o < program.ops().size(); ++o) {
      const Op& split = program.ops()[o];
      if (split.type != "c_split" || !split.attrs.GetBool("view", false) ||
          split.attrs.GetString("group") != "dp")
        continue;
      if (std::optional<size_t> gather = InPlaceShardGather(program, o))
        deferred.emplace(split.Input("X"),
                         std::make_pair(static_cast<int>(j), static_cast<int>(*gather)));
    }
  }
  // In the order the step's forward and backward first read them: the first layers'
  // parameters arrive first. A parameter none of them reads (amp's f32 master, of which
  // the update reads only this rank's rows) waits until the parameters are synced.
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (size_t j = 0; j < seq_.jobs.size(); ++j)
    if (!IsP2pJob(seq_.jobs[j]->kind) && seq_.jobs[j]->kind != JobKind::kOptimizer)
      for (const Op& op : seq_.programs[j]->ops())
        op.ForEachInput([&](const std::string& v) {
          if (deferred.count(v) && seen.insert(v).second) order.push_back(v);
        });
  for (const auto& [param, at] : deferred) {
    if (seen.count(param)) continue;
    seq_.sync_gathers.push_back({at.first, at.second});
    hoisted_.insert(at);
  }
  for (const std::string& param : next_step ? order : std::vector<std::string>{}) {
    const auto [j, o] = deferred.at(param);
    PW_ASSIGN_OR_RETURN(int slot, SlotFor(param, kStepTable, *seq_.programs[j]));
    WorkItem item;
    item.kind = WorkKind::kParamGather;
    item.stream = StreamType::kDpComm;
    item.job = j;
    item.op = o;
    item.slot = slot;
    item.reads = {slot};
    item.writes = {slot};
    Add(std::move(item));
    hoisted_.insert({j, o});
  }
  return OkStatus();
}

Status RankSequenceBuilder::IssueStepStartOps() {
  for (size_t j = 0; j < seq_.jobs.size(); ++j) {
    if (seq_.jobs[j]->kind != JobKind::kOptimizer) continue;
    const std::vector<Op>& ops = seq_.programs[j]->ops();
    for (size_t o = 0; o < ops.size(); ++o) {
      if (!ops[o].attrs.GetBool(kAtStepStartAttr, false)) continue;
      PW_RETURN_IF_ERROR(LowerProgramJob(static_cast<int>(j), static_cast<int>(o)));
      seq_.items.back().stream = StreamType::kDpComm;
      hoisted_.insert({static_cast<int>(j), static_cast<int>(o)});
    }
  }
  return OkStatus();
}

// A reduce-scatter whose gradient is complete joins the open bucket when it cuts like the
// bucket's (group, axis, nranks, dtype); a full bucket, or the last, goes out as one
// collective. A bucket of one is the program's op itself.
Status RankSequenceBuilder::AddToScatterBucket(std::pair<int, int> scatter) {
  const auto& [j, o] = scatter;
  const Op& op = seq_.programs[j]->ops()[o];
  PW_ASSIGN_OR_RETURN(int grad, SlotFor(op.Input("X"), kStepTable, *seq_.programs[j]));
  const Var& decl = *seq_.slots[grad].decl;
  if (!scatter_bucket_.empty()) {
    const auto& [fj, fo] = scatter_bucket_.front();
    const Op& first = seq_.programs[fj]->ops()[fo];
    const Var* first_grad = module_.FindVar(first.Input("X"), seq_.programs[fj]);
    if (fj != j || first.attrs != op.attrs || !first_grad || first_grad->dtype != decl.dtype)
      PW_RETURN_IF_ERROR(FlushScatterBucket());
  }
  scatter_bucket_.push_back(scatter);
  scatter_fill_ += decl.num_bytes();
  --scatters_left_;
  if (scatter_fill_ >= bucket_bytes_ || scatters_left_ <= 0) return FlushScatterBucket();
  return OkStatus();
}

Status RankSequenceBuilder::FlushScatterBucket() {
  std::vector<std::pair<int, int>> bucket;
  bucket.swap(scatter_bucket_);
  scatter_fill_ = 0;
  if (bucket.size() == 1) return LowerProgramJob(bucket.front().first, bucket.front().second);
  const int j = bucket.front().first;
  const Program& program = *seq_.programs[j];
  const Op& first = program.ops()[bucket.front().second];
  StatusOr<StreamType> stream = ParseStreamType(first.stream);
  if (!stream.ok()) return stream.status();
  WorkItem item;
  item.kind = WorkKind::kGradReduceScatter;
  item.stream = *stream;
  item.job = j;
  item.op = bucket.front().second;
  for (const auto& [jj, o] : bucket) {
    const Op& op = program.ops()[o];
    PW_ASSIGN_OR_RETURN(int grad, SlotFor(op.Input("X"), kStepTable, program));
    PW_ASSIGN_OR_RETURN(int shard, SlotFor(op.Output("Out"), kStepTable, program));
    item.coalesced.push_back(o);
    AppendDistinct(item.reads, grad);
    AppendDistinct(item.writes, shard);
  }
  item.slot = item.reads.front();
  Add(std::move(item));
  return OkStatus();
}

// A complete sum joins the open bucket; a full bucket (or the last sum) is all-reduced on
// dp_comm at once, step-level work the executor orders after the sums' last writes (and
// the optimizer's scales after it). Every dp replica of a pipeline rank runs the same
// sequence, so their buckets match.
void RankSequenceBuilder::AddToBucket(int acc, int job) {
  const Var& decl = *seq_.slots[acc].decl;
  if (!bucket_.empty() && decl.dtype != seq_.slots[bucket_.front()].decl->dtype)
    FlushBucket(job);  // a bucket travels as one buffer of one dtype
  bucket_.push_back(acc);
  bucket_fill_ += decl.num_bytes();
  --early_left_;
  if (bucket_fill_ >= bucket_bytes_ || early_left_ <= 0) FlushBucket(job);
}

void RankSequenceBuilder::FlushBucket(int job) {
  WorkItem reduce;
  reduce.kind = WorkKind::kGradAllReduce;
  reduce.stream = StreamType::kDpComm;
  reduce.job = job;
  reduce.slot = bucket_.front();
  reduce.reads = bucket_;
  reduce.writes = bucket_;
  Add(std::move(reduce));
  if (bucket_.size() > 1) seq_.grad_buckets.push_back(bucket_);
  bucket_.clear();
  bucket_fill_ = 0;
}

// A split{view}'s blocks lie one after another in its input (the verifier holds every dim
// before the axis to 1).
void RankSequenceBuilder::MarkViews(const WorkItem& split) {
  int64_t offset = 0;
  for (int block : split.writes) {
    seq_.slots[block].view_of = split.reads.front();
    seq_.slots[block].view_offset = offset;
    offset += seq_.slots[block].decl->num_bytes();
  }
}

// The output of an op that runs as a view holds its input's bytes (the bytes its input
// holds, when that is a view itself). Parameters, optimizer state and gradient sums keep
// their own bytes: the host allocates, zeroes and buckets those.
void RankSequenceBuilder::MarkAlias(const WorkItem& item) {
  if (item.reads.size() != 1 || item.writes.size() != 1) return;
  const SeqSlot& in = seq_.slots[item.reads.front()];
  SeqSlot& out = seq_.slots[item.writes.front()];
  const int root = in.view_of >= 0 ? in.view_of : item.reads.front();
  const SeqSlot& source = seq_.slots[root];
  if (source.persistable || source.accumulator || in.held_as >= 0 || out.persistable ||
      out.accumulator || out.fed || out.view_of >= 0)
    return;
  out.view_of = root;
  out.view_offset = in.view_of >= 0 ? in.view_offset : 0;
  out.alias = true;
}

const std::set<std::string>& RankSequenceBuilder::InPlaceOf(const Program& program) {
  auto it = in_place_.find(&program);
  if (it == in_place_.end()) it = in_place_.emplace(&program, InPlaceVars(program)).first;
  return it->second;
}

int RankSequenceBuilder::GroupSize(const std::string& kind) {
  auto it = group_sizes_.find(kind);
  if (it == group_sizes_.end())
    it =
        group_sizes_
            .emplace(kind, static_cast<int>(RankLayout(module_.mesh).Group(kind, seq_.rank).size()))
            .first;
  return it->second;
}

// Every use of an alias view reads its source too: the source's bytes, which the view
// holds, are freed after the view's last use, not the source's own.
void RankSequenceBuilder::HoldViewSources() {
  for (WorkItem& item : seq_.items) {
    std::vector<int> sources;
    for (const std::vector<int>* list : {&item.reads, &item.writes})
      for (int s : *list)
        if (seq_.slots[s].alias) sources.push_back(seq_.slots[s].view_of);
    for (int s : sources) AppendDistinct(item.reads, s);
  }
}

// A c_split{view}'s slice is this rank's member's (shifted by offset) of its input, whose
// dims before the axis are all 1 (the verifier holds that): the slices lie one after another.
void RankSequenceBuilder::MarkMemberView(const WorkItem& split, const Op& op) {
  const std::vector<int> members =
      RankLayout(module_.mesh).Group(op.attrs.GetString("group", "mp"), seq_.rank);
  const int n = static_cast<int>(members.size());
  const int me =
      static_cast<int>(std::find(members.begin(), members.end(), seq_.rank) - members.begin());
  const int64_t offset = op.attrs.GetInt("offset", 0);
  const int member = n > 0 ? static_cast<int>(((me + offset) % n + n) % n) : 0;
  const int block = split.writes.front();
  seq_.slots[block].view_of = split.reads.front();
  seq_.slots[block].view_offset = member * seq_.slots[block].decl->num_bytes();
}

Status RankSequenceBuilder::LowerProgramJob(int j, int only_op) {
  const Job& job = *seq_.jobs[j];
  const Program& program = *seq_.programs[j];
  const bool optimizer = job.kind == JobKind::kOptimizer;
  const int table = optimizer ? kStepTable : job.micro_batch;
  const int mb = optimizer ? -1 : job.micro_batch;
  if (optimizer && only_op < 0) PW_RETURN_IF_ERROR(LowerGradFinalize(j));

  ProgramVars& vars = VarsOf(program);
  const std::vector<Op>& ops = program.ops();
  // The job's own waits hold its first op on each stream (none for an op issued elsewhere).
  std::vector<int> job_waits;
  if (only_op < 0) {
    PW_ASSIGN_OR_RETURN(job_waits, JobWaits(job, JobName(job)));
  }
  std::set<StreamType> job_streams;
  for (size_t o = 0; o < ops.size(); ++o) {
    if (only_op >= 0 ? static_cast<int>(o) != only_op
                     : hoisted_.count({j, static_cast<int>(o)}) > 0)
      continue;
    const Op& op = ops[o];
    const std::vector<int>& in_ids = vars.inputs[o];
    const std::vector<int>& out_ids = vars.outputs[o];
    auto where = [&] {
      return StrCat("op ", o, " (", op.type, ") of program '", program.name(), "'",
                    mb >= 0 ? StrCat(" for micro-batch ", mb) : "");
    };
    StatusOr<StreamType> stream = ParseStreamType(op.stream);
    if (!stream.ok()) return stream.status().WithContext(where());
    WorkItem item;
    item.kind = WorkKind::kOp;
    item.stream = *stream;
    item.job = j;
    item.op = static_cast<int>(o);
    item.micro_batch = mb;
    // Itself; an optimizer op issued in the backward is ordered by the executor, as the
    // step-level work it stands for (no plan event spans an optimizer and a micro-batch).
    item.carrier = only_op >= 0 ? -1 : -2;
    size_t k = 0;
    for (const Slot& s : op.inputs)
      for (const std::string& v : s.vars) {
        StatusOr<int> slot = SlotFor(in_ids[k++], v, table, program, vars);
        if (!slot.ok()) return slot.status().WithContext(where());
        if (options_.check_reads && !writer_[*slot] && !seq_.slots[*slot].persistable &&
            !seq_.slots[*slot].accumulator && !seq_.slots[*slot].fed)
          return FailedPrecondition(
              where(), " reads '", v, "'", mb >= 0 ? StrCat(" of micro-batch ", mb) : "",
              " before any job of pipeline rank ", seq_.pipeline_rank, " produces it");
        AppendDistinct(item.reads, *slot);
        if (seq_.slots[*slot].fed && !writer_[*slot]) {
          AppendDistinct(item.feeds, *slot);
          writer_[*slot] = 1;  // the feed writes it once
        }
      }
    k = 0;
    for (const Slot& s : op.outputs)
      for (const std::string& v : s.vars) {
        StatusOr<int> slot = SlotFor(out_ids[k++], v, table, program, vars);
        if (!slot.ok()) return slot.status().WithContext(where());
        AppendDistinct(item.writes, *slot);
      }
    if (op.type == "split" && op.attrs.GetBool("view", false)) MarkViews(item);
    if (op.type == "c_split" && op.attrs.GetBool("view", false)) MarkMemberView(item, op);
    if (RunsAsView(op, GroupSize(op.attrs.GetString("group", "mp")), InPlaceOf(program)))
      MarkAlias(item);
    for (const std::string& w : op.wait_events) {
      PW_ASSIGN_OR_RETURN(int e, WaitTarget(w, job.micro_batch, where()));
      if (e >= 0) AppendDistinct(item.wait_events, e);
    }
    if (!job_waits.empty() && job_streams.insert(item.stream).second)
      for (int e : job_waits) AppendDistinct(item.wait_events, e);
    const int id = Add(std::move(item));
    int last = id;

    // Attached work, on the op's stream: accumulation of each gradient this op finishes
    // for its micro-batch, and the loss fetch.
    if (!optimizer) {
      std::vector<std::pair<int, const std::string*>> finished;  // (var id, name)
      k = 0;
      op.ForEachOutput([&](const std::string& v) {
        const int var = out_ids[k++];
        auto it = last_write_.find(PairKey(mb, var));
        if (it != last_write_.end() && it->second == std::make_pair(j, static_cast<int>(o)) &&
            std::none_of(finished.begin(), finished.end(),
                         [&](const auto& f) { return f.first == var; }))
          finished.push_back({var, &v});
      });
      // Attached to op `id`: same stream, job and micro-batch, carried by the op.
      auto attach = [&](WorkKind kind, int value, std::vector<int> reads, std::vector<int> writes) {
        WorkItem work;
        work.kind = kind;
        work.stream = *stream;
        work.job = j;
        work.op = static_cast<int>(o);
        work.micro_batch = mb;
        work.slot = value;
        work.carrier = id;
        work.reads = std::move(reads);
        work.writes = std::move(writes);
        last = Add(std::move(work));
      };
      for (const auto& [var, name] : finished) {
        PW_ASSIGN_OR_RETURN(int value, SlotFor(var, *name, table, program, vars));
        if (IsGrad(var)) {
          PW_ASSIGN_OR_RETURN(int acc, SlotFor(var, *name, kStepTable, program, vars));
          if (const SeqSlot& v = seq_.slots[value]; v.decl && Fuses(program, o, *v.decl)) {
            // The GEMM adds into the sum itself: it writes (and reads) the sum, not the
            // micro-batch's value, which no item then holds.
            WorkItem& gemm = seq_.items[id];
            std::replace(gemm.writes.begin(), gemm.writes.end(), value, acc);
            AppendDistinct(gemm.reads, acc);
            gemm.accumulate_into = acc;
          } else {
            attach(WorkKind::kAccumulate, value, {acc, value}, {acc});
          }
          auto final_write = final_write_.find(var);
          if (reduce_in_backward_ && !self_reduced_.count(*name) &&
              final_write != final_write_.end() &&
              final_write->second == std::make_pair(j, static_cast<int>(o))) {
            // The sum is complete: its all-reduce goes on dp_comm with its bucket's.
            AddToBucket(acc, j);
            reduced_early_.insert(*name);
          }
          auto hoist = final_write_.find(var) != final_write_.end() &&
                               final_write_.at(var) == std::make_pair(j, static_cast<int>(o))
                           ? hoist_.find(var)
                           : hoist_.end();
          if (hoist != hoist_.end()) PW_RETURN_IF_ERROR(AddToScatterBucket(hoist->second));
        }
        if (*name == options_.loss) attach(WorkKind::kFetch, value, {value}, {});
      }
    }
    for (const std::string& r : op.record_events)
      PW_RETURN_IF_ERROR(Record(r, job.micro_batch, last, where()));
  }
  return OkStatus();
}

StatusOr<const std::vector<std::string>*> RankSequenceBuilder::TransferVars(const Job& job) {
  auto key = std::make_tuple(job.kind, job.stage, job.peer, job.peer_stage, job.program);
  auto it = vars_.find(key);
  if (it == vars_.end()) {
    PW_ASSIGN_OR_RETURN(std::vector<std::string> vars, P2pVars(module_, seq_.pipeline_rank, job));
    it = vars_.emplace(key, std::move(vars)).first;
  }
  return &it->second;
}

Status RankSequenceBuilder::LowerP2pJob(int j) {
  const Job& job = *seq_.jobs[j];
  const std::string where = JobName(job);
  if (job.peer < 0 || job.peer >= module_.mesh.pp)
    return InvalidArgument(where, " on pipeline rank ", seq_.pipeline_rank, ": peer ", job.peer,
                           " is not a pipeline rank (pp = ", module_.mesh.pp, ")");
  PW_ASSIGN_OR_RETURN(const std::vector<std::string>* vars, TransferVars(job));
  const bool send = IsSendJob(job.kind);
  PW_ASSIGN_OR_RETURN(std::vector<int> waits, JobWaits(job, where));
  int last = -1;
  for (const std::string& v : *vars) {
    PW_ASSIGN_OR_RETURN(int slot, SlotFor(v, job.micro_batch, *seq_.programs[j]));
    WorkItem item;
    item.kind = send ? WorkKind::kSend : WorkKind::kRecv;
    item.stream = send ? StreamType::kPpSend : StreamType::kPpRecv;
    item.job = j;
    item.micro_batch = job.micro_batch;
    item.slot = slot;
    item.carrier = -2;
    (send ? item.reads : item.writes) = {slot};
    if (last < 0) item.wait_events = waits;
    last = Add(std::move(item));
  }
  for (const std::string& r : job.record_events)
    PW_RETURN_IF_ERROR(Record(r, job.micro_batch, last, where));
  return OkStatus();
}

StatusOr<RankSequence> RankSequenceBuilder::Run() {
  if (seq_.rank < 0 || seq_.rank >= module_.mesh.world_size())
    return InvalidArgument("rank ", seq_.rank, " is outside the mesh's world of ",
                           module_.mesh.world_size());
  feeds_.insert(options_.feeds.begin(), options_.feeds.end());
  PW_RETURN_IF_ERROR(CollectJobs());
  FindGradients();
  // Early reductions only where the executor reduces at all: dp > 1 and no optimizer
  // program that reduces its own gradients (amp's low-precision all-reduce).
  reduce_in_backward_ =
      module_.mesh.dp > 1 && module_.metadata.GetString(kMetaGradReduce) == kGradReduceInBackward;
  for (size_t j = 0; j < seq_.jobs.size(); ++j) {
    if (seq_.jobs[j]->kind != JobKind::kOptimizer) continue;
    if (HasOwnDpAllReduce(*seq_.programs[j])) reduce_in_backward_ = false;
    AddSelfReducedGrads(*seq_.programs[j], self_reduced_);
  }
  FindLastWrites();
  // The distributed optimizer's reduce-scatters, to be issued in the backward.
  for (size_t j = 0; reduce_in_backward_ && j < seq_.jobs.size(); ++j) {
    if (seq_.jobs[j]->kind != JobKind::kOptimizer) continue;
    const std::vector<Op>& ops = seq_.programs[j]->ops();
    for (size_t o = 0; o < ops.size(); ++o) {
      if (ops[o].type != "c_reduce_scatter_sum" || ops[o].attrs.GetString("group") != "dp")
        continue;
      const int var = VarId(ops[o].Input("X"));
      if (!final_write_.count(var) || hoist_.count(var)) continue;
      hoist_[var] = {static_cast<int>(j), static_cast<int>(o)};
      hoisted_.insert({static_cast<int>(j), static_cast<int>(o)});
    }
  }
  PW_RETURN_IF_ERROR(IssueStepStartOps());
  if (const std::string at = module_.metadata.GetString(kMetaParamGather);
      module_.mesh.dp > 1 && (at == kParamGatherNextStep || at == kParamGatherAfterUpdate))
    PW_RETURN_IF_ERROR(IssueDeferredGathers(at == kParamGatherNextStep));
  if (reduce_in_backward_) {
    bucket_bytes_ = module_.metadata.GetInt(kMetaGradBucketBytes, 0);
    scatters_left_ = static_cast<int>(hoist_.size());
    for (const std::string& g : grads_) {
      const int var = VarId(g);
      early_left_ += final_write_.count(var) && !hoist_.count(var) && !self_reduced_.count(g);
    }
  }
  for (size_t j = 0; j < seq_.jobs.size(); ++j) {
    const int jj = static_cast<int>(j);
    PW_RETURN_IF_ERROR(IsP2pJob(seq_.jobs[j]->kind) ? LowerP2pJob(jj) : LowerProgramJob(jj));
  }
  PW_RETURN_IF_ERROR(MarkShardHeldParameters());
  HoldViewSources();
  return std::move(seq_);
}

// A sync-gathered parameter is held in shards when, of every op the rank runs, only its
// own-rows split and its gather touch it: then no step needs the other members' rows.
Status RankSequenceBuilder::MarkShardHeldParameters() {
  struct Touches {
    std::string rows;  // the split's output, which the gather reads
    const Program* optimizer = nullptr;
    int count = 0;
    bool split = false;
  };
  std::map<std::string, Touches> params;
  for (const auto& [j, o] : seq_.sync_gathers) {
    const Op& gather = seq_.programs[j]->ops()[o];
    params[gather.Output("Out")] = {gather.Input("X"), seq_.programs[j]};
  }
  if (params.empty()) return OkStatus();
  std::set<const Program*> seen;
  for (size_t k = 0; k < seq_.jobs.size(); ++k) {
    const Program* program = seq_.programs[k];
    if (IsP2pJob(seq_.jobs[k]->kind) || !seen.insert(program).second) continue;
    for (const Op& op : program->ops()) {
      std::set<Touches*> touched;
      auto touch = [&](const std::string& v) {
        auto it = params.find(v);
        if (it != params.end()) touched.insert(&it->second);
      };
      op.ForEachInput(touch);
      op.ForEachOutput(touch);
      for (Touches* t : touched) {
        ++t->count;
        t->split |= program == t->optimizer && op.type == "c_split" && op.Output("Out") == t->rows;
      }
    }
  }
  for (const auto& [param, t] : params) {
    if (t.count != 2 || !t.split) continue;
    PW_ASSIGN_OR_RETURN(const int whole, SlotFor(param, kStepTable, *t.optimizer));
    PW_ASSIGN_OR_RETURN(const int shard, SlotFor(t.rows, kStepTable, *t.optimizer));
    if (seq_.slots[shard].view_of == whole) seq_.slots[whole].held_as = shard;
  }
  return OkStatus();
}

StatusOr<RankSequence> BuildRankSequence(const Module& module, int rank,
                                         const RankSequenceOptions& options) {
  RankSequenceBuilder builder(module, rank, options);
  return builder.Run();
}

std::set<std::string> OptimizerGradients(
    const std::vector<const Op*>& optimizer_ops, const std::vector<const Op*>& other_ops,
    const std::function<bool(const std::string&)>& is_persistable) {
  std::set<std::string> written, grads;
  for (const Op* op : other_ops)
    op->ForEachOutput([&](const std::string& v) { written.insert(v); });
  for (const Op* op : optimizer_ops)
    op->ForEachInput([&](const std::string& v) {
      if (written.count(v) && !is_persistable(v)) grads.insert(v);
    });
  return grads;
}

bool FusesGradAccumulation(const Program& program, size_t op_index, const Var& grad) {
  const std::vector<Op>& ops = program.ops();
  if (op_index >= ops.size()) return false;
  const Op& op = ops[op_index];
  if (op.type != "matmul_weight_grad" || grad.dtype != DataType::kFloat32 ||
      op.outputs.size() != 1 || op.outputs[0].vars != std::vector<std::string>{grad.name} ||
      op.FindInput("Acc"))
    return false;
  for (size_t i = op_index + 1; i < ops.size(); ++i) {  // the last to touch it
    if (ops[i].role == OpRole::kOptimize) continue;     // reads the sum, not the value
    bool touches = false;
    auto is_grad = [&](const std::string& v) { touches |= v == grad.name; };
    ops[i].ForEachInput(is_grad);
    ops[i].ForEachOutput(is_grad);
    if (touches) return false;
  }
  return true;
}

Op WithAccumulator(const Op& op) {
  Op fused = op;
  fused.SetInput("Acc", {op.outputs[0].vars[0]});
  return fused;
}

ExecutedOp ExecutedForm(const Program& program, size_t op_index,
                        const std::function<const Var*(const std::string&)>& summed) {
  const Op& op = program.ops()[op_index];
  ExecutedOp out;
  bool fused = false;
  op.ForEachOutput([&](const std::string& v) {
    const Var* grad = summed(v);
    if (!grad) return;
    if (FusesGradAccumulation(program, op_index, *grad))
      fused = true;
    else
      out.added.push_back(v);
  });
  out.op = fused ? WithAccumulator(op) : op;
  return out;
}

const Var* ParamGradDecl(const std::string& var,
                         const std::function<const Var*(const std::string&)>& lookup) {
  if (!IsGradVarName(var)) return nullptr;
  const Var* param = lookup(ForwardVarName(var));
  return param && param->is_parameter ? lookup(var) : nullptr;
}

Op AddedWorkOp(WorkKind kind, const std::string& grad, double scale) {
  Op op;
  switch (kind) {
    case WorkKind::kAccumulate:
      op.type = "add";
      op.role = OpRole::kBackward;
      op.SetInput("X", {grad}).SetInput("Y", {grad}).SetOutput("Out", {grad});
      break;
    case WorkKind::kGradAllReduce:
      op.type = "c_allreduce_sum";
      op.role = OpRole::kCommunication;
      op.SetInput("X", {grad}).SetOutput("Out", {grad}).SetAttr("group", std::string("dp"));
      break;
    default:
      op.type = "scale";
      op.role = OpRole::kOptimize;
      op.SetInput("X", {grad}).SetOutput("Out", {grad});
      op.SetAttr("scale", scale).SetAttr("bias", 0.0);
      break;
  }
  return op;
}

Op CoalescedReduceScatterOp(const RankSequence& seq, const WorkItem& item) {
  const Program& program = seq.program(item);
  const Op& first = program.ops()[item.coalesced.front()];
  Op op;
  op.type = "c_reduce_scatter_coalesced";
  op.role = OpRole::kCommunication;
  std::vector<std::string> in, out;
  for (int o : item.coalesced) {
    in.push_back(program.ops()[o].Input("X"));
    out.push_back(program.ops()[o].Output("Out"));
  }
  op.SetInput("X", in).SetOutput("Out", out);
  op.attrs = first.attrs;
  return op;
}

Op SyncShardsOp(const Op& gather) {
  Op op;
  op.type = "c_sync_shards";
  op.role = OpRole::kCommunication;
  const std::string& param = gather.Output("Out");
  op.SetInput("X", {param}).SetOutput("Out", {param});
  for (const char* attr : {"group", "axis", "nranks"})
    if (const Attribute* a = gather.attrs.Find(attr)) op.SetAttr(attr, *a);
  return op;
}

Op BucketAllReduceOp(const std::vector<std::string>& grads) {
  if (grads.size() == 1) return AddedWorkOp(WorkKind::kGradAllReduce, grads.front());
  Op op;
  op.type = "c_allreduce_coalesced";
  op.role = OpRole::kCommunication;
  op.SetInput("X", grads).SetOutput("Out", grads).SetAttr("group", std::string("dp"));
  return op;
}

std::vector<std::string> BucketGrads(const RankSequence& seq, const WorkItem& item) {
  std::vector<std::string> grads;
  for (int s : item.writes) grads.push_back(seq.slots[s].var);
  return grads;
}

double GradScale(const RankSequence& seq) {
  return static_cast<double>(1.0f / static_cast<float>(seq.num_micro_batches * seq.dp));
}

}  // namespace pw
