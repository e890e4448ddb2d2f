// The interpreter and the CPU backend against hand-written programs and plans: stream
// order, events within and across jobs and micro-batches, added dependencies, freeing
// after last use, gradient accumulation and the optimizer, errors.

#include "executor/interpreter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ir/event_ref.h"
#include "ir/stream_type.h"
#include "test_plans.h"

namespace pw::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Interpreter::FeedFn FeedValue(std::function<float(int mb)> value, Shape shape = {1}) {
  return [value, shape](const std::string&, int mb) -> StatusOr<Tensor> {
    Tensor t(DataType::kFloat32, shape);
    t.Fill(value(mb));
    return t;
  };
}

InterpreterOptions Options(std::vector<std::string> feeds, std::string loss, bool strict = false) {
  InterpreterOptions o;
  o.lowering.feeds = std::move(feeds);
  o.lowering.loss = std::move(loss);
  o.lowering.strict_events = strict;
  return o;
}

// One program run per micro-batch, then nothing else.
Module OneProgramModule(Program program, int micro_batches) {
  Module m;
  m.name = "test";
  std::string name = program.name();
  m.AddProgram(std::move(program));
  m.plan.num_micro_batches = micro_batches;
  m.plan.num_stages = 1;
  m.plan.stage_to_rank = {0};
  RankPlan r;
  for (int mb = 0; mb < micro_batches; ++mb)
    r.jobs.push_back(MakeJob(JobKind::kForward, 0, mb, name));
  m.plan.ranks.push_back(r);
  return m;
}

TEST(StreamTypeTest, ParsesNamesAndDefaultsToCompute) {
  EXPECT_EQ(*ParseStreamType(""), StreamType::kCompute);
  for (StreamType t : kAllStreamTypes) EXPECT_EQ(*ParseStreamType(StreamTypeName(t)), t);
  StatusOr<StreamType> bad = ParseStreamType("gpu0");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown stream type 'gpu0'"));
}

TEST(EventRefTest, ParsesRelativeAndAbsoluteMicroBatches) {
  EventRef same = *ParseEventRef("fwd_done");
  EXPECT_EQ(same.name, "fwd_done");
  EXPECT_EQ(same.MicroBatch(5), 5);
  EXPECT_EQ(ParseEventRef("e@-2")->MicroBatch(5), 3);
  EXPECT_EQ(ParseEventRef("e@+1")->MicroBatch(5), 6);
  EXPECT_EQ(ParseEventRef("e@3")->MicroBatch(5), 3);
  EXPECT_FALSE(ParseEventRef("e@x").ok());
  EXPECT_FALSE(ParseEventRef("@1").ok());
}

TEST(InterpreterTest, RunsAChainOnOneStream) {
  Program p = MakeProgram("p", "forward", 0, {F32("x"), F32("a"), F32("b"), F32("loss")},
                          {{"t_double", {{"X", {"x"}}}, {{"Out", {"a"}}}},
                           {"t_double", {{"X", {"a"}}}, {{"Out", {"b"}}}},
                           {"t_add", {{"X", {"a"}}, {"Y", {"b"}}}, {{"Out", {"loss"}}}}});
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(OneProgramModule(p, 3), 0, backend, Options({"x"}, "loss"));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  for (int step = 0; step < 2; ++step) {
    auto stats = (*interp)->RunStep(FeedValue([](int mb) { return mb + 1.0f; }));
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_THAT(stats->losses, ElementsAre(6.0, 12.0, 18.0));  // 2x + 4x
  }
  EXPECT_EQ((*interp)->memory().current(), 0);  // every intermediate was freed
}

// compute produces y slowly; mp_comm copies it. With the plan's event the copy waits;
// the lowering adds nothing.
Module TwoStreamModule(bool with_event, int micro_batches = 2) {
  OpSpec produce{"t_double", {{"X", {"x"}}}, {{"Out", {"y"}}}};
  produce.sleep_us = 2000;
  OpSpec consume{"t_copy", {{"X", {"y"}}}, {{"Out", {"loss"}}}, "mp_comm"};
  if (with_event) {
    produce.records = {"y_ready"};
    consume.waits = {"y_ready"};
  }
  return OneProgramModule(
      MakeProgram("p", "forward", 0, {F32("x"), F32("y"), F32("loss")}, {produce, consume}),
      micro_batches);
}

TEST(InterpreterTest, EventOrdersTwoStreams) {
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(TwoStreamModule(true), 0, backend, Options({"x"}, "loss"));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  EXPECT_EQ((*interp)->lowered().plan_events, 2);  // y_ready of micro-batches 0 and 1
  EXPECT_EQ((*interp)->lowered().auto_events, 0);
  auto stats = (*interp)->RunStep(FeedValue([](int mb) { return mb + 3.0f; }));
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_THAT(stats->losses, ElementsAre(6.0, 8.0));
}

TEST(InterpreterTest, AddsAnEventThePlanMisses) {
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(TwoStreamModule(false), 0, backend, Options({"x"}, "loss"));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  EXPECT_EQ((*interp)->lowered().auto_events, 2);
  auto stats = (*interp)->RunStep(FeedValue([](int mb) { return mb + 3.0f; }));
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_THAT(stats->losses, ElementsAre(6.0, 8.0));
}

TEST(InterpreterTest, StrictEventsRefusesAMissingEvent) {
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp =
      Interpreter::Create(TwoStreamModule(false), 0, backend, Options({"x"}, "loss", true));
  ASSERT_FALSE(interp.ok());
  EXPECT_THAT(interp.status().message(), HasSubstr("uses 'y'"));
  EXPECT_THAT(interp.status().message(), HasSubstr("with no event between them"));
}

// An event recorded by micro-batch k's job and waited on by micro-batch k+1's job on
// another stream ("done@-1"): micro-batch 0 has nothing to wait for.
TEST(InterpreterTest, EventCrossesMicroBatches) {
  OpSpec work{"t_double", {{"X", {"x"}}}, {{"Out", {"y"}}}, "dp_comm", {"done@-1"}, {"done"}};
  work.sleep_us = 500;
  OpSpec out{"t_copy", {{"X", {"y"}}}, {{"Out", {"loss"}}}, "dp_comm"};
  Module m = OneProgramModule(
      MakeProgram("p", "forward", 0, {F32("x"), F32("y"), F32("loss")}, {work, out}), 4);
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(m, 0, backend, Options({"x"}, "loss", true));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  auto stats = (*interp)->RunStep(FeedValue([](int mb) { return mb; }));
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_THAT(stats->losses, ElementsAre(0.0, 2.0, 4.0, 6.0));
}

TEST(InterpreterTest, RefusesAWaitOnAnEventNoEarlierJobRecords) {
  OpSpec work{"t_double", {{"X", {"x"}}}, {{"Out", {"loss"}}}, "", {"later@+1"}, {"later"}};
  Module m = OneProgramModule(MakeProgram("p", "forward", 0, {F32("x"), F32("loss")}, {work}), 2);
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(m, 0, backend, Options({"x"}, "loss"));
  ASSERT_FALSE(interp.ok());
  EXPECT_THAT(interp.status().message(),
              HasSubstr("waits on event 'later' of micro-batch 1, which no earlier job"));
}

TEST(InterpreterTest, RefusesAVarNothingProduces) {
  Module m = OneProgramModule(
      MakeProgram("p", "forward", 0, {F32("x"), F32("ghost"), F32("loss")},
                  {{"t_add", {{"X", {"x"}}, {"Y", {"ghost"}}}, {{"Out", {"loss"}}}}}),
      1);
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(m, 0, backend, Options({"x"}, "loss"));
  ASSERT_FALSE(interp.ok());
  EXPECT_THAT(interp.status().message(), HasSubstr("reads 'ghost' of micro-batch 0 before"));
}

// x -> a -> b -> c -> loss over 1 MiB tensors: at most two of them are alive at once.
TEST(InterpreterTest, FreesIntermediatesAfterTheirLastUse) {
  const Shape big = {256 * 1024};
  const int64_t mib = 1 << 20;
  Program p = MakeProgram("p", "forward", 0,
                          {F32("x", big), F32("a", big), F32("b", big), F32("c", big), F32("loss")},
                          {{"t_double", {{"X", {"x"}}}, {{"Out", {"a"}}}},
                           {"t_double", {{"X", {"a"}}}, {{"Out", {"b"}}}},
                           {"t_double", {{"X", {"b"}}}, {{"Out", {"c"}}}},
                           {"t_sum", {{"X", {"c"}}}, {{"Out", {"loss"}}}}});
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(OneProgramModule(p, 1), 0, backend, Options({"x"}, "loss"));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  auto stats = (*interp)->RunStep(FeedValue([](int) { return 1.0f; }, big));
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->losses[0], 8.0 * big[0]);
  EXPECT_GE(stats->peak_bytes, 2 * mib);
  EXPECT_LT(stats->peak_bytes, 2 * mib + 64);
  EXPECT_EQ((*interp)->memory().current(), 0);
}

// Forward jobs of three micro-batches run before their backward jobs: each forward's h
// stays alive until its backward (a later job) has read it.
TEST(InterpreterTest, KeepsValuesALaterJobNeeds) {
  const Shape big = {1024};
  Module m;
  m.AddProgram(MakeProgram("fwd", "forward", 0, {F32("x", big), F32("h", big)},
                           {{"t_double", {{"X", {"x"}}}, {{"Out", {"h"}}}}}));
  m.AddProgram(MakeProgram("bwd", "backward", 0, {F32("h", big), F32("loss")},
                           {{"t_sum", {{"X", {"h"}}}, {{"Out", {"loss"}}}}}));
  m.plan.num_micro_batches = 3;
  m.plan.stage_to_rank = {0};
  RankPlan r;
  for (int mb = 0; mb < 3; ++mb) r.jobs.push_back(MakeJob(JobKind::kForward, 0, mb, "fwd"));
  for (int mb = 0; mb < 3; ++mb) r.jobs.push_back(MakeJob(JobKind::kBackward, 0, mb, "bwd"));
  m.plan.ranks.push_back(r);
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(m, 0, backend, Options({"x"}, "loss"));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  auto stats = (*interp)->RunStep(FeedValue([](int mb) { return mb + 1.0f; }, big));
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_THAT(stats->losses, ElementsAre(2048.0, 4096.0, 6144.0));
  EXPECT_GE(stats->peak_bytes, 3 * 1024 * 4);  // three h alive after the forwards
  EXPECT_EQ((*interp)->memory().current(), 0);
}

// A full backward on a split module names no program: it runs its stage's I then its W.
// The W reads what the forward (h) and the I (a) left, so both stay alive into it.
TEST(InterpreterTest, SplitBackwardRunsIThenWAndKeepsWhatWReads) {
  const Shape big = {1024};
  Module m;
  m.AddProgram(MakeProgram("fwd", "forward", 0, {F32("x", big), F32("h", big)},
                           {{"t_double", {{"X", {"x"}}}, {{"Out", {"h"}}}}}));
  m.AddProgram(MakeProgram("bwd_i", "backward_input", 0, {F32("h", big), F32("a", big)},
                           {{"t_double", {{"X", {"h"}}}, {{"Out", {"a"}}}}}));
  m.AddProgram(MakeProgram("bwd_w", "backward_weight", 0,
                           {F32("h", big), F32("a", big), F32("s", big), F32("loss")},
                           {{"t_add", {{"X", {"a"}}, {"Y", {"h"}}}, {{"Out", {"s"}}}},
                            {"t_sum", {{"X", {"s"}}}, {{"Out", {"loss"}}}}}));
  m.plan.num_micro_batches = 2;
  m.plan.stage_to_rank = {0};
  RankPlan r;
  for (int mb = 0; mb < 2; ++mb) r.jobs.push_back(MakeJob(JobKind::kForward, 0, mb, "fwd"));
  for (int mb = 0; mb < 2; ++mb) {
    Job b = MakeJob(JobKind::kBackward, 0, mb, "");
    b.sub_jobs = {MakeJob(JobKind::kBackwardInput, 0, mb, "bwd_i"),
                  MakeJob(JobKind::kBackwardWeight, 0, mb, "bwd_w")};
    r.jobs.push_back(b);
  }
  m.plan.ranks.push_back(r);
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(m, 0, backend, Options({"x"}, "loss"));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  for (int step = 0; step < 2; ++step) {
    auto stats = (*interp)->RunStep(FeedValue([](int mb) { return mb + 1.0f; }, big));
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    // h = 2x, a = 2h, loss = sum(a + h) = 6x per element.
    EXPECT_THAT(stats->losses, ElementsAre(6144.0, 12288.0));
    EXPECT_GE(stats->peak_bytes, 2 * 1024 * 4);  // both h alive after the forwards
    EXPECT_EQ((*interp)->memory().current(), 0);
  }
}

// loss = x·w + w, g = x·w per micro-batch; the optimizer sees the mean of g:
// w' = w - 0.5 · mean(g).
Module TinyTrainingModule(int micro_batches) {
  Var w = F32("w", {1}, true);
  w.is_parameter = true;
  w.init.kind = Initializer::Kind::kConstant;
  w.init.value = 2.0;
  std::vector<Var> vars = {F32("x"), w, F32("g"), F32("loss")};
  Module m;
  m.AddProgram(MakeProgram("train", "forward", 0, vars,
                           {{"t_mul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"g"}}}},
                            {"t_add", {{"X", {"g"}}, {"Y", {"w"}}}, {{"Out", {"loss"}}}}}));
  OpSpec sgd{"t_sgd", {{"Param", {"w"}}, {"Grad", {"g"}}}, {{"ParamOut", {"w"}}}};
  sgd.role = OpRole::kOptimize;
  m.AddProgram(MakeProgram("opt", "optimizer", 0, vars, {sgd}));
  m.plan.num_micro_batches = micro_batches;
  m.plan.stage_to_rank = {0};
  RankPlan r;
  for (int mb = 0; mb < micro_batches; ++mb)
    r.jobs.push_back(MakeJob(JobKind::kForward, 0, mb, "train"));
  r.jobs.push_back(MakeJob(JobKind::kOptimizer, 0, 0, "opt"));
  m.plan.ranks.push_back(r);
  return m;
}

TEST(InterpreterTest, AccumulatesGradientsAndRunsTheOptimizer) {
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(TinyTrainingModule(4), 0, backend, Options({"x"}, "loss"));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  ASSERT_TRUE((*interp)->InitializeParameters().ok());
  auto feed = FeedValue([](int mb) { return mb + 1.0f; });
  float w = 2.0f;
  for (int step = 0; step < 3; ++step) {
    auto stats = (*interp)->RunStep(feed);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    for (int mb = 0; mb < 4; ++mb) EXPECT_FLOAT_EQ(stats->losses[mb], (mb + 1) * w + w);
    float sum = 0;
    for (int mb = 0; mb < 4; ++mb) sum += (mb + 1) * w;
    w = w - 0.5f * (sum * (1.0f / 4));
    EXPECT_FLOAT_EQ((*interp)->FindPersistent("w")->f32()[0], w);
  }
  EXPECT_EQ((*interp)->memory().current(), 4);  // only w
}

TEST(InterpreterTest, AKernelErrorFailsTheStepNamingTheOp) {
  Module m =
      OneProgramModule(MakeProgram("p", "forward", 0, {F32("x"), F32("y"), F32("loss")},
                                   {{"t_fail", {{"X", {"x"}}}, {{"Out", {"y"}}}},
                                    {"t_copy", {{"X", {"y"}}}, {{"Out", {"loss"}}}, "mp_comm"}}),
                       2);
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(m, 0, backend, Options({"x"}, "loss"));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  for (int step = 0; step < 2; ++step) {  // the streams recover for the next step
    auto stats = (*interp)->RunStep(FeedValue([](int) { return 1.0f; }));
    ASSERT_FALSE(stats.ok());
    EXPECT_THAT(stats.status().message(), HasSubstr("op 0 (t_fail) of program 'p'"));
    EXPECT_THAT(stats.status().message(), HasSubstr("t_fail always fails"));
  }
}

TEST(InterpreterTest, AFeedOfTheWrongShapeIsAnError) {
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(TinyTrainingModule(2), 0, backend, Options({"x"}, "loss"));
  ASSERT_TRUE(interp.ok());
  ASSERT_TRUE((*interp)->InitializeParameters().ok());
  auto stats = (*interp)->RunStep(FeedValue([](int) { return 1.0f; }, {3}));
  ASSERT_FALSE(stats.ok());
  EXPECT_THAT(stats.status().message(), HasSubstr("feed 'x' must be f32 [1], got f32 [3]"));
}

// Many micro-batches, three streams, events every hop, repeated steps: a workout for the
// thread sanitizer.
TEST(InterpreterTest, ManyStreamsManySteps) {
  std::vector<OpSpec> ops = {
      {"t_double", {{"X", {"x"}}}, {{"Out", {"a"}}}, "compute", {"c@-1"}, {"a"}},
      {"t_double", {{"X", {"a"}}}, {{"Out", {"b"}}}, "mp_comm", {"a"}, {"b"}},
      {"t_add", {{"X", {"a"}}, {"Y", {"b"}}}, {{"Out", {"c"}}}, "dp_comm", {"b"}, {"c"}},
      {"t_copy", {{"X", {"c"}}}, {{"Out", {"loss"}}}, "compute", {"c"}, {}}};
  Module m = OneProgramModule(
      MakeProgram(
          "p", "forward", 0,
          {F32("x", {64}), F32("a", {64}), F32("b", {64}), F32("c", {64}), F32("loss", {1})}, ops),
      32);
  m.programs()[0].ops()[3].type = "t_sum";
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(m, 0, backend, Options({"x"}, "loss", true));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  for (int step = 0; step < 20; ++step) {
    auto stats = (*interp)->RunStep(FeedValue([](int mb) { return mb; }, {64}));
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    for (int mb = 0; mb < 32; ++mb) ASSERT_EQ(stats->losses[mb], 64.0 * 6 * mb);
  }
  EXPECT_EQ((*interp)->memory().current(), 0);
}

}  // namespace
}  // namespace pw::testing
