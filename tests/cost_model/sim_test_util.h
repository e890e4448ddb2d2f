#pragma once
// Hand-built modules and plans for the simulator tests. Costs are made easy to read: a
// `scale` op whose input has shape [k] costs k milliseconds (the test table says so), and
// a two-rank all-reduce or a transfer costs what the test device's links give.

#include <memory>
#include <string>
#include <vector>

#include "cost_model/estimator.h"
#include "ir/module.h"
#include "ops/registry.h"
#include "simulator/simulator.h"

namespace pw::cost::testing {

inline Var F32(const std::string& name, int64_t n, bool persistable = false) {
  Var v;
  v.name = name;
  v.shape = {n};
  v.persistable = persistable;
  return v;
}

// A scale op X -> Out on `stream`.
inline Op Scale(const std::string& x, const std::string& out, const std::string& stream = "",
                std::vector<std::string> waits = {}, std::vector<std::string> records = {}) {
  Op op;
  op.type = "scale";
  op.SetInput("X", {x}).SetOutput("Out", {out});
  op.stream = stream;
  op.wait_events = std::move(waits);
  op.record_events = std::move(records);
  return op;
}

inline Op AllReduce(const std::string& x, const std::string& group,
                    const std::string& stream = "") {
  Op op;
  op.type = "c_allreduce_sum";
  op.SetInput("X", {x}).SetOutput("Out", {x}).SetAttr("group", group);
  op.stream = stream;
  return op;
}

inline Program MakeProgram(const std::string& name, const std::string& kind, int stage,
                           std::vector<Var> vars, std::vector<Op> ops) {
  Program p(name);
  p.info().kind = kind;
  p.info().stage = stage;
  for (Var& v : vars) p.AddVar(std::move(v));
  for (Op& op : ops) {
    op.stage = stage;
    p.AddOp(std::move(op));
  }
  return p;
}

inline Job MakeJob(JobKind kind, int stage, int mb, const std::string& program, int peer = -1) {
  Job j;
  j.kind = kind;
  j.stage = stage;
  j.micro_batch = mb;
  j.program = program;
  j.peer = peer;
  return j;
}

// Plans `m` as two stages on ranks 0 and 1, each running one forward job of its program
// ("s0", "s1"), one micro-batch.
inline void PlanTwoStagesOneForwardEach(Module& m) {
  m.plan.num_micro_batches = 1;
  m.plan.num_stages = 2;
  m.plan.stage_to_rank = {0, 1};
  m.plan.ranks = {RankPlan{0, {MakeJob(JobKind::kForward, 0, 0, "s0")}},
                  RankPlan{1, {MakeJob(JobKind::kForward, 1, 0, "s1")}}};
}

// A one-stage plan: every program of `programs`, `jobs` on pipeline rank 0.
inline Module OneRank(std::vector<Program> programs, std::vector<Job> jobs, int micro_batches = 1) {
  Module m;
  m.name = "test";
  for (Program& p : programs) m.AddProgram(std::move(p));
  m.plan.schedule = "hand";
  m.plan.num_micro_batches = micro_batches;
  m.plan.num_stages = 1;
  m.plan.stage_to_rank = {0};
  m.plan.ranks.push_back(RankPlan{0, std::move(jobs)});
  return m;
}

// No overheads, no core sharing, no overlap slowdown; links: 0.5 ms latency, unlimited
// bandwidth (a transfer costs 0.5 ms, a two-rank ring all-reduce 1 ms).
inline DeviceSpec TestDevice() {
  DeviceSpec d = *BuiltinDeviceSpec("cpu");
  d.set_name("test");
  d.set_launch_overhead(0);
  d.set_op_overhead(0);
  d.set_busy_wake_latency(0);
  d.set_wait_cpu(0);
  d.set_spin_cpu_share(0);
  d.set_event_latency(0);
  d.set_min_kernel_time(0);
  d.set_cores_per_node(0);
  d.set_cores_in_turns(false);  // where a test gives it cores, they are shared evenly
  d.set_overlap_slowdown(0);
  d.set_intra_node_latency(0.5e-3);
  d.set_intra_node_bandwidth(1e30);
  d.set_inter_node_bandwidth(1e30);
  return d;
}

// A table giving every scale op of `module` dim-0 milliseconds.
inline std::shared_ptr<Estimator> ScaleCostEstimator(const Module& module,
                                                     DeviceSpec device = TestDevice()) {
  OpCostTable table;
  table.set_device(device.name());
  for (const Program& p : module.programs())
    for (const Op& op : p.ops()) {
      if (op.type != "scale") continue;
      auto sig =
          SignatureOf(op, ops::Registry(), [&](const std::string& v) { return p.FindVar(v); });
      if (!sig.ok()) continue;
      OpCostEntry e;
      e.set_op_type("scale");
      e.set_key(sig->key);
      e.set_median(static_cast<double>(sig->inputs[0].shape[0]) * 1e-3);
      e.set_repeats(1);
      table.Add(e);
    }
  return *Estimator::Create(std::move(device), std::move(table));
}

// A SimGraph built by hand, every instruction in one job of its rank.
class GraphBuilder {
 public:
  explicit GraphBuilder(int world) {
    g_.world_size = world;
    g_.num_micro_batches = 1;
    g_.rank_order.resize(world);
    g_.job_names.assign(world, {"job"});
  }
  int Add(int rank, StreamType stream, InstrKind kind, double seconds, std::vector<int> deps = {}) {
    SimInstr in;
    in.rank = rank;
    in.stream = stream;
    in.kind = kind;
    in.seconds = seconds;
    in.deps = std::move(deps);
    in.name = "op" + std::to_string(g_.instrs.size());
    in.job = 0;
    g_.instrs.push_back(in);
    int id = static_cast<int>(g_.instrs.size()) - 1;
    g_.rank_order[rank].push_back(id);
    return id;
  }
  int Compute(int rank, double s, std::vector<int> deps = {}) {
    return Add(rank, StreamType::kCompute, InstrKind::kCompute, s, std::move(deps));
  }
  // A transfer from `from` to `to` taking `s`; returns {send, recv}.
  std::pair<int, int> Transfer(int from, int to, double s, std::vector<int> send_deps = {},
                               std::vector<int> recv_deps = {}) {
    int send = Add(from, StreamType::kPpSend, InstrKind::kSend, s, std::move(send_deps));
    int recv = Add(to, StreamType::kPpRecv, InstrKind::kRecv, s, std::move(recv_deps));
    g_.instrs[send].partner = recv;
    g_.instrs[recv].partner = send;
    return {send, recv};
  }
  // An all-reduce over `ranks` taking `seconds` (bytes for a CommModel to price); returns
  // its member instructions, one per rank.
  std::vector<int> Collective(const std::vector<int>& ranks, double seconds,
                              StreamType stream = StreamType::kCompute,
                              CommClass comm_class = CommClass::kNone, double bytes = 1e4) {
    std::vector<int> members;
    for (int rank : ranks) {
      int id = Add(rank, stream, InstrKind::kCollective, seconds);
      SimInstr& in = g_.instrs[id];
      in.collective = static_cast<int>(g_.collectives.size());
      in.group_size = static_cast<int>(ranks.size());
      in.bytes = bytes;
      in.comm_class = comm_class;
      members.push_back(id);
    }
    g_.collectives.push_back(SimCollective{members, seconds});
    return members;
  }
  SimGraph& graph() { return g_; }

 private:
  SimGraph g_;
};

inline StatusOr<SimResult> SimulateModule(const Module& module, SimGraph* graph = nullptr,
                                          SimOptions options = {}) {
  Simulator sim(ScaleCostEstimator(module), ops::Registry(), options);
  return sim.Run(module, graph);
}

}  // namespace pw::cost::testing
