#include "ir/verifier.h"

#include <gtest/gtest.h>

#include "ir/builder.h"
#include "tests/ir/test_registry.h"

namespace pw {
namespace {

using testing::TestRegistry;

Var F32(const std::string& name, Shape shape, bool persistable = false) {
  Var v{name, DataType::kFloat32, std::move(shape)};
  v.persistable = persistable;
  return v;
}

Op MakeOp(const std::string& type, std::vector<Slot> in, std::vector<Slot> out) {
  Op op;
  op.type = type;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  return op;
}

// x (fed), w (parameter) -> a = ew(x, w) -> b = unary(a) -> update(w, b)
Program ValidProgram() {
  Program p("main");
  p.AddVar(F32("x", {4}));
  p.AddVar(F32("w", {4}, true));
  p.AddVar(F32("a", {4}));
  p.AddVar(F32("b", {4}));
  p.AddOp(MakeOp("ew", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"a"}}}));
  p.AddOp(MakeOp("unary", {{"X", {"a"}}}, {{"Out", {"b"}}}));
  p.AddOp(MakeOp("update", {{"P", {"w"}}, {"G", {"b"}}}, {{"POut", {"w"}}}));
  return p;
}

std::string Error(const Program& p) {
  Status s = VerifyProgram(p, TestRegistry());
  return s.ok() ? "ok" : s.message();
}

TEST(VerifierTest, AcceptsAValidProgramWithAnInPlaceUpdate) {
  EXPECT_EQ(Error(ValidProgram()), "ok");
}

TEST(VerifierTest, UnknownOpType) {
  Program p = ValidProgram();
  p.ops()[1].type = "frobnicate";
  EXPECT_EQ(Error(p), "program 'main': op 1 (frobnicate): unknown op type 'frobnicate'");
}

TEST(VerifierTest, SlotNotInDefinition) {
  Program p = ValidProgram();
  p.ops()[1].inputs[0].name = "Z";
  EXPECT_EQ(Error(p),
            "program 'main': op 1 (unary): input slot 'Z' is not defined for unary (inputs: X)");
  p = ValidProgram();
  p.ops()[0].outputs[0].name = "Result";
  EXPECT_NE(Error(p).find("output slot 'Result' is not defined for ew"), std::string::npos);
}

TEST(VerifierTest, AttributeChecks) {
  Program p = ValidProgram();
  p.ops()[0].SetAttr("beta", 1.0);
  EXPECT_EQ(Error(p), "program 'main': op 0 (ew): attribute 'beta' is not defined for ew");
  p = ValidProgram();
  p.ops()[0].SetAttr("alpha", std::string("big"));
  EXPECT_EQ(Error(p), "program 'main': op 0 (ew): attribute 'alpha' must be float, got string");
  p = ValidProgram();
  p.ops()[0].SetAttr("alpha", int64_t{2});  // an int is accepted where a float is expected
  EXPECT_EQ(Error(p), "ok");
  p = ValidProgram();
  p.AddVar(F32("g", {4}));
  p.ops().insert(p.ops().begin(), MakeOp("gen", {}, {{"Out", {"g"}}}));
  EXPECT_EQ(Error(p), "program 'main': op 0 (gen): required attribute 'shape' is missing");
}

TEST(VerifierTest, MissingRequiredSlot) {
  Program p = ValidProgram();
  p.ops()[0].inputs.pop_back();
  EXPECT_EQ(Error(p), "program 'main': op 0 (ew): required input slot 'Y' is missing");
}

TEST(VerifierTest, UndeclaredVar) {
  Program p = ValidProgram();
  p.ops()[1].inputs[0].vars[0] = "ghost";
  EXPECT_EQ(Error(p), "program 'main': op 1 (unary): input 'ghost' (slot X) is not declared");
  p = ValidProgram();
  p.ops()[1].outputs[0].vars[0] = "ghost";
  EXPECT_NE(Error(p).find("output 'ghost' (slot Out) is not declared"), std::string::npos);
}

TEST(VerifierTest, UseBeforeDefinition) {
  Program p = ValidProgram();
  std::swap(p.ops()[0], p.ops()[1]);
  EXPECT_EQ(Error(p),
            "program 'main': op 0 (unary): input 'a' (slot X) is used before it is defined (by "
            "op 1)");
}

TEST(VerifierTest, ShapeAndDtypeDisagreeWithInference) {
  Program p = ValidProgram();
  p.FindVar("b")->shape = {2, 2};
  EXPECT_EQ(Error(p),
            "program 'main': op 1 (unary): output 'b' (slot Out) is declared f32[2, 2] but unary "
            "infers f32[4]");
  p = ValidProgram();
  p.FindVar("b")->dtype = DataType::kInt64;
  EXPECT_NE(Error(p).find("declared i64[4] but unary infers f32[4]"), std::string::npos);
  p = ValidProgram();
  p.FindVar("x")->shape = {5};
  EXPECT_EQ(Error(p), "program 'main': op 0 (ew): X [5] and Y [4] differ");
}

TEST(VerifierTest, DependencyCycle) {
  Program p("main");
  p.AddVar(F32("a", {4}));
  p.AddVar(F32("b", {4}));
  p.AddOp(MakeOp("unary", {{"X", {"b"}}}, {{"Out", {"a"}}}));
  p.AddOp(MakeOp("unary", {{"X", {"a"}}}, {{"Out", {"b"}}}));
  EXPECT_EQ(Error(p),
            "program 'main': dependency cycle: op 0 (unary) -> op 1 (unary) -> op 0 (unary)");
}

TEST(VerifierTest, ModuleChecksFedInputsMeshAndPlan) {
  Module m;
  m.AddProgram(ValidProgram());
  m.metadata.Set("inputs", std::vector<std::string>{"x"});
  EXPECT_TRUE(VerifyModule(m, TestRegistry()).ok());
  m.metadata.Set("inputs", std::vector<std::string>{});
  Status s = VerifyModule(m, TestRegistry());
  EXPECT_NE(s.message().find("input 'x' (slot X) is never defined"), std::string::npos)
      << s.message();
  m.metadata.Set("inputs", std::vector<std::string>{"x"});
  m.plan.num_micro_batches = 1;
  m.plan.num_stages = 1;
  m.plan.ranks = {RankPlan{0, {Job{JobKind::kForward, 0, 0, "forward_s0"}}}};
  EXPECT_EQ(VerifyModule(m, TestRegistry()).message(),
            "plan of rank 0, job 0: program 'forward_s0' does not exist");
  // The plan agrees with the mesh: a micro-batch count, stages, one job list per rank.
  m.plan.ranks = {RankPlan{0, {Job{JobKind::kForward, 0, 0, m.programs().front().name()}}}};
  EXPECT_TRUE(VerifyModule(m, TestRegistry()).ok()) << VerifyModule(m, TestRegistry()).message();
  m.plan.num_micro_batches = 0;
  EXPECT_EQ(VerifyModule(m, TestRegistry()).message(), "plan runs 0 micro-batches (1 to 65536)");
  m.plan.num_micro_batches = 1;
  m.mesh.pp = 2;
  EXPECT_EQ(VerifyModule(m, TestRegistry()).message(),
            "plan has job lists for 1 pipeline ranks but the mesh has pp=2");
  m.mesh.pp = 1;
  m.plan.ranks[0].jobs[0].stage = 1;
  EXPECT_EQ(VerifyModule(m, TestRegistry()).message(),
            "plan of rank 0, job 0: 1F0: stage 1 is outside [0, 1)");
  m.plan.ranks.clear();
  m.mesh.pp = 0;
  EXPECT_NE(VerifyModule(m, TestRegistry()).message().find("mesh degrees"), std::string::npos);
}

// A full backward on a split module runs its I and W as sub-jobs; the loader checks their
// programs and their shape.
TEST(VerifierTest, PlanChecksASplitBackwardsSubJobs) {
  Module m;
  m.AddProgram(ValidProgram());
  m.metadata.Set("inputs", std::vector<std::string>{"x"});
  const std::string main = m.programs().front().name();
  Job b{JobKind::kBackward, 0, 1, ""};
  b.sub_jobs = {Job{JobKind::kBackwardInput, 0, 1, main},
                Job{JobKind::kBackwardWeight, 0, 1, main}};
  m.plan.num_micro_batches = 3;
  m.plan.num_stages = 1;
  m.plan.ranks = {RankPlan{0, {b}}};
  EXPECT_TRUE(VerifyModule(m, TestRegistry()).ok()) << VerifyModule(m, TestRegistry()).message();

  m.plan.ranks[0].jobs[0].sub_jobs[1].program = "stage0_backward_weight";
  EXPECT_EQ(VerifyModule(m, TestRegistry()).message(),
            "plan of rank 0, job 0: sub-job 1: program 'stage0_backward_weight' does not exist");
  m.plan.ranks[0].jobs[0] = b;
  std::swap(m.plan.ranks[0].jobs[0].sub_jobs[0], m.plan.ranks[0].jobs[0].sub_jobs[1]);
  EXPECT_EQ(VerifyModule(m, TestRegistry()).message(),
            "plan of rank 0, job 0: job 0B1 has sub-jobs other than an I and then a W");
  m.plan.ranks[0].jobs[0] = b;
  m.plan.ranks[0].jobs[0].sub_jobs[1].micro_batch = 2;
  EXPECT_EQ(VerifyModule(m, TestRegistry()).message(),
            "plan of rank 0, job 0: job 0B1: sub-job 0W2 is not a plain job of its stage and "
            "micro-batch");
  m.plan.ranks[0].jobs[0] = b;
  m.plan.ranks[0].jobs[0].program = main;
  EXPECT_NE(VerifyModule(m, TestRegistry()).message().find("has sub-jobs and names program"),
            std::string::npos);
  Job f{JobKind::kForward, 0, 1, ""};
  f.sub_jobs = b.sub_jobs;
  m.plan.ranks[0].jobs[0] = f;
  EXPECT_EQ(VerifyModule(m, TestRegistry()).message(),
            "plan of rank 0, job 0: job 0F1 has sub-jobs; only fused jobs and a split B have them");
}

TEST(BuilderTest, DeclaresInferredOutputsAndDefersErrors) {
  Program p("main");
  ProgramBuilder b(p, TestRegistry());
  b.SetPlacement(2, 1);
  std::string x = b.Input("x", DataType::kFloat32, {3});
  std::string y = b.Op("unary").In("X", x).Out("Out", "y").Build();
  EXPECT_EQ(y, "y");
  ASSERT_TRUE(b.status().ok());
  EXPECT_EQ(p.FindVar("y")->shape, (Shape{3}));
  EXPECT_EQ(p.ops()[0].stage, 2);
  EXPECT_EQ(p.ops()[0].chunk, 1);
  EXPECT_EQ(b.Unique("y"), "y_1");
  b.Op("nope").In("X", x).Out("Out", "z").Build();
  b.Op("unary").In("X", x).Out("Out", "w").Build();
  EXPECT_EQ(b.status().message(), "unknown op type 'nope'");
  EXPECT_EQ(p.ops().size(), 1u);  // nothing is appended after the first error
}

// Only send/recv jobs record events of their own (an op of a program carries its own); a job
// that runs a program may wait on some; a fused job none (its parts carry them); references
// must parse.
TEST(VerifierTest, PlanRefusesEventsOnComputeJobsAndBadEventReferences) {
  Module m;
  m.AddProgram(ValidProgram());
  m.metadata.Set("inputs", std::vector<std::string>{"x"});
  const std::string main = m.programs().front().name();
  Job forward{JobKind::kForward, 0, 0, main};
  forward.record_events = {"e"};
  m.mesh.pp = 2;
  m.plan.num_micro_batches = 1;
  m.plan.num_stages = 2;
  m.plan.ranks = {RankPlan{0, {forward}}, RankPlan{1, {}}};
  EXPECT_EQ(VerifyModule(m, TestRegistry()).message(),
            "plan of rank 0, job 0: 0F0: only send/recv jobs record events (put them on the "
            "program's ops)");
  m.plan.ranks[0].jobs[0].record_events.clear();
  m.plan.ranks[0].jobs[0].wait_events = {"e@0"};
  EXPECT_TRUE(VerifyModule(m, TestRegistry()).ok()) << VerifyModule(m, TestRegistry()).message();
  Job fused{JobKind::kOverlapFB, 0, 0, ""};
  fused.sub_jobs = {forward, forward};
  fused.wait_events = {"e@0"};
  m.plan.ranks[0].jobs = {fused};
  Status on_fused = VerifyModule(m, TestRegistry());
  EXPECT_NE(on_fused.message().find("runs no program of its own waits on no events"),
            std::string::npos)
      << on_fused.message();
  Job recv{JobKind::kRecvF, 1, 0, ""};
  recv.peer = 0;
  recv.record_events = {"e@x"};
  m.plan.ranks = {RankPlan{0, {}}, RankPlan{1, {recv}}};
  Status bad = VerifyModule(m, TestRegistry());
  EXPECT_NE(bad.message().find("event reference 'e@x'"), std::string::npos) << bad.message();
  m.plan.ranks[1].jobs[0].record_events = {"e@-1"};
  EXPECT_TRUE(VerifyModule(m, TestRegistry()).ok()) << VerifyModule(m, TestRegistry()).message();
}

}  // namespace
}  // namespace pw
