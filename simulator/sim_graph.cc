#include "simulator/sim_graph.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "cost_model/op_price.h"
#include "ir/event_ref.h"
#include "ir/p2p_vars.h"
#include "ir/plan_actions.h"
#include "ir/rank_layout.h"
#include "ir/rank_sequence.h"
#include "ir/stream_order.h"
#include "simulator/stale_bytes.h"

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
    case CommClass::kSpForward:
      return "sp_forward";
    case CommClass::kSpBackward:
      return "sp_backward";
  }
  return "?";
}

namespace {

template <typename T>
void AppendDistinct(std::vector<T>& v, T x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// The op types whose CPU kernels call a BLAS GEMM (ops/kernels/cpu: matmul.cc,
// attention.cc, gqa_attention.cc); they alone run on several BLAS threads.
bool IsGemmOp(const std::string& type) {
  return type == "matmul" || type == "matmul_weight_grad" || type == "attention" ||
         type == "attention_grad" || type == "gqa_attention" || type == "gqa_attention_grad";
}

// Names as small integers: var names, so that sends meet recvs on integer keys; signature
// keys, which the instructions of the largest graphs would otherwise each copy.
class NameIds {
 public:
  int Id(const std::string& name) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<int>(names_.size()));
    if (inserted) names_.push_back(name);
    return it->second;
  }
  const std::string& Name(int id) const { return names_[id]; }
  std::vector<std::string> TakeNames() { return std::move(names_); }

 private:
  std::unordered_map<std::string, int> ids_;
  std::vector<std::string> names_;
};

// What of an instruction depends on where its rank sits in the mesh.
struct CommLink {
  int instr = 0;  // in the template
  // A transfer: its partner's pipeline rank and what it meets the partner on.
  int peer_pp = -1;
  bool backward = false;
  int var = -1;
  // A collective: its group's kind ("mp", "dp").
  std::string group_kind;
};

// One pipeline rank's work, lowered once for its first rank and copied to its peers.
// Instruction and slot indices are local: deps, allocs and uses count from 0.
struct RankTemplate {
  int rank = -1;  // the rank it was lowered for
  std::vector<SimInstr> instrs;
  std::vector<SimSlot> slots;
  std::vector<std::string> job_names;
  std::vector<CommLink> links;
  int auto_events = 0;
};

// Lowers one rank's sequence (ir/rank_sequence.h) into priced instructions: the same work,
// in the same order, on the same streams as the executor runs it.
class RankLowerer {
 public:
  RankLowerer(const Module& module, int rank, const Estimator& estimator,
              const OpRegistry& registry, const SimGraphOptions& options, NameIds& vars,
              NameIds& signatures, RankTemplate& out)
      : module_(module),
        rank_(rank),
        est_(estimator),
        registry_(registry),
        options_(options),
        vars_(vars),
        signatures_(signatures),
        t_(out) {
    t_.rank = rank;
  }

  Status Run();

 private:
  Status Lower(int item);
  Status LowerOp(int item, const Op& op, const Program& program, SimInstr& instr);
  Status LowerTransfer(int item, SimInstr& instr);
  // An op's price and its signature's index in the graph (-1 for a collective).
  struct PricedOp {
    OpPrice price;
    int signature = -1;
  };
  StatusOr<const PricedOp*> Price(const Op& op, const Program& program);

  const Module& module_;
  int rank_;
  const Estimator& est_;
  const OpRegistry& registry_;
  const SimGraphOptions& options_;
  NameIds& vars_;
  NameIds& signatures_;
  RankTemplate& t_;
  RankSequence seq_;
  std::vector<int> ids_;                  // per item: its instruction
  std::vector<bool> allocated_;           // per slot
  std::map<const Op*, PricedOp> prices_;  // every job of a program runs the same ops
  // The executor's own ops, one per (kind, var): priced once, kept alive for the cache.
  std::map<std::pair<WorkKind, int>, Op> added_;
  // The dp all-reduces, by the slots they hold (one sum or a bucket), and the deferred
  // parameter all-gathers, by their parameter's slot.
  std::map<std::vector<int>, Op> buckets_;
  // The GEMMs that add into their gradient sums, by the program's op (WithAccumulator).
  std::map<const Op*, Op> fused_;
  // (peer, backward, micro-batch, var) of the rank's transfers, each moved once.
  std::set<std::tuple<int, bool, int, int, bool>> transfers_;
};

StatusOr<const RankLowerer::PricedOp*> RankLowerer::Price(const Op& op, const Program& program) {
  auto it = prices_.find(&op);
  if (it == prices_.end()) {
    auto lookup = [&](const std::string& v) { return module_.FindVar(v, &program); };
    PricedOp priced;
    PW_ASSIGN_OR_RETURN(priced.price, PriceOp(op, module_, rank_, est_, registry_, lookup));
    if (!priced.price.key.empty()) priced.signature = signatures_.Id(priced.price.key);
    it = prices_.emplace(&op, std::move(priced)).first;
  }
  return &it->second;
}

Status RankLowerer::LowerOp(int i, const Op& op, const Program& program, SimInstr& instr) {
  const WorkItem& item = seq_.items[i];
  if (seq_.BindsView(item)) return OkStatus();  // binds its output to its input's bytes: free
  PW_ASSIGN_OR_RETURN(const PricedOp* priced, Price(op, program));
  const OpPrice* price = &priced->price;
  instr.seconds = price->seconds;
  instr.path = price->path;
  if (!price->collective) {
    instr.gemm = IsGemmOp(op.type);
    instr.signature = priced->signature;
    return OkStatus();
  }
  instr.kind = InstrKind::kCollective;
  const bool forward = seq_.jobs[item.job]->kind == JobKind::kForward;
  // A collective matmul's shifts are the all-gathers and reduce-scatters they replace.
  const bool halves = price->comm_kind == CommKind::kAllGather ||
                      price->comm_kind == CommKind::kReduceScatter ||
                      price->comm_kind == CommKind::kSendRecv;
  instr.comm_class = price->group_kind == "dp" ? CommClass::kDp
                     : halves ? (forward ? CommClass::kSpForward : CommClass::kSpBackward)
                              : (forward ? CommClass::kMpForward : CommClass::kMpBackward);
  instr.bytes = price->bytes;
  instr.comm_kind = price->comm_kind;
  instr.group_size =
      price->comm_kind == CommKind::kSendRecv ? 2 : static_cast<int>(price->group.size());
  instr.span = price->span;
  CommLink link;
  link.instr = static_cast<int>(t_.instrs.size());
  link.group_kind = price->group_kind;
  t_.links.push_back(std::move(link));
  return OkStatus();
}

Status RankLowerer::LowerTransfer(int i, SimInstr& instr) {
  const WorkItem& item = seq_.items[i];
  const Job& job = *seq_.jobs[item.job];
  const bool send = item.kind == WorkKind::kSend;
  const int peer = RankLayout(module_.mesh).PipelinePeer(rank_, job.peer);
  const std::string& var = seq_.slots[item.slot].var;
  instr.kind = send ? InstrKind::kSend : InstrKind::kRecv;
  instr.comm_class = send ? CommClass::kPpSend : CommClass::kPpRecv;
  instr.name = StrCat(send ? "SEND " : "RECV ", var);
  instr.bytes = static_cast<double>(t_.slots[item.slot].bytes);
  instr.group_size = 2;
  instr.span = GroupSpan::Pair(!SameNode(est_.device(), rank_, peer));
  instr.seconds = est_.comm().Time(CommKind::kSendRecv, instr.bytes, 2, instr.span).seconds;
  instr.path = EstimatePath::kComm;
  CommLink link;
  link.instr = static_cast<int>(t_.instrs.size());
  link.peer_pp = job.peer;
  link.backward = IsBackwardP2p(job.kind);
  link.var = vars_.Id(var);
  if (!transfers_.emplace(link.peer_pp, link.backward, job.micro_batch, link.var, send).second)
    return FailedPrecondition(JobToString(job), " on rank ", rank_, ": '", var, "' of micro-batch ",
                              job.micro_batch, " is ", send ? "sent" : "received", " twice");
  t_.links.push_back(std::move(link));
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
      const Op* op = &seq_.op(item);
      if (item.accumulate_into >= 0) {  // priced with the sum it reads as Acc
        auto [it, inserted] = fused_.try_emplace(op);
        if (inserted) it->second = WithAccumulator(*op);
        op = &it->second;
      }
      instr.name = op->type;
      Status s = LowerOp(i, *op, program, instr);
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
    case WorkKind::kGradAllReduce: {  // one sum, or a bucket priced as one collective
      auto [it, inserted] = buckets_.try_emplace(item.writes);
      if (inserted) it->second = BucketAllReduceOp(BucketGrads(seq_, item));
      instr.name = it->second.type;
      PW_RETURN_IF_ERROR(LowerOp(i, it->second, program, instr));
      break;
    }
    case WorkKind::kGradReduceScatter: {  // a bucket priced as one collective and its packing
      auto [it, inserted] = buckets_.try_emplace(item.reads);
      if (inserted) it->second = CoalescedReduceScatterOp(seq_, item);
      instr.name = it->second.type;
      PW_RETURN_IF_ERROR(LowerOp(i, it->second, program, instr));
      break;
    }
    case WorkKind::kParamGather: {  // priced as the all-gather it defers
      auto [it, inserted] = buckets_.try_emplace(item.writes);
      if (inserted) it->second = SyncShardsOp(seq_.op(item));
      instr.name = it->second.type;
      PW_RETURN_IF_ERROR(LowerOp(i, it->second, program, instr));
      break;
    }
    case WorkKind::kAccumulate:
    case WorkKind::kGradScale: {
      const std::string& var = seq_.slots[item.slot].var;
      auto [it, inserted] = added_.try_emplace({item.kind, vars_.Id(var)});
      if (inserted) it->second = AddedWorkOp(item.kind, var, GradScale(seq_));
      const Op& op = it->second;
      instr.name = item.kind == WorkKind::kAccumulate ? "grad_accumulate" : op.type;
      PW_RETURN_IF_ERROR(LowerOp(i, op, program, instr));
      break;
    }
  }
  // A slot comes to life with its first writer (or its first reader, for fed inputs).
  for (const std::vector<int>* list : {&item.writes, &item.reads})
    for (int slot : *list)
      if (!t_.slots[slot].persistent && !allocated_[slot]) {
        allocated_[slot] = true;
        instr.allocs.push_back(slot);
      }
  for (int slot : item.reads) AppendDistinct(instr.uses, slot);
  for (int slot : item.writes) AppendDistinct(instr.uses, slot);
  for (int slot : instr.uses) ++t_.slots[slot].uses;
  // The plan's events.
  for (int e : item.wait_events) AppendDistinct(instr.deps, ids_[seq_.events[e].recorded_after]);
  ids_[i] = static_cast<int>(t_.instrs.size());
  t_.instrs.push_back(std::move(instr));
  return OkStatus();
}

Status RankLowerer::Run() {
  RankSequenceOptions options;
  options.loss = ModuleLoss(module_);
  options.fuse_grad_accumulation = options_.fuse_grad_accumulation;
  PW_ASSIGN_OR_RETURN(seq_, BuildRankSequence(module_, rank_, options));
  for (const Job* job : seq_.jobs) t_.job_names.push_back(JobToString(*job));
  for (const SeqSlot& s : seq_.slots) {
    SimSlot slot;
    slot.rank = rank_;
    // A view's bytes are its source's; a parameter held in shards holds its own rows'.
    slot.bytes = s.view_of >= 0   ? 0
                 : s.held_as >= 0 ? seq_.slots[s.held_as].decl->num_bytes()
                                  : s.decl->num_bytes();
    slot.persistent = s.persistable || s.accumulator;
    t_.slots.push_back(slot);
  }
  ids_.assign(seq_.items.size(), -1);
  allocated_.assign(seq_.slots.size(), false);
  t_.instrs.reserve(seq_.items.size());
  for (int i = 0; i < static_cast<int>(seq_.items.size()); ++i) PW_RETURN_IF_ERROR(Lower(i));
  // Every cross-stream dependency the plan's events leave open becomes an edge, as the
  // executor covers it with an event of its own.
  StreamOrder order(seq_);
  StreamOrderHooks hooks;
  hooks.cover = [&](const Dependency& dep) -> StatusOr<int> {
    AppendDistinct(t_.instrs[ids_[dep.consumer]].deps, ids_[dep.producer]);
    if (seq_.items[dep.producer].carrier >= 0 && seq_.items[dep.consumer].carrier >= 0)
      ++t_.auto_events;
    return dep.producer;
  };
  return order.Walk(hooks);
}

// Sends and recvs meet on (sender, receiver, direction, micro-batch, var).
struct P2pKey {
  int src = 0, dst = 0;
  bool backward = false;
  int micro_batch = 0;
  int var = 0;
  auto operator<=>(const P2pKey&) const = default;
};

// The members of one collective group on one stream, and each member's collectives on it
// in issue order.
struct CollectiveGroup {
  std::string kind;
  std::vector<int> ranks;  // group order
  StreamType stream = StreamType::kCompute;
  std::vector<std::vector<int>> joined;  // per member: its instructions
  // The name errors give it, and the order groups are matched in.
  std::string Name() const {
    std::string name = kind + ":";
    for (int r : ranks) name += StrCat(r, ",");
    return name;
  }
};

// Copies templates onto ranks and matches their communication.
class GraphAssembler {
 public:
  GraphAssembler(const Module& module, const Estimator& estimator, const NameIds& vars,
                 SimGraph& graph)
      : layout_(module.mesh), est_(estimator), vars_(vars), g_(graph) {}

  // Whether every rank's communication is priced as that of the rank `stand_in` maps it to.
  bool PricedAlike(const std::vector<RankTemplate>& templates, const std::vector<int>& stand_in,
                   const std::vector<int>& template_of) const;
  void Instantiate(const RankTemplate& t, int rank);
  Status MatchP2p();
  Status MatchCollectives();

 private:
  GroupSpan LinkSpan(const CommLink& link, int rank, std::vector<int>* group) const;

  RankLayout layout_;
  const Estimator& est_;
  const NameIds& vars_;
  SimGraph& g_;
  std::vector<std::pair<P2pKey, int>> sends_, recvs_;
  std::vector<CollectiveGroup> groups_;
  std::map<std::tuple<std::string, int, int>, int> group_index_;  // (kind, leader, stream)
};

GroupSpan GraphAssembler::LinkSpan(const CommLink& link, int rank, std::vector<int>* group) const {
  if (link.peer_pp >= 0)
    return GroupSpan::Pair(
        !SameNode(est_.device(), rank, layout_.PipelinePeer(rank, link.peer_pp)));
  std::vector<int> members = layout_.Group(link.group_kind, rank);
  const GroupSpan span = SpanOf(est_.device(), members);
  if (group) *group = std::move(members);
  return span;
}

bool GraphAssembler::PricedAlike(const std::vector<RankTemplate>& templates,
                                 const std::vector<int>& stand_in,
                                 const std::vector<int>& template_of) const {
  for (int r = 0; r < g_.world_size; ++r) {
    const RankTemplate& t = templates[template_of[r]];
    for (const CommLink& link : t.links)
      if (LinkSpan(link, r, nullptr) != LinkSpan(link, stand_in[r], nullptr)) return false;
  }
  return true;
}

void GraphAssembler::Instantiate(const RankTemplate& t, int rank) {
  const int base = static_cast<int>(g_.instrs.size());
  const int slot_base = static_cast<int>(g_.slots.size());
  for (SimSlot slot : t.slots) {
    slot.rank = rank;
    g_.slots.push_back(slot);
  }
  std::vector<int>& order = g_.rank_order[rank];
  order.reserve(t.instrs.size());
  for (const SimInstr& local : t.instrs) {
    order.push_back(static_cast<int>(g_.instrs.size()));
    SimInstr& in = g_.instrs.emplace_back(local);
    in.rank = rank;
    for (int& d : in.deps) d += base;
    for (int& s : in.allocs) s += slot_base;
    for (int& s : in.uses) s += slot_base;
  }
  g_.job_names[rank] = t.job_names;
  g_.auto_events += t.auto_events;
  // Communication: where the rank sits decides its partners, groups and links.
  std::vector<int> group;
  for (const CommLink& link : t.links) {
    const int id = base + link.instr;
    SimInstr& in = g_.instrs[id];
    const GroupSpan span = LinkSpan(link, rank, &group);
    if (span != in.span) {
      in.span = span;
      const CommKind kind = link.peer_pp >= 0 ? CommKind::kSendRecv : in.comm_kind;
      in.seconds = est_.comm().Time(kind, in.bytes, in.group_size, span).seconds;
    }
    if (link.peer_pp >= 0) {
      const int peer = layout_.PipelinePeer(rank, link.peer_pp);
      const bool send = in.kind == InstrKind::kSend;
      P2pKey key{send ? rank : peer, send ? peer : rank, link.backward, in.micro_batch, link.var};
      (send ? sends_ : recvs_).push_back({key, id});
      continue;
    }
    auto [it, inserted] =
        group_index_.try_emplace({link.group_kind, group.front(), static_cast<int>(in.stream)},
                                 static_cast<int>(groups_.size()));
    if (inserted) {
      CollectiveGroup c;
      c.kind = link.group_kind;
      c.ranks = group;
      c.stream = in.stream;
      c.joined.resize(group.size());
      groups_.push_back(std::move(c));
    }
    CollectiveGroup& c = groups_[it->second];
    const int member =
        static_cast<int>(std::find(c.ranks.begin(), c.ranks.end(), rank) - c.ranks.begin());
    c.joined[member].push_back(id);
  }
}

Status GraphAssembler::MatchP2p() {
  auto by_key = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::sort(sends_.begin(), sends_.end(), by_key);
  std::sort(recvs_.begin(), recvs_.end(), by_key);
  // The first error in (sender, receiver, direction, micro-batch, var name) order.
  auto first = [&](std::vector<P2pKey>& keys) {
    return *std::min_element(keys.begin(), keys.end(), [&](const P2pKey& a, const P2pKey& b) {
      return std::forward_as_tuple(a.src, a.dst, a.backward, a.micro_batch, vars_.Name(a.var)) <
             std::forward_as_tuple(b.src, b.dst, b.backward, b.micro_batch, vars_.Name(b.var));
    });
  };
  std::vector<P2pKey> lone_sends, lone_recvs;
  size_t s = 0, r = 0;
  while (s < sends_.size() || r < recvs_.size()) {
    if (r == recvs_.size() || (s < sends_.size() && sends_[s].first < recvs_[r].first)) {
      lone_sends.push_back(sends_[s++].first);
    } else if (s == sends_.size() || recvs_[r].first < sends_[s].first) {
      lone_recvs.push_back(recvs_[r++].first);
    } else {
      g_.instrs[sends_[s].second].partner = recvs_[r].second;
      g_.instrs[recvs_[r].second].partner = sends_[s].second;
      ++s, ++r;
    }
  }
  if (!lone_sends.empty()) {
    const P2pKey k = first(lone_sends);
    return FailedPrecondition("rank ", k.src, " sends '", vars_.Name(k.var), "' of micro-batch ",
                              k.micro_batch, " (", k.backward ? "backward" : "forward",
                              ") to rank ", k.dst, ", which has no matching recv");
  }
  if (!lone_recvs.empty()) {
    const P2pKey k = first(lone_recvs);
    return FailedPrecondition("rank ", k.dst, " receives '", vars_.Name(k.var), "' of micro-batch ",
                              k.micro_batch, " (", k.backward ? "backward" : "forward",
                              ") from rank ", k.src, ", which never sends it");
  }
  return OkStatus();
}

Status MatchCollectivesOf(SimGraph& g, std::vector<CollectiveGroup>& groups) {
  // In the order of the groups' names, as errors name the first.
  std::vector<std::pair<std::pair<std::string, int>, int>> order;
  for (size_t i = 0; i < groups.size(); ++i)
    order.push_back({{groups[i].Name(), static_cast<int>(groups[i].stream)}, static_cast<int>(i)});
  std::sort(order.begin(), order.end());
  for (const auto& [key, index] : order) {
    CollectiveGroup& c = groups[index];
    // Members present in the graph (a folded graph holds only stand-ins).
    std::vector<int> present;
    for (size_t m = 0; m < c.ranks.size(); ++m)
      if (!g.folded() || g.replica_of[c.ranks[m]] == c.ranks[m]) present.push_back(m);
    int first = -1;  // the lowest rank that joins any
    for (int m : present)
      if (!c.joined[m].empty() && (first < 0 || c.ranks[m] < c.ranks[first])) first = m;
    const size_t count = c.joined[first].size();
    for (int m : present)
      if (c.joined[m].size() != count)
        return FailedPrecondition("all-reduce group ", key.first, " on stream ",
                                  StreamTypeName(c.stream), ": rank ", c.ranks[first], " joins ",
                                  count, " collectives but rank ", c.ranks[m], " joins ",
                                  c.joined[m].size());
    for (size_t k = 0; k < count; ++k) {
      SimCollective sc;
      for (int m : present) sc.members.push_back(c.joined[m][k]);
      sc.seconds = g.instrs[sc.members.front()].seconds;
      for (int id : sc.members) g.instrs[id].collective = static_cast<int>(g.collectives.size());
      g.collectives.push_back(std::move(sc));
    }
  }
  return OkStatus();
}

Status GraphAssembler::MatchCollectives() { return MatchCollectivesOf(g_, groups_); }

}  // namespace

StatusOr<SimGraph> BuildSimGraph(const Module& module, const Estimator& estimator,
                                 const OpRegistry& registry, const SimGraphOptions& options) {
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
  // One template per pipeline rank, lowered for its first rank (in rank order, so that an
  // error names the rank it always named).
  const RankLayout layout(module.mesh);
  NameIds vars, signatures;
  std::vector<RankTemplate> templates;
  std::vector<int> template_of(g.world_size, -1), stand_in(g.world_size, -1);
  std::map<int, int> template_of_pp;
  for (int r = 0; r < g.world_size; ++r) {
    const int pp = layout.Coord(r).pp;
    auto [it, inserted] = template_of_pp.try_emplace(pp, static_cast<int>(templates.size()));
    if (inserted) {
      RankLowerer lowerer(module, r, estimator, registry, options, vars, signatures,
                          templates.emplace_back());
      Status s = lowerer.Run();
      if (!s.ok()) return s.WithContext(StrCat("rank ", r));
    }
    template_of[r] = it->second;
    stand_in[r] = templates[it->second].rank;
  }
  GraphAssembler assembler(module, estimator, vars, g);
  const bool fold = options.fold_replicas && estimator.device().cores_per_node() <= 0 &&
                    assembler.PricedAlike(templates, stand_in, template_of);
  if (fold) g.replica_of = stand_in;
  size_t instrs = 0, slots = 0;
  for (int r = 0; r < g.world_size; ++r)
    if (!fold || stand_in[r] == r) {
      instrs += templates[template_of[r]].instrs.size();
      slots += templates[template_of[r]].slots.size();
    }
  g.instrs.reserve(instrs);
  g.slots.reserve(slots);
  for (int r = 0; r < g.world_size; ++r)
    if (!fold || stand_in[r] == r) assembler.Instantiate(templates[template_of[r]], r);
  PW_RETURN_IF_ERROR(assembler.MatchP2p());
  PW_RETURN_IF_ERROR(assembler.MatchCollectives());
  g.signatures = signatures.TakeNames();
  PriceStaleBytes(estimator.table(), g);
  return g;
}

std::vector<int> StreamPredecessors(const SimGraph& g) {
  std::vector<int> previous(g.instrs.size(), -1);
  for (const std::vector<int>& order : g.rank_order) {
    std::array<int, kNumStreamTypes> last;
    last.fill(-1);
    for (int i : order) {
      const int s = static_cast<int>(g.instrs[i].stream);
      previous[i] = last[s];
      last[s] = i;
    }
  }
  return previous;
}

}  // namespace pw::cost
