// assign-streams, overlap-column-parallel-backward and insert-events: what each rewrites,
// and, on random programs with random streams, that insert-events' waits order every
// cross-stream dependency and that none of them is implied by the others.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "executor/plan_check.h"
#include "ir/event_ref.h"
#include "ir/rank_layout.h"
#include "ir/rank_sequence.h"
#include "ir/stream_order.h"
#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "tests/small_gpt.h"
#include "tests/small_llama.h"

namespace pw::testing {
namespace {

Status RunPipeline(Module& module, const std::string& pipeline) {
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline(pipeline));
  return pm.Run(module).status();
}

// Runs `pipeline` and returns counter `name` of `pass` (-1 when absent).
struct PipelineRun {
  Status status;
  std::vector<PassStatistics> statistics;
  int64_t Statistic(const std::string& pass, const std::string& name) const {
    for (const PassStatistics& s : statistics)
      if (s.pass == pass)
        for (const auto& [counter, value] : s.counters)
          if (counter == name) return value;
    return -1;
  }
};

PipelineRun RunCounting(Module& module, const std::string& pipeline, bool verify = true) {
  PassManager pm;
  pm.EnableVerifier(verify);
  PassContext context(ops::Registry());
  PipelineRun run;
  run.status = pm.AddPipeline(pipeline);
  if (run.status.ok()) run.status = pm.Run(module, context).status();
  run.statistics = context.statistics();
  return run;
}

Module PlannedGpt(const std::string& schedule, int vpp = 1, bool split = false,
                  models::ChunkPlacement placement = models::ChunkPlacement::kLoop) {
  models::GptConfig g = SmallGptConfig(2, 2, vpp, placement);
  auto built = models::BuildGpt(g);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  Module m = std::move(built).value();
  std::string pipeline =
      StrCat("append-backward,split-program", split ? "{split-backward=true}" : "",
             ",schedule{kind=", schedule, ",micro-batches=4},insert-p2p");
  Status s = RunPipeline(m, pipeline);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return m;
}

TEST(AssignStreamsTest, CollectivesGoToTheirGroupsStreamAndNothingElseMoves) {
  Module m = PlannedGpt("1f1b");
  Module before = m;
  ASSERT_TRUE(RunPipeline(m, "assign-streams").ok());
  int moved = 0;
  for (size_t p = 0; p < m.programs().size(); ++p)
    for (size_t o = 0; o < m.programs()[p].ops().size(); ++o) {
      const Op& op = m.programs()[p].ops()[o];
      const Op& old = before.programs()[p].ops()[o];
      EXPECT_EQ(op.type, old.type);  // the order is unchanged
      if (op.type == "c_allreduce_sum" || op.type == "c_allreduce_max") {
        EXPECT_EQ(op.stream, "mp_comm");
        ++moved;
      } else {
        EXPECT_EQ(op.stream, old.stream) << op.type;  // c_identity stays on compute
      }
      EXPECT_TRUE(op.wait_events.empty() && op.record_events.empty());
    }
  // Per layer 2 forward (row) and 2 backward (column) all-reduces; the vocabulary-parallel
  // embedding's all-reduce, the head's backward one and the cross-entropy's max and 2 sums.
  EXPECT_EQ(moved, 4 * 4 + 5);

  Module kept = PlannedGpt("1f1b");
  ASSERT_TRUE(RunPipeline(kept, "assign-streams{mp=compute}").ok());
  for (const Program& p : kept.programs())
    for (const Op& op : p.ops()) EXPECT_EQ(op.stream, "") << op.type;
}

// The all-reduce of a column-parallel linear's input gradient: right after the matmul that
// makes it, on mp_comm, with the weight-gradient matmul after it.
void ExpectColumnParallelShape(const Program& program, int* found) {
  const std::vector<Op>& ops = program.ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].type != "c_allreduce_sum") continue;
    ASSERT_GT(i, 0u);
    const Op& dx = ops[i - 1];
    EXPECT_EQ(dx.type, "matmul") << program.name() << " op " << i;
    EXPECT_EQ(dx.Output("Out"), ops[i].Input("X"));
    EXPECT_EQ(ops[i].stream, "mp_comm");
    if (program.info().kind == "backward") {
      ASSERT_LT(i + 1, ops.size());
      EXPECT_EQ(ops[i + 1].type, "matmul_weight_grad") << program.name() << " op " << i;
    }
    ++*found;
  }
}

TEST(OverlapColumnParallelBackwardTest, IssuesTheInputGradientAllReduceBeforeTheWeightGradient) {
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split backward" : "full backward");
    Module m = PlannedGpt(split ? "zb-h1" : "1f1b", 1, split);
    std::multiset<std::string> ops_before;
    for (const Program& p : m.programs())
      for (const Op& op : p.ops()) ops_before.insert(p.name() + ":" + op.type);
    PipelineRun run = RunCounting(m, "overlap-column-parallel-backward");
    ASSERT_TRUE(run.status.ok()) << run.status.ToString();
    // 2 column-parallel linears x 4 layers, and the LM head (column-parallel over the
    // vocabulary).
    EXPECT_EQ(run.Statistic("overlap-column-parallel-backward", "linears-rewritten"), 9);
    int found = 0;
    std::multiset<std::string> ops_after;
    for (const Program& p : m.programs()) {
      for (const Op& op : p.ops()) ops_after.insert(p.name() + ":" + op.type);
      const std::string& kind = p.info().kind;
      if (kind == "backward" || kind == "backward_input") ExpectColumnParallelShape(p, &found);
      if (kind == "forward")
        for (const Op& op : p.ops()) EXPECT_EQ(op.stream, "") << "forward ops stay put";
    }
    EXPECT_EQ(found, 9);
    EXPECT_EQ(ops_after, ops_before);  // ops only move
  }
}

// Linears that share their input (a Llama's q, k and v; gate and up) sum their input
// gradients before one all-reduce: the sum's matmuls come first, then the all-reduce on
// mp_comm, then every weight gradient they had between them; under amp the matmuls read
// the weights' bf16 copies, found all the same.
TEST(OverlapColumnParallelBackwardTest, OverlapsTheSumOfLinearsSharingAnInput) {
  for (const char* amp : {"", ",amp{dtype=bf16}"}) {
    SCOPED_TRACE(*amp ? "bf16" : "f32");
    auto built = models::BuildLlama(SmallLlamaConfig(2, 2));
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    Module m = std::move(built).value();
    ASSERT_TRUE(RunPipeline(m, StrCat("append-backward{optimizer=adam}", amp,
                                      ",split-program,schedule{kind=1f1b,micro-batches=4},"
                                      "insert-p2p,assign-streams"))
                    .ok());
    std::multiset<std::string> ops_before;
    for (const Program& p : m.programs())
      for (const Op& op : p.ops()) ops_before.insert(p.name() + ":" + op.type);
    PipelineRun run = RunCounting(m, "overlap-column-parallel-backward");
    ASSERT_TRUE(run.status.ok()) << run.status.ToString();
    // 4 layers of (q, k, v) and (gate, up), and the LM head.
    EXPECT_EQ(run.Statistic("overlap-column-parallel-backward", "linears-rewritten"), 21);
    EXPECT_EQ(run.Statistic("overlap-column-parallel-backward", "all-reduces-overlapped"), 9);
    int sums = 0;
    std::multiset<std::string> ops_after;
    for (const Program& p : m.programs()) {
      for (const Op& op : p.ops()) ops_after.insert(p.name() + ":" + op.type);
      if (p.info().kind != "backward") continue;
      const std::vector<Op>& ops = p.ops();
      for (size_t i = 1; i + 1 < ops.size(); ++i) {
        if (ops[i].type != "c_allreduce_sum" || ops[i - 1].type != "sum") continue;
        if (ops[i - 1].Output("Out") != ops[i].Input("X")) continue;
        ++sums;
        EXPECT_EQ(ops[i].stream, "mp_comm");
        const size_t n = ops[i - 1].inputs.front().vars.size();
        ASSERT_GE(i, n + 1);
        for (size_t k = i - 1 - n; k < i - 1; ++k) EXPECT_EQ(ops[k].type, "matmul") << k;
        // Then the weight gradients (each cast to f32 under amp).
        size_t weight_grads = 0;
        for (size_t k = i + 1; k < ops.size(); ++k) {
          if (ops[k].type != "matmul_weight_grad" && ops[k].type != "cast") break;
          weight_grads += ops[k].type == "matmul_weight_grad";
        }
        EXPECT_EQ(weight_grads, n) << p.name() << " op " << i;
      }
    }
    EXPECT_EQ(sums, 8);
    EXPECT_EQ(ops_after, ops_before);  // ops only move
  }
}

// The most recomputed activations (outputs of recompute's clones) alive at once in any
// backward program: each from its clone to its last reader.
int MostRecomputedAlive(const Module& m) {
  int most = 0;
  for (const Program& p : m.programs()) {
    std::map<std::string, size_t> last_read;
    for (size_t i = 0; i < p.ops().size(); ++i)
      p.ops()[i].ForEachInput([&](const std::string& v) { last_read[v] = i; });
    std::set<std::string> alive;
    for (size_t i = 0; i < p.ops().size(); ++i) {
      p.ops()[i].ForEachOutput([&](const std::string& v) {
        if (v.find("@RECOMPUTE") != std::string::npos) alive.insert(v);
      });
      most = std::max(most, static_cast<int>(alive.size()));
      for (auto it = alive.begin(); it != alive.end();)
        it = last_read[*it] <= i ? alive.erase(it) : std::next(it);
    }
  }
  return most;
}

// Recompute places each layer's clones right before their first reader: moving them ahead
// of an all-reduce would hold every layer's recomputed activations at once.
TEST(OverlapColumnParallelBackwardTest, KeepsRecomputedActivationsNextToTheirReaders) {
  for (const char* model : {"gpt", "llama"}) {
    SCOPED_TRACE(model);
    auto built = std::string(model) == "gpt" ? models::BuildGpt(SmallGptConfig(2, 2))
                                             : models::BuildLlama(SmallLlamaConfig(2, 2));
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    Module m = std::move(built).value();
    ASSERT_TRUE(RunPipeline(m,
                            "append-backward{optimizer=adam},recompute{policy=selective},split-"
                            "program,schedule{kind=1f1b,micro-batches=4},insert-p2p,assign-streams")
                    .ok());
    const int before = MostRecomputedAlive(m);
    ASSERT_GT(before, 0);
    PipelineRun run = RunCounting(m, "overlap-column-parallel-backward");
    ASSERT_TRUE(run.status.ok()) << run.status.ToString();
    EXPECT_GT(run.Statistic("overlap-column-parallel-backward", "linears-rewritten"), 0);
    EXPECT_EQ(MostRecomputedAlive(m), before);
  }
}

// Found by data flow: renaming every var changes nothing in what is rewritten.
TEST(OverlapColumnParallelBackwardTest, FindsThePatternWhateverTheVarsAreCalled) {
  Module m = PlannedGpt("1f1b");
  auto rename = [](const std::string& v) {
    return "v" + std::to_string(std::hash<std::string>{}(v));
  };
  Module renamed = m;
  for (Program& p : renamed.programs()) {
    std::vector<Var> vars = p.vars();
    p.RemoveVarsIf([](const Var&) { return true; });
    for (Var v : vars) {
      v.name = rename(v.name);
      p.AddVar(v);
    }
    for (Op& op : p.ops()) {
      for (Slot& s : op.inputs)
        for (std::string& v : s.vars) v = rename(v);
      for (Slot& s : op.outputs)
        for (std::string& v : s.vars) v = rename(v);
    }
  }
  ASSERT_TRUE(RunPipeline(m, "overlap-column-parallel-backward").ok());
  ASSERT_TRUE(RunCounting(renamed, "overlap-column-parallel-backward", false).status.ok());
  for (size_t p = 0; p < m.programs().size(); ++p)
    for (size_t o = 0; o < m.programs()[p].ops().size(); ++o)
      EXPECT_EQ(m.programs()[p].ops()[o].type, renamed.programs()[p].ops()[o].type);
}

TEST(OverlapColumnParallelBackwardTest, LeavesAnAllReduceOfAnythingButAWeightMatmulAlone) {
  Module m = PlannedGpt("1f1b");
  // Make one backward all-reduce reduce a gelu gradient instead of a matmul output.
  Program* backward = nullptr;
  for (Program& p : m.programs())
    if (p.info().kind == "backward") backward = &p;
  ASSERT_NE(backward, nullptr);
  std::vector<Op>& ops = backward->ops();
  size_t gelu_grad = 0, reduce = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].type == "gelu_grad" && !gelu_grad) gelu_grad = i;
    if (ops[i].type == "c_allreduce_sum" && gelu_grad && !reduce) reduce = i;
  }
  ASSERT_TRUE(gelu_grad && reduce);
  const std::string gelu_out = ops[gelu_grad].outputs.front().vars.front();
  ops[reduce].inputs.front().vars = {gelu_out};
  ASSERT_TRUE(RunCounting(m, "overlap-column-parallel-backward", false).status.ok());
  const Program* after = m.FindProgram(backward->name());
  int same = 0;
  for (const Op& op : after->ops())
    if (op.type == "c_allreduce_sum" && op.Input("X") == gelu_out) {
      EXPECT_EQ(op.stream, "") << "not a column-parallel input gradient: untouched";
      ++same;
    }
  EXPECT_EQ(same, 1);
}

// ---- insert-events ----

// The waits each op instance carries, with the item after which each event is recorded.
struct Instance {
  int item;
  std::vector<int> recorders;
};

// Every cross-stream dependency between pieces of the plan's work is implied by stream
// order and the plan's events.
void ExpectEveryDependencyOrdered(const Module& m) {
  for (int pp = 0; pp < m.mesh.pp; ++pp) {
    const int rank = RankLayout(m.mesh).Rank(RankCoord{0, pp, 0});
    auto seq = BuildRankSequence(m, rank, {ModuleInputs(m), ModuleLoss(m), false});
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    StreamOrder order(*seq);
    StreamOrderHooks hooks;
    hooks.cover = [&](const Dependency& dep) -> StatusOr<int> {
      if (seq->items[dep.producer].carrier < 0 || seq->items[dep.consumer].carrier < 0)
        return dep.producer;  // the executor's step-level work
      return FailedPrecondition(seq->Describe(dep.consumer), " is not ordered after ",
                                seq->Describe(dep.producer));
    };
    Status walk = order.Walk(hooks);
    EXPECT_TRUE(walk.ok()) << "rank " << rank << ": " << walk.ToString();
  }
}

// No inserted wait is implied by stream order and the other waits in every job it applies
// to: dropping any one of them leaves some instance less ordered.
void ExpectNoImpliedWait(const Module& m) {
  for (int pp = 0; pp < m.mesh.pp; ++pp) {
    const int rank = RankLayout(m.mesh).Rank(RankCoord{0, pp, 0});
    auto seq = BuildRankSequence(m, rank, {ModuleInputs(m), ModuleLoss(m), false});
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    StreamOrder order(*seq);
    std::vector<std::vector<int>> internal(seq->items.size());
    StreamOrderHooks hooks;
    hooks.cover = [&](const Dependency& dep) -> StatusOr<int> {
      internal[dep.consumer].push_back(dep.producer);
      return dep.producer;
    };
    ASSERT_TRUE(order.Walk(hooks).ok());
    // (op or job, wait text) -> whether some instance needs it
    std::map<std::pair<std::string, std::string>, bool> needed;
    for (int i = 0; i < static_cast<int>(seq->items.size()); ++i) {
      const WorkItem& item = seq->items[i];
      for (size_t k = 0; k < item.wait_events.size(); ++k) {
        StreamClock clock = order.before_on_stream(i);
        for (size_t other = 0; other < item.wait_events.size(); ++other)
          if (other != k)
            JoinClock(clock, order.after(seq->events[item.wait_events[other]].recorded_after));
        for (int p : internal[i]) JoinClock(clock, order.after(p));
        const SeqEvent& e = seq->events[item.wait_events[k]];
        std::string where = item.kind == WorkKind::kOp
                                ? StrCat(seq->program(item).name(), "/", item.op)
                                : StrCat("job ", item.job);
        bool& need = needed[{where, e.name}];
        need = need || !order.Covers(clock, e.recorded_after);
      }
    }
    for (const auto& [wait, need] : needed)
      EXPECT_TRUE(need) << "rank " << rank << ": " << wait.first << " waits on " << wait.second
                        << ", which the other waits always imply";
  }
}

void ExpectStrictLoweringAddsNoEvent(const Module& m) {
  LoweringOptions lowering{ModuleInputs(m), ModuleLoss(m), true};
  Status check = CheckPlanForAllRanks(m, lowering);
  EXPECT_TRUE(check.ok()) << check.ToString();
}

// One rank, programs `f` and `b` over 4 micro-batches in 1F1B order (F0 F1 B0 F2 B1 F3 B2
// B3); random ops on random streams over per-micro-batch vars, vars `b` reads from `f`,
// and a persistable var both update in place (dependencies across micro-batches).
Module RandomModule(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const char* streams[] = {"", "mp_comm", "dp_comm"};
  Module m;
  m.name = StrCat("random", seed);
  m.metadata.Set("inputs", std::vector<std::string>{"x"});
  Var state{"state", DataType::kFloat32, {4}, true};
  std::vector<std::string> f_vars = {"x"};
  for (const char* name : {"f", "b"}) {
    Program p(name);
    p.info().kind = name == std::string("f") ? "forward" : "backward";
    p.AddVar(state);
    std::vector<std::string> vars = f_vars;
    for (const std::string& v : vars) p.AddVar(Var{v, DataType::kFloat32, {4}});
    if (p.info().kind == "backward") p.info().inputs = f_vars;
    const int n = 6 + pick(10);
    for (int k = 0; k < n; ++k) {
      Op op;
      op.stream = streams[pick(3)];
      const std::string a = vars[pick(static_cast<int>(vars.size()))];
      const int kind = pick(10);
      if (kind == 0) {  // state += a
        op.type = "add";
        op.SetInput("X", {"state"}).SetInput("Y", {a}).SetOutput("Out", {"state"});
      } else if (kind == 1) {  // reads the state
        const std::string out = StrCat(name, "_", k);
        p.AddVar(Var{out, DataType::kFloat32, {4}});
        op.type = "add";
        op.SetInput("X", {a}).SetInput("Y", {"state"}).SetOutput("Out", {out});
        vars.push_back(out);
      } else if (kind == 2 && vars.size() > 1) {  // in place over an earlier value
        op.type = "scale";
        const std::string v = vars[1 + pick(static_cast<int>(vars.size()) - 1)];
        if (v == "x") continue;
        op.SetInput("X", {v}).SetOutput("Out", {v});
      } else {
        const std::string out = StrCat(name, "_", k);
        p.AddVar(Var{out, DataType::kFloat32, {4}});
        if (pick(2)) {
          op.type = "scale";
          op.SetInput("X", {a}).SetOutput("Out", {out});
        } else {
          op.type = "c_allreduce_sum";
          op.SetInput("X", {a}).SetOutput("Out", {out}).SetAttr("group", std::string("mp"));
        }
        vars.push_back(out);
      }
      op.role = OpRole::kForward;
      p.AddOp(std::move(op));
    }
    if (p.info().kind == "forward") {
      f_vars = vars;
      p.info().outputs = vars;
    }
    m.AddProgram(std::move(p));
  }
  m.plan.schedule = "1f1b";
  m.plan.num_micro_batches = 4;
  m.plan.num_stages = 1;
  m.plan.stage_to_rank = {0};
  RankPlan rank;
  for (auto [kind, mb] : std::vector<std::pair<char, int>>{
           {'f', 0}, {'f', 1}, {'b', 0}, {'f', 2}, {'b', 1}, {'f', 3}, {'b', 2}, {'b', 3}}) {
    Job job;
    job.kind = kind == 'f' ? JobKind::kForward : JobKind::kBackward;
    job.micro_batch = mb;
    job.program = std::string(1, kind);
    rank.jobs.push_back(job);
  }
  m.plan.ranks = {rank};
  return m;
}

TEST(InsertEventsTest, RandomProgramsOnRandomStreamsGetEveryOrderingAndNoImpliedWait) {
  int with_waits = 0, cross_micro_batch = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(StrCat("seed ", seed));
    Module m = RandomModule(seed);
    PipelineRun run = RunCounting(m, "insert-events", false);
    ASSERT_TRUE(run.status.ok()) << run.status.ToString();
    ExpectEveryDependencyOrdered(m);
    ExpectNoImpliedWait(m);
    ExpectStrictLoweringAddsNoEvent(m);
    if (run.Statistic("insert-events", "waits") > 0) ++with_waits;
    for (const Program& p : m.programs())
      for (const Op& op : p.ops())
        for (const std::string& w : op.wait_events)
          if (w.find('@') != std::string::npos) ++cross_micro_batch;
  }
  EXPECT_GT(with_waits, 150);        // the cases are not trivial
  EXPECT_GT(cross_micro_batch, 10);  // and some order across micro-batches (name@-k)
}

// Without the pass, strict lowering refuses the same plans: the property tests test
// something.
TEST(InsertEventsTest, StrictLoweringRefusesTheRandomPlansWithoutTheEvents) {
  int refused = 0;
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    Module m = RandomModule(seed);
    LoweringOptions lowering{ModuleInputs(m), ModuleLoss(m), true};
    if (!CheckPlanForAllRanks(m, lowering).ok()) ++refused;
  }
  EXPECT_GT(refused, 40);
}

TEST(InsertEventsTest, PlannedGptOrdersEveryScheduleKindAndRerunsToTheSameEvents) {
  struct Case {
    const char* kind;
    int vpp;
    bool split;
    models::ChunkPlacement placement;
  };
  for (const Case& c : {Case{"fthenb", 1, false, models::ChunkPlacement::kLoop},
                        Case{"1f1b", 1, false, models::ChunkPlacement::kLoop},
                        Case{"interleaved-1f1b", 2, false, models::ChunkPlacement::kLoop},
                        Case{"zb-h1", 1, true, models::ChunkPlacement::kLoop},
                        Case{"zb-v", 2, true, models::ChunkPlacement::kV},
                        Case{"dualpipe-v", 2, true, models::ChunkPlacement::kV}}) {
    SCOPED_TRACE(c.kind);
    Module m = PlannedGpt(c.kind, c.vpp, c.split, c.placement);
    PipelineRun run =
        RunCounting(m, "assign-streams,overlap-column-parallel-backward,insert-events");
    ASSERT_TRUE(run.status.ok()) << run.status.ToString();
    EXPECT_GT(run.Statistic("insert-events", "waits"), 0);
    EXPECT_LT(run.Statistic("insert-events", "waits-per-step"),
              run.Statistic("insert-events", "naive-waits-per-step"));
    ExpectEveryDependencyOrdered(m);
    ExpectNoImpliedWait(m);
    ExpectStrictLoweringAddsNoEvent(m);
    // Idempotent: the pass replaces its own events.
    Module again = m;
    ASSERT_TRUE(RunPipeline(again, "insert-events").ok());
    EXPECT_TRUE(again.plan == m.plan);
    for (size_t p = 0; p < m.programs().size(); ++p)
      EXPECT_TRUE(again.programs()[p] == m.programs()[p]) << m.programs()[p].name();
  }
}

TEST(InsertEventsTest, KeepsEventsItDidNotInsert) {
  Module m = PlannedGpt("1f1b");
  Program& forward = m.programs().front();
  ASSERT_GE(forward.ops().size(), 3u);
  forward.ops()[0].record_events.push_back("mine");
  forward.ops()[2].wait_events.push_back("mine");
  ASSERT_TRUE(RunPipeline(m, "assign-streams,insert-events").ok());
  EXPECT_EQ(m.programs().front().ops()[0].record_events.front(), "mine");
  EXPECT_EQ(m.programs().front().ops()[2].wait_events.front(), "mine");
  ExpectStrictLoweringAddsNoEvent(m);
}

TEST(InsertEventsTest, AWaitRemovedByHandIsRefusedNamingBothOps) {
  Module m = PlannedGpt("1f1b");
  ASSERT_TRUE(RunPipeline(m, "assign-streams,overlap-column-parallel-backward,insert-events").ok());
  // Drop the wait of the first reader of a backward all-reduce.
  bool dropped = false;
  for (Program& p : m.programs()) {
    if (p.info().kind != "backward" || dropped) continue;
    for (Op& op : p.ops())
      if (!dropped && op.type == "layer_norm_grad" && !op.wait_events.empty()) {
        op.wait_events.clear();
        dropped = true;
      }
  }
  ASSERT_TRUE(dropped);
  LoweringOptions lowering{ModuleInputs(m), ModuleLoss(m), true};
  Status check = CheckPlanForAllRanks(m, lowering);
  ASSERT_FALSE(check.ok());
  EXPECT_NE(check.message().find("(layer_norm_grad)"), std::string::npos) << check.message();
  EXPECT_NE(check.message().find("(c_allreduce_sum)"), std::string::npos) << check.message();
  EXPECT_NE(check.message().find("no event between them"), std::string::npos) << check.message();
}

TEST(InsertEventsTest, RefusesAModuleWithoutAPlan) {
  models::GptConfig g;
  g.layers = 1;
  g.hidden = 16;
  g.heads = 2;
  g.seq = 4;
  g.vocab = 16;
  auto built = models::BuildGpt(g);
  ASSERT_TRUE(built.ok());
  Module m = std::move(built).value();
  Status ran = RunPipeline(m, "append-backward,insert-events");
  ASSERT_FALSE(ran.ok());
  EXPECT_NE(ran.message().find("run split-program"), std::string::npos);
}

}  // namespace
}  // namespace pw::testing
