#include "cost_model/sim_graph.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "cost_model/implicit_ops.h"
#include "ir/event_ref.h"
#include "ir/p2p_vars.h"
#include "ir/plan_actions.h"
#include "ir/rank_layout.h"

namespace pw::cost {

const char* CommClassName(CommClass c) {
  switch (c) {
    case CommClass::kNone:
      return "none";
    case CommClass::kMpForward:
      return "mp_forward";
    case CommClass::kMpBackward:
      return "mp_backward";
    case CommClass::kPpSend:
      return "pp_send";
    case CommClass::kPpRecv:
      return "pp_recv";
    case CommClass::kDp:
      return "dp";
  }
  return "?";
}

namespace {

constexpr int kRootTable = -2;  // parameters, optimizer state, gradient accumulators
constexpr int kStepTable = -1;  // the optimizer job's own intermediates

// Sends and recvs meet on (sender, receiver, direction, micro-batch, var).
using P2pKey = std::tuple<int, int, bool, int, std::string>;
// Collectives meet on (group, stream) in issue order.
using CollectiveKey = std::pair<std::string, int>;

struct Matching {
  std::map<P2pKey, int> sends, recvs;
  std::map<CollectiveKey, std::map<int, std::vector<int>>> collectives;  // key -> rank -> instrs
  std::map<CollectiveKey, std::vector<int>> group_members;
};

template <typename T>
void AppendDistinct(std::vector<T>& v, T x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// The op types whose CPU kernels call a BLAS GEMM (ops/kernels/cpu: matmul.cc,
// attention.cc); they alone run on several BLAS threads.
bool IsGemmOp(const std::string& type) {
  return type == "matmul" || type == "matmul_weight_grad" || type == "attention" ||
         type == "attention_grad";
}

bool InterNode(const DeviceSpec& spec, const std::vector<int>& ranks) {
  for (int r : ranks)
    if (!SameNode(spec, ranks.front(), r)) return true;
  return false;
}

class RankLowerer {
 public:
  RankLowerer(const Module& module, int rank, const Estimator& estimator,
              const OpRegistry& registry, SimGraph& graph, Matching& matching)
      : module_(module),
        rank_(rank),
        coord_(RankLayout(module.mesh).Coord(rank)),
        est_(estimator),
        registry_(registry),
        g_(graph),
        match_(matching) {}

  Status Run();

 private:
  struct Access {
    int writer = -1;
    std::array<int, kNumStreamTypes> readers;
    Access() { readers.fill(-1); }
  };

  Status CollectJobs();
  void FindGradients();
  Status LowerProgramJob(size_t j, const Job& job, const Program& program);
  Status LowerP2pJob(size_t j, const Job& job);
  Status LowerGradFinalize(size_t j, const Job& job, const Program& optimizer);
  Status EmitOp(const Op& op, StreamType stream, int table, size_t j, int mb,
                const Program& program, const std::vector<int>& waits);
  StatusOr<int> SlotFor(const std::string& var, int table, const Program& program);
  const Var* FindDecl(const std::string& var, const Program& program) const;
  int Emit(SimInstr instr, const std::vector<int>& reads, const std::vector<int>& writes,
           const std::vector<int>& waits);
  StatusOr<Estimate> Cost(const Op& op, const Program& program);

  const Module& module_;
  int rank_;
  RankCoord coord_;
  const Estimator& est_;
  const OpRegistry& registry_;
  SimGraph& g_;
  Matching& match_;

  int micro_batches_ = 0;
  std::vector<const Job*> jobs_;
  std::set<std::string> grads_;
  std::map<std::pair<std::string, int>, std::pair<size_t, size_t>> last_write_;
  std::map<std::pair<int, std::string>, int> slot_index_;
  std::map<int, Access> access_;
  std::set<int> allocated_;
  std::map<std::pair<std::string, int>, int> events_;  // (name, micro-batch) -> recorder
  std::map<const Op*, Estimate> op_costs_;
  std::deque<Op> implicit_;  // ops the executor adds, kept alive for the cost cache
};

Status RankLowerer::CollectJobs() {
  const Plan& plan = module_.plan;
  micro_batches_ = plan.num_micro_batches;
  const RankPlan* mine = nullptr;
  for (const RankPlan& r : plan.ranks)
    if (r.rank == coord_.pp) mine = &r;
  if (!mine && plan.ranks.size() == 1 && module_.mesh.pp == 1) mine = &plan.ranks.front();
  if (!mine) return FailedPrecondition("the plan has no jobs for pipeline rank ", coord_.pp);
  FlattenJobs(mine->jobs, jobs_);
  for (const Job* job : jobs_) g_.job_names[rank_].push_back(JobToString(*job));
  return OkStatus();
}

const Var* RankLowerer::FindDecl(const std::string& var, const Program& program) const {
  if (const Var* v = program.FindVar(var)) return v;
  for (const Program& p : module_.programs())
    if (const Var* v = p.FindVar(var)) return v;
  return nullptr;
}

void RankLowerer::FindGradients() {
  std::vector<const Op*> optimizer_ops, other_ops;
  const Program* any = nullptr;
  for (const Job* job : jobs_) {
    const Program* p = module_.FindProgram(job->program);
    if (!p || IsP2pJob(job->kind)) continue;
    any = p;
    for (const Op& op : p->ops())
      (job->kind == JobKind::kOptimizer ? optimizer_ops : other_ops).push_back(&op);
  }
  if (!any) return;
  grads_ = OptimizerGradients(optimizer_ops, other_ops, [&](const std::string& v) {
    const Var* decl = FindDecl(v, *any);
    return decl && decl->persistable;
  });
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const Job& job = *jobs_[j];
    if (job.kind == JobKind::kOptimizer || IsP2pJob(job.kind)) continue;
    const Program* p = module_.FindProgram(job.program);
    if (!p) continue;
    for (size_t o = 0; o < p->ops().size(); ++o)
      p->ops()[o].ForEachOutput([&](const std::string& v) {
        if (grads_.count(v)) last_write_[{v, job.micro_batch}] = {j, o};
      });
  }
}

StatusOr<int> RankLowerer::SlotFor(const std::string& var, int table, const Program& program) {
  const Var* decl = FindDecl(var, program);
  if (!decl) return NotFound("var '", var, "' is not declared in program '", program.name(), "'");
  bool accumulator = table == kStepTable && grads_.count(var);
  bool persistent = decl->persistable || accumulator;
  int key_table = persistent ? kRootTable : table;
  auto [it, inserted] = slot_index_.try_emplace({key_table, var}, -1);
  if (!inserted) return it->second;
  SimSlot slot;
  slot.rank = rank_;
  slot.bytes = decl->num_bytes();
  slot.persistent = persistent;
  it->second = static_cast<int>(g_.slots.size());
  g_.slots.push_back(slot);
  return it->second;
}

int RankLowerer::Emit(SimInstr instr, const std::vector<int>& reads, const std::vector<int>& writes,
                      const std::vector<int>& waits) {
  const int id = static_cast<int>(g_.instrs.size());
  const int s = static_cast<int>(instr.stream);
  instr.rank = rank_;
  auto need = [&](int dep) {
    if (dep >= 0 && g_.instrs[dep].stream != instr.stream) AppendDistinct(instr.deps, dep);
  };
  for (int w : waits) AppendDistinct(instr.deps, w);
  for (int slot : reads) need(access_[slot].writer);
  for (int slot : writes) {
    Access& a = access_[slot];
    need(a.writer);
    for (int r : a.readers) need(r);
  }
  for (int slot : reads) access_[slot].readers[s] = id;
  for (int slot : writes) {
    Access& a = access_[slot];
    a.writer = id;
    a.readers.fill(-1);
  }
  // A slot comes to life with its first writer (or its first reader, for fed inputs).
  for (const std::vector<int>* list : {&writes, &reads})
    for (int slot : *list)
      if (!g_.slots[slot].persistent && allocated_.insert(slot).second)
        instr.allocs.push_back(slot);
  for (int slot : reads) AppendDistinct(instr.uses, slot);
  for (int slot : writes) AppendDistinct(instr.uses, slot);
  for (int slot : instr.uses) ++g_.slots[slot].uses;
  g_.instrs.push_back(std::move(instr));
  g_.rank_order[rank_].push_back(id);
  return id;
}

StatusOr<Estimate> RankLowerer::Cost(const Op& op, const Program& program) {
  auto it = op_costs_.find(&op);
  if (it != op_costs_.end()) return it->second;
  auto lookup = [&](const std::string& v) { return FindDecl(v, program); };
  PW_ASSIGN_OR_RETURN(OpSignature sig, SignatureOf(op, registry_, lookup));
  Estimate e = est_.OpTime(sig);
  op_costs_[&op] = e;
  return e;
}

Status RankLowerer::EmitOp(const Op& op, StreamType stream, int table, size_t j, int mb,
                           const Program& program, const std::vector<int>& waits) {
  std::vector<int> reads, writes;
  for (const Slot& s : op.inputs)
    for (const std::string& v : s.vars) {
      PW_ASSIGN_OR_RETURN(int slot, SlotFor(v, table, program));
      AppendDistinct(reads, slot);
    }
  for (const Slot& s : op.outputs)
    for (const std::string& v : s.vars) {
      PW_ASSIGN_OR_RETURN(int slot, SlotFor(v, table, program));
      AppendDistinct(writes, slot);
    }
  SimInstr instr;
  instr.stream = stream;
  instr.job = static_cast<int>(j);
  instr.micro_batch = mb;
  instr.name = op.type;

  // A collective over a group of more than one rank is communication; otherwise it is the
  // identity its kernel computes locally.
  const OpDef* def = registry_.Find(op.type);
  std::vector<int> group;
  if (def && def->is_communication && op.type == "c_allreduce_sum")
    group = RankLayout(module_.mesh).Group(op.attrs.GetString("group", "mp"), rank_);
  if (group.size() > 1) {
    const Var* x = FindDecl(op.Input("X"), program);
    instr.kind = InstrKind::kCollective;
    instr.comm_class = op.attrs.GetString("group", "mp") == "dp" ? CommClass::kDp
                       : j < jobs_.size() && jobs_[j]->kind == JobKind::kForward
                           ? CommClass::kMpForward
                           : CommClass::kMpBackward;
    instr.bytes = x ? static_cast<double>(x->num_bytes()) : 0;
    instr.group_size = static_cast<int>(group.size());
    instr.inter_node = InterNode(est_.device(), group);
    instr.seconds = est_.comm()
                        .Time(CommKind::kAllReduce, instr.bytes, instr.group_size, instr.inter_node)
                        .seconds;
    instr.path = EstimatePath::kComm;
    std::string name = op.attrs.GetString("group", "mp") + ":";
    for (int r : group) name += StrCat(r, ",");
    CollectiveKey key{name, static_cast<int>(stream)};
    int id = Emit(std::move(instr), reads, writes, waits);
    match_.collectives[key][rank_].push_back(id);
    match_.group_members[key] = group;
    return OkStatus();
  }
  PW_ASSIGN_OR_RETURN(Estimate e, Cost(op, program));
  instr.seconds = e.seconds;
  instr.path = e.path;
  instr.gemm = IsGemmOp(op.type);
  Emit(std::move(instr), reads, writes, waits);
  return OkStatus();
}

Status RankLowerer::LowerGradFinalize(size_t j, const Job& job, const Program& optimizer) {
  bool has_dp_allreduce = false;
  for (const Op& op : optimizer.ops())
    has_dp_allreduce |= op.type == "c_allreduce_sum" && op.attrs.GetString("group") == "dp";
  const int dp = module_.mesh.dp;
  const double inv = 1.0 / (static_cast<double>(micro_batches_) * dp);
  for (const std::string& g : grads_) {
    if (dp > 1 && !has_dp_allreduce) {
      const Op& reduce = implicit_.emplace_back(DpAllReduceOp(g));
      PW_RETURN_IF_ERROR(EmitOp(reduce, StreamType::kDpComm, kStepTable, j, -1, optimizer, {}));
    }
    const Op& scale = implicit_.emplace_back(GradScaleOp(g, inv));
    PW_RETURN_IF_ERROR(EmitOp(scale, StreamType::kCompute, kStepTable, j, -1, optimizer, {}));
  }
  // Step-level work belongs to no job's micro-batch.
  (void)job;
  return OkStatus();
}

Status RankLowerer::LowerProgramJob(size_t j, const Job& job, const Program& program) {
  const bool optimizer = job.kind == JobKind::kOptimizer;
  const int table = optimizer ? kStepTable : job.micro_batch;
  const int mb = optimizer ? -1 : job.micro_batch;
  if (optimizer) PW_RETURN_IF_ERROR(LowerGradFinalize(j, job, program));
  const std::vector<Op>& ops = program.ops();
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    auto where = [&] {
      return StrCat("op ", o, " (", op.type, ") of program '", program.name(), "'",
                    mb >= 0 ? StrCat(" for micro-batch ", mb) : "", " on rank ", rank_);
    };
    StatusOr<StreamType> stream = ParseStreamType(op.stream);
    if (!stream.ok()) return stream.status().WithContext(where());
    std::vector<int> waits;
    for (const std::string& w : op.wait_events) {
      PW_ASSIGN_OR_RETURN(EventRef ref, ParseEventRef(w));
      int emb = ref.MicroBatch(job.micro_batch);
      if (emb < 0 || emb >= micro_batches_) {
        if (ref.relative) continue;  // nothing before the first micro-batch to wait for
        return InvalidArgument(where(), ": waits on '", w, "', micro-batch ", emb, " out of range");
      }
      auto it = events_.find({ref.name, emb});
      if (it == events_.end())
        return FailedPrecondition(where(), ": waits on event '", ref.name, "' of micro-batch ", emb,
                                  ", which no earlier job of pipeline rank ", coord_.pp,
                                  " records");
      waits.push_back(it->second);
    }
    Status s = EmitOp(op, *stream, table, j, mb, program, waits);
    if (!s.ok()) return s.WithContext(where());
    const int id = static_cast<int>(g_.instrs.size()) - 1;
    for (const std::string& r : op.record_events) {
      PW_ASSIGN_OR_RETURN(EventRef ref, ParseEventRef(r));
      int emb = ref.MicroBatch(job.micro_batch);
      if (emb < 0 || emb >= micro_batches_)
        return InvalidArgument(where(), ": records '", r, "' for micro-batch ", emb,
                               ", outside [0, ", micro_batches_, ")");
      if (!events_.emplace(std::make_pair(ref.name, emb), id).second)
        return FailedPrecondition(where(), ": event '", ref.name, "' of micro-batch ", emb,
                                  " is recorded twice in one step");
    }
    if (optimizer) continue;
    // Gradient accumulation after the op that finishes a micro-batch's gradient.
    std::vector<std::string> finished;
    op.ForEachOutput([&](const std::string& v) {
      auto it = last_write_.find({v, mb});
      if (it != last_write_.end() && it->second == std::make_pair(j, o))
        AppendDistinct(finished, v);
    });
    for (const std::string& v : finished) {
      PW_ASSIGN_OR_RETURN(int value, SlotFor(v, table, program));
      PW_ASSIGN_OR_RETURN(int acc, SlotFor(v, kStepTable, program));
      const Op& add = implicit_.emplace_back(GradAccumulateOp(v));
      PW_ASSIGN_OR_RETURN(Estimate e, Cost(add, program));
      SimInstr instr;
      instr.stream = *stream;
      instr.job = static_cast<int>(j);
      instr.micro_batch = mb;
      instr.name = "grad_accumulate";
      instr.seconds = e.seconds;
      instr.path = e.path;
      Emit(std::move(instr), {acc, value}, {acc}, {});
    }
  }
  return OkStatus();
}

Status RankLowerer::LowerP2pJob(size_t j, const Job& job) {
  PW_ASSIGN_OR_RETURN(std::vector<std::string> vars, P2pVars(module_, coord_.pp, job));
  const Program* program = module_.FindProgram(job.program);
  if (!program) {
    for (const Program& p : module_.programs())
      if (ProgramPipelineRank(module_, p) == coord_.pp) program = &p;
  }
  if (!program) return NotFound(JobToString(job), ": pipeline rank ", coord_.pp, " has no program");
  const bool send = IsSendJob(job.kind);
  const bool backward = IsBackwardP2p(job.kind);
  RankCoord peer_coord = coord_;
  peer_coord.pp = job.peer;
  const int peer = RankLayout(module_.mesh).Rank(peer_coord);
  if (job.peer < 0 || job.peer >= module_.mesh.pp)
    return InvalidArgument(JobToString(job), " on pipeline rank ", coord_.pp, ": peer ", job.peer,
                           " is not a pipeline rank (pp = ", module_.mesh.pp, ")");
  for (const std::string& v : vars) {
    PW_ASSIGN_OR_RETURN(int slot, SlotFor(v, job.micro_batch, *program));
    SimInstr instr;
    instr.kind = send ? InstrKind::kSend : InstrKind::kRecv;
    instr.comm_class = send ? CommClass::kPpSend : CommClass::kPpRecv;
    instr.stream = send ? StreamType::kPpSend : StreamType::kPpRecv;
    instr.job = static_cast<int>(j);
    instr.micro_batch = job.micro_batch;
    instr.name = StrCat(send ? "SEND " : "RECV ", v);
    instr.bytes = static_cast<double>(g_.slots[slot].bytes);
    instr.group_size = 2;
    instr.inter_node = !SameNode(est_.device(), rank_, peer);
    instr.seconds = est_.comm().Time(CommKind::kSendRecv, instr.bytes, 2, instr.inter_node).seconds;
    instr.path = EstimatePath::kComm;
    int id = send ? Emit(std::move(instr), {slot}, {}, {}) : Emit(std::move(instr), {}, {slot}, {});
    P2pKey key = send ? P2pKey{rank_, peer, backward, job.micro_batch, v}
                      : P2pKey{peer, rank_, backward, job.micro_batch, v};
    auto& side = send ? match_.sends : match_.recvs;
    if (!side.emplace(key, id).second)
      return FailedPrecondition(JobToString(job), " on rank ", rank_, ": '", v, "' of micro-batch ",
                                job.micro_batch, " is ", send ? "sent" : "received", " twice");
  }
  return OkStatus();
}

Status RankLowerer::Run() {
  PW_RETURN_IF_ERROR(CollectJobs());
  FindGradients();
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const Job& job = *jobs_[j];
    if (IsP2pJob(job.kind)) {
      PW_RETURN_IF_ERROR(LowerP2pJob(j, job));
      continue;
    }
    const Program* program = module_.FindProgram(job.program);
    if (!program) return NotFound(JobToString(job), ": no program named '", job.program, "'");
    if (job.kind != JobKind::kOptimizer &&
        (job.micro_batch < 0 || job.micro_batch >= micro_batches_))
      return FailedPrecondition(JobToString(job), ": micro-batch ", job.micro_batch,
                                " is outside [0, ", micro_batches_, ")");
    PW_RETURN_IF_ERROR(LowerProgramJob(j, job, *program));
  }
  return OkStatus();
}

Status MatchP2p(SimGraph& g, const Matching& m) {
  for (const auto& [key, send] : m.sends) {
    auto it = m.recvs.find(key);
    const auto& [src, dst, backward, mb, var] = key;
    if (it == m.recvs.end())
      return FailedPrecondition("rank ", src, " sends '", var, "' of micro-batch ", mb, " (",
                                backward ? "backward" : "forward", ") to rank ", dst,
                                ", which has no matching recv");
    g.instrs[send].partner = it->second;
    g.instrs[it->second].partner = send;
  }
  for (const auto& [key, recv] : m.recvs) {
    if (m.sends.count(key)) continue;
    const auto& [src, dst, backward, mb, var] = key;
    return FailedPrecondition("rank ", dst, " receives '", var, "' of micro-batch ", mb, " (",
                              backward ? "backward" : "forward", ") from rank ", src,
                              ", which never sends it");
  }
  return OkStatus();
}

Status MatchCollectives(SimGraph& g, const Matching& m) {
  for (const auto& [key, per_rank] : m.collectives) {
    const std::vector<int>& group = m.group_members.at(key);
    size_t count = per_rank.begin()->second.size();
    for (int r : group) {
      auto it = per_rank.find(r);
      size_t n = it == per_rank.end() ? 0 : it->second.size();
      if (n != count)
        return FailedPrecondition("all-reduce group ", key.first, " on stream ",
                                  StreamTypeName(static_cast<StreamType>(key.second)), ": rank ",
                                  per_rank.begin()->first, " joins ", count,
                                  " collectives but rank ", r, " joins ", n);
    }
    for (size_t k = 0; k < count; ++k) {
      SimCollective c;
      for (int r : group) c.members.push_back(per_rank.at(r)[k]);
      c.seconds = g.instrs[c.members.front()].seconds;
      for (int id : c.members) g.instrs[id].collective = static_cast<int>(g.collectives.size());
      g.collectives.push_back(std::move(c));
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<SimGraph> BuildSimGraph(const Module& module, const Estimator& estimator,
                                 const OpRegistry& registry) {
  if (module.plan.empty())
    return FailedPrecondition(
        "module '", module.name,
        "' has no plan: run 'split-program,schedule{...},insert-p2p' first (pipeweave sim "
        "simulates an unsplit pp=1 module as the sequential reference)");
  if (module.plan.num_micro_batches < 1)
    return FailedPrecondition("the plan has ", module.plan.num_micro_batches, " micro-batches");
  SimGraph g;
  g.world_size = module.mesh.world_size();
  g.num_micro_batches = module.plan.num_micro_batches;
  g.rank_order.resize(g.world_size);
  g.job_names.resize(g.world_size);
  Matching matching;
  for (int r = 0; r < g.world_size; ++r) {
    RankLowerer lowerer(module, r, estimator, registry, g, matching);
    Status s = lowerer.Run();
    if (!s.ok()) return s.WithContext(StrCat("rank ", r));
  }
  PW_RETURN_IF_ERROR(MatchP2p(g, matching));
  PW_RETURN_IF_ERROR(MatchCollectives(g, matching));
  return g;
}

}  // namespace pw::cost
