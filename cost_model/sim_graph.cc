#include "cost_model/sim_graph.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "cost_model/op_price.h"
#include "ir/event_ref.h"
#include "ir/p2p_vars.h"
#include "ir/plan_actions.h"
#include "ir/rank_layout.h"
#include "ir/rank_sequence.h"
#include "ir/stream_order.h"

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

// Lowers one rank's sequence (ir/rank_sequence.h) into priced instructions: the same work,
// in the same order, on the same streams as the executor runs it.
class RankLowerer {
 public:
  RankLowerer(const Module& module, int rank, const Estimator& estimator,
              const OpRegistry& registry, SimGraph& graph, Matching& matching)
      : module_(module),
        rank_(rank),
        est_(estimator),
        registry_(registry),
        g_(graph),
        match_(matching) {}

  Status Run();

 private:
  Status Lower(int item);
  Status LowerOp(int item, const Op& op, const Program& program, SimInstr& instr);
  Status LowerTransfer(int item, SimInstr& instr);
  StatusOr<const OpPrice*> Price(const Op& op, const Program& program);

  const Module& module_;
  int rank_;
  const Estimator& est_;
  const OpRegistry& registry_;
  SimGraph& g_;
  Matching& match_;
  RankSequence seq_;
  int first_slot_ = 0;    // the rank's first SimSlot
  std::vector<int> ids_;  // per item: its SimInstr
  std::set<int> allocated_;
  std::map<const Op*, OpPrice> prices_;  // every job of a program runs the same ops
  std::deque<Op> added_;                 // the executor's own ops, kept alive for the cache
};

StatusOr<const OpPrice*> RankLowerer::Price(const Op& op, const Program& program) {
  auto it = prices_.find(&op);
  if (it == prices_.end()) {
    auto lookup = [&](const std::string& v) { return module_.FindVar(v, &program); };
    PW_ASSIGN_OR_RETURN(OpPrice price, PriceOp(op, module_, rank_, est_, registry_, lookup));
    it = prices_.emplace(&op, std::move(price)).first;
  }
  return &it->second;
}

Status RankLowerer::LowerOp(int i, const Op& op, const Program& program, SimInstr& instr) {
  const WorkItem& item = seq_.items[i];
  PW_ASSIGN_OR_RETURN(const OpPrice* price, Price(op, program));
  instr.seconds = price->seconds;
  instr.path = price->path;
  if (!price->collective) {
    instr.gemm = IsGemmOp(op.type);
    return OkStatus();
  }
  instr.kind = InstrKind::kCollective;
  instr.comm_class = price->group_kind == "dp"                        ? CommClass::kDp
                     : seq_.jobs[item.job]->kind == JobKind::kForward ? CommClass::kMpForward
                                                                      : CommClass::kMpBackward;
  instr.bytes = price->bytes;
  instr.group_size = static_cast<int>(price->group.size());
  instr.inter_node = price->inter_node;
  std::string name = price->group_kind + ":";
  for (int r : price->group) name += StrCat(r, ",");
  CollectiveKey key{name, static_cast<int>(item.stream)};
  match_.collectives[key][rank_].push_back(static_cast<int>(g_.instrs.size()));
  match_.group_members[key] = price->group;
  return OkStatus();
}

Status RankLowerer::LowerTransfer(int i, SimInstr& instr) {
  const WorkItem& item = seq_.items[i];
  const Job& job = *seq_.jobs[item.job];
  const bool send = item.kind == WorkKind::kSend;
  RankCoord peer_coord = RankLayout(module_.mesh).Coord(rank_);
  peer_coord.pp = job.peer;
  const int peer = RankLayout(module_.mesh).Rank(peer_coord);
  const std::string& var = seq_.slots[item.slot].var;
  instr.kind = send ? InstrKind::kSend : InstrKind::kRecv;
  instr.comm_class = send ? CommClass::kPpSend : CommClass::kPpRecv;
  instr.name = StrCat(send ? "SEND " : "RECV ", var);
  instr.bytes = static_cast<double>(g_.slots[first_slot_ + item.slot].bytes);
  instr.group_size = 2;
  instr.inter_node = !SameNode(est_.device(), rank_, peer);
  instr.seconds = est_.comm().Time(CommKind::kSendRecv, instr.bytes, 2, instr.inter_node).seconds;
  instr.path = EstimatePath::kComm;
  P2pKey key = send ? P2pKey{rank_, peer, IsBackwardP2p(job.kind), job.micro_batch, var}
                    : P2pKey{peer, rank_, IsBackwardP2p(job.kind), job.micro_batch, var};
  if (!(send ? match_.sends : match_.recvs).emplace(key, static_cast<int>(g_.instrs.size())).second)
    return FailedPrecondition(JobToString(job), " on rank ", rank_, ": '", var, "' of micro-batch ",
                              job.micro_batch, " is ", send ? "sent" : "received", " twice");
  return OkStatus();
}

Status RankLowerer::Lower(int i) {
  const WorkItem& item = seq_.items[i];
  SimInstr instr;
  instr.rank = rank_;
  instr.stream = item.stream;
  instr.job = item.job;
  instr.micro_batch = item.micro_batch;
  const Program& program = seq_.program(item);
  switch (item.kind) {
    case WorkKind::kOp: {
      const Op& op = seq_.op(item);
      instr.name = op.type;
      Status s = LowerOp(i, op, program, instr);
      if (!s.ok()) return s.WithContext(StrCat(seq_.Describe(i), " on rank ", rank_));
      break;
    }
    case WorkKind::kSend:
    case WorkKind::kRecv:
      PW_RETURN_IF_ERROR(LowerTransfer(i, instr));
      break;
    case WorkKind::kFetch:
      instr.name = "fetch_loss";
      break;
    case WorkKind::kAccumulate:
    case WorkKind::kGradAllReduce:
    case WorkKind::kGradScale: {
      const Op& op =
          added_.emplace_back(AddedWorkOp(item.kind, seq_.slots[item.slot].var, GradScale(seq_)));
      instr.name = item.kind == WorkKind::kAccumulate ? "grad_accumulate" : op.type;
      PW_RETURN_IF_ERROR(LowerOp(i, op, program, instr));
      break;
    }
  }
  // A slot comes to life with its first writer (or its first reader, for fed inputs).
  for (const std::vector<int>* list : {&item.writes, &item.reads})
    for (int s : *list) {
      const int slot = first_slot_ + s;
      if (!g_.slots[slot].persistent && allocated_.insert(slot).second)
        instr.allocs.push_back(slot);
    }
  for (int s : item.reads) AppendDistinct(instr.uses, first_slot_ + s);
  for (int s : item.writes) AppendDistinct(instr.uses, first_slot_ + s);
  for (int slot : instr.uses) ++g_.slots[slot].uses;
  // The plan's events.
  for (int e : item.wait_events) AppendDistinct(instr.deps, ids_[seq_.events[e].recorded_after]);
  ids_[i] = static_cast<int>(g_.instrs.size());
  g_.instrs.push_back(std::move(instr));
  g_.rank_order[rank_].push_back(ids_[i]);
  return OkStatus();
}

Status RankLowerer::Run() {
  RankSequenceOptions options;
  options.loss = ModuleLoss(module_);
  PW_ASSIGN_OR_RETURN(seq_, BuildRankSequence(module_, rank_, options));
  for (const Job* job : seq_.jobs) g_.job_names[rank_].push_back(JobToString(*job));
  first_slot_ = static_cast<int>(g_.slots.size());
  for (const SeqSlot& s : seq_.slots) {
    SimSlot slot;
    slot.rank = rank_;
    slot.bytes = s.view_of >= 0 ? 0 : s.decl->num_bytes();  // a view's bytes are its source's
    slot.persistent = s.persistable || s.accumulator;
    g_.slots.push_back(slot);
  }
  ids_.assign(seq_.items.size(), -1);
  for (int i = 0; i < static_cast<int>(seq_.items.size()); ++i) PW_RETURN_IF_ERROR(Lower(i));
  // Every cross-stream dependency the plan's events leave open becomes an edge, as the
  // executor covers it with an event of its own.
  StreamOrder order(seq_);
  StreamOrderHooks hooks;
  hooks.cover = [&](const Dependency& dep) -> StatusOr<int> {
    AppendDistinct(g_.instrs[ids_[dep.consumer]].deps, ids_[dep.producer]);
    if (seq_.items[dep.producer].carrier >= 0 && seq_.items[dep.consumer].carrier >= 0)
      ++g_.auto_events;
    return dep.producer;
  };
  return order.Walk(hooks);
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
