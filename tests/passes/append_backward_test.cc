// append-backward: the ops it emits, gradient accumulation, zero gradients, optimizer
// ops and state, errors, and gradients that match finite differences.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ir/builder.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "tests/ops/op_runner.h"
#include "tests/passes/test_modules.h"

namespace pw::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

StatusOr<bool> RunPipeline(Module& module, std::string_view pipeline,
                           const OpRegistry& registry = ops::Registry(),
                           PassContext* context = nullptr) {
  PassManager manager(registry);
  PW_RETURN_IF_ERROR(manager.AddPipeline(pipeline));
  if (context) return manager.Run(module, *context);
  return manager.Run(module);
}

std::vector<std::string> Types(const Program& program, size_t from = 0) {
  std::vector<std::string> types;
  for (size_t i = from; i < program.ops().size(); ++i) types.push_back(program.ops()[i].type);
  return types;
}

const Op* FindOp(const Program& program, std::string_view type, size_t nth = 0) {
  for (const Op& op : program.ops())
    if (op.type == type && nth-- == 0) return &op;
  return nullptr;
}

size_t IndexOf(const Program& program, const Op* op) { return op - program.ops().data(); }

TEST(AppendBackward, TinyModuleWithSgd) {
  Module module = TinyModule();
  auto changed = RunPipeline(module, "append-backward");
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  const Program& p = module.main_program();
  EXPECT_THAT(Types(p), ElementsAre("matmul", "scale", "mean", "fill_constant", "mean_grad",
                                    "scale", "matmul_weight_grad", "sgd"));
  const Op& seed = p.ops()[3];
  EXPECT_EQ(seed.Output("Out"), "loss@GRAD");
  EXPECT_EQ(seed.attrs.GetFloat("value"), 1.0);
  EXPECT_EQ(seed.role, OpRole::kBackward);
  // x is an input nobody trains: no x@GRAD.
  EXPECT_FALSE(p.HasVar("x@GRAD"));
  const Op& sgd = p.ops()[7];
  EXPECT_EQ(sgd.role, OpRole::kOptimize);
  EXPECT_EQ(sgd.Input("Param"), "w");
  EXPECT_EQ(sgd.Input("Grad"), "w@GRAD");
  EXPECT_EQ(sgd.Output("ParamOut"), "w");
  EXPECT_DOUBLE_EQ(sgd.attrs.GetFloat("lr"), 0.01);
  ASSERT_NE(p.FindVar("w@GRAD"), nullptr);
  EXPECT_EQ(p.FindVar("w@GRAD")->shape, (Shape{4, 3}));
  EXPECT_FALSE(p.FindVar("w@GRAD")->persistable);
  EXPECT_TRUE(p.ops()[6].weight_grad);
}

TEST(AppendBackward, VarUsedTwiceGetsRenamedContributionsAndASum) {
  Module module = MlpModule();
  PassContext context(ops::Registry());
  auto changed = RunPipeline(module, "append-backward{lr=0.5}", ops::Registry(), &context);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  const Program& p = module.main_program();

  // h feeds the residual add and the second matmul. Walking backward, the add comes first:
  // its contribution is an alias of r@GRAD (no op); the matmul's is written to a var of
  // its own, named after its position in the sum.
  const Op* sum = FindOp(p, "sum");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->Output("Out"), "h@GRAD");
  EXPECT_THAT(*sum->FindInput("X"), ElementsAre("r@GRAD", "h@GRAD@RENAME@1"));
  EXPECT_FALSE(p.HasVar("h@GRAD@RENAME@0"));
  for (const char* name : {"h@GRAD", "h@GRAD@RENAME@1"}) {
    ASSERT_NE(p.FindVar(name), nullptr) << name;
    EXPECT_EQ(p.FindVar(name)->shape, (Shape{4, 6}));
  }
  // Every contribution is written before the sum, which precedes the first reader.
  const Op* gelu_grad = FindOp(p, "gelu_grad");
  ASSERT_NE(gelu_grad, nullptr);
  EXPECT_EQ(gelu_grad->Input("Out@GRAD"), "h@GRAD");
  EXPECT_LT(IndexOf(p, sum), IndexOf(p, gelu_grad));
  for (const Op& op : p.ops()) {
    op.ForEachOutput([&](const std::string& out) {
      if (out.rfind("h@GRAD@RENAME@", 0) == 0) EXPECT_LT(IndexOf(p, &op), IndexOf(p, sum));
    });
  }
  // The add's gradient is an alias of r@GRAD: no op, the contribution is r@GRAD itself.
  EXPECT_EQ(FindOp(p, "add", 1), nullptr);
  // bias_add's X gradient is an alias too: gelu_grad writes fc1_b@GRAD, read directly.
  const Op* w1_grad = FindOp(p, "matmul_weight_grad", 1);
  ASSERT_NE(w1_grad, nullptr);
  EXPECT_EQ(w1_grad->Input("Out@GRAD"), "fc1_b@GRAD");
  EXPECT_FALSE(p.HasVar("fc1@GRAD"));

  std::vector<std::string> updated;
  for (const Op& op : p.ops())
    if (op.type == "sgd") {
      updated.push_back(op.Input("Param"));
      EXPECT_DOUBLE_EQ(op.attrs.GetFloat("lr"), 0.5);
    }
  EXPECT_THAT(updated, ElementsAre("w1", "b1", "w2"));

  ASSERT_EQ(context.statistics().size(), 1u);
  auto stats = context.statistics()[0].counters;
  auto stat = [&](const std::string& name) {
    for (auto& [n, v] : stats)
      if (n == name) return v;
    return int64_t{-1};
  };
  EXPECT_EQ(stat("sum-ops"), 1);
  EXPECT_EQ(stat("optimizer-ops"), 3);
  EXPECT_EQ(stat("aliased-grads"), 3);  // add X, add Y, bias_add X
}

TEST(AppendBackward, TiedParameterGradientsAreSummed) {
  Module module = TiedWeightModule();
  auto changed = RunPipeline(module, "append-backward");
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  const Program& p = module.main_program();
  const Op* sum = FindOp(p, "sum");
  ASSERT_NE(sum, nullptr);
  EXPECT_THAT(*sum->FindInput("X"), ElementsAre("w@GRAD@RENAME@0", "w@GRAD@RENAME@1"));
  EXPECT_EQ(sum->Output("Out"), "w@GRAD");
  const Op* sgd = FindOp(p, "sgd");
  ASSERT_NE(sgd, nullptr);
  EXPECT_EQ(sgd->Input("Grad"), "w@GRAD");
  EXPECT_LT(IndexOf(p, sum), IndexOf(p, sgd));
}

// ---- gradients match finite differences ----

// Runs the forward ops and returns the loss.
double ForwardLoss(const Program& program, TensorEnv& env) {
  std::vector<Op> forward;
  for (const Op& op : program.ops())
    if (op.role != OpRole::kBackward && op.role != OpRole::kOptimize) forward.push_back(op);
  Status s = RunOps(forward, env);
  EXPECT_TRUE(s.ok()) << s.message();
  return env.Find("loss")->f32()[0];
}

void ExpectGradientsMatchFiniteDifferences(Module module) {
  ASSERT_TRUE(RunPipeline(module, "append-backward").ok());
  const Program& p = module.main_program();
  TensorEnv env;
  uint32_t seed = 1;
  for (const Var& v : p.vars())
    if (v.is_parameter || v.name == "x") env.Set(v.name, RandomTensor(v.shape, seed++));
  std::vector<Op> forward_and_backward;
  for (const Op& op : p.ops())
    if (op.role != OpRole::kOptimize) forward_and_backward.push_back(op);
  Status s = RunOps(forward_and_backward, env);
  ASSERT_TRUE(s.ok()) << s.message();

  int checked = 0;
  for (const Op& op : p.ops()) {
    if (op.type != "sgd") continue;
    const std::string& param = op.Input("Param");
    Tensor grad = env.Find(op.Input("Grad"))->Clone();
    Tensor* value = env.Find(param);
    for (int64_t i = 0; i < value->numel(); i += 3) {
      const float h = 1e-2f;
      float saved = value->f32()[i];
      value->f32()[i] = saved + h;
      double up = ForwardLoss(p, env);
      value->f32()[i] = saved - h;
      double down = ForwardLoss(p, env);
      value->f32()[i] = saved;
      double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(grad.f32()[i], numeric, 2e-3 + 2e-2 * std::abs(numeric))
          << param << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(AppendBackward, MlpGradientsMatchFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(MlpModule());
}

TEST(AppendBackward, TiedGradientsMatchFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(TiedWeightModule());
}

// The matmul's contribution to h comes first (named h@GRAD), the add's alias second: the
// first must be renamed, since the sum writes h@GRAD.
Module WrittenThenAliasedModule() {
  Module module;
  module.name = "written_then_aliased";
  module.AddProgram(Program("main"));
  ProgramBuilder b(module.main_program(), ops::Registry());
  b.Input("x", DataType::kFloat32, {4, 6});
  Initializer init;
  init.kind = Initializer::Kind::kNormal;
  init.std = 0.5;
  b.Parameter("w", {6, 6}, init);
  b.Parameter("w2", {6, 6}, init);
  b.Op("matmul").In("X", "x").In("Y", "w").Out("Out", "h").Build();
  b.Op("add").In("X", "h").In("Y", "x").Out("Out", "s").Build();
  b.Op("matmul").In("X", "h").In("Y", "w2").Out("Out", "y").Build();
  b.Op("gelu").In("X", "s").Out("Out", "g").Build();
  b.Op("add").In("X", "y").In("Y", "g").Out("Out", "r").Build();
  b.Op("mean").In("X", "r").Out("Out", "loss").Role(OpRole::kLoss).Build();
  EXPECT_TRUE(b.status().ok()) << b.status().message();
  return module;
}

TEST(AppendBackward, WrittenContributionIsRenamedWhenAnAliasFollows) {
  Module module = WrittenThenAliasedModule();
  auto changed = RunPipeline(module, "append-backward");
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  const Program& p = module.main_program();
  const Op* sum = FindOp(p, "sum");
  ASSERT_NE(sum, nullptr);
  EXPECT_THAT(*sum->FindInput("X"), ElementsAre("h@GRAD@RENAME@0", "s@GRAD"));
  EXPECT_EQ(sum->Output("Out"), "h@GRAD");
}

TEST(AppendBackward, WrittenThenAliasedGradientsMatchFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(WrittenThenAliasedModule());
}

// ---- adam ----

TEST(AppendBackward, AdamStateIsPersistableAndShardedLikeTheParameter) {
  Module module = TinyModule();
  Var* w = module.main_program().FindVar("w");
  w->init.full_shape = {4, 6};
  w->init.shard_axis = 1;
  w->init.shard_index = 1;
  w->init.num_shards = 2;
  w->init.key = "layer.w";
  auto changed = RunPipeline(module, "append-backward{optimizer=adam,beta1=0.8,epsilon=1e-6}");
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  const Program& p = module.main_program();

  for (const char* name : {"w@MOMENT1", "w@MOMENT2"}) {
    const Var* m = p.FindVar(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_TRUE(m->persistable);
    EXPECT_FALSE(m->is_parameter);
    EXPECT_EQ(m->shape, (Shape{4, 3}));
    EXPECT_EQ(m->init.kind, Initializer::Kind::kZeros);
    EXPECT_EQ(m->init.full_shape, (Shape{4, 6}));
    EXPECT_EQ(m->init.shard_axis, 1);
    EXPECT_EQ(m->init.shard_index, 1);
    EXPECT_EQ(m->init.num_shards, 2);
  }
  EXPECT_EQ(p.FindVar("w@MOMENT1")->init.key, "layer.w@MOMENT1");
  const Var* b1 = p.FindVar("w@BETA1_POW");
  const Var* b2 = p.FindVar("w@BETA2_POW");
  ASSERT_NE(b1, nullptr);
  ASSERT_NE(b2, nullptr);
  EXPECT_EQ(b1->shape, (Shape{1}));
  EXPECT_TRUE(b1->persistable);
  EXPECT_EQ(b1->init.kind, Initializer::Kind::kConstant);
  EXPECT_DOUBLE_EQ(b1->init.value, 0.8);
  EXPECT_DOUBLE_EQ(b2->init.value, 0.999);

  const Op* adam = FindOp(p, "adam");
  ASSERT_NE(adam, nullptr);
  EXPECT_EQ(adam->role, OpRole::kOptimize);
  EXPECT_EQ(adam->Input("Grad"), "w@GRAD");
  EXPECT_EQ(adam->Input("Moment1"), "w@MOMENT1");
  EXPECT_EQ(adam->Output("Moment1Out"), "w@MOMENT1");
  EXPECT_EQ(adam->Output("Beta2PowOut"), "w@BETA2_POW");
  EXPECT_DOUBLE_EQ(adam->attrs.GetFloat("lr"), 0.001);
  EXPECT_DOUBLE_EQ(adam->attrs.GetFloat("beta1"), 0.8);
  EXPECT_DOUBLE_EQ(adam->attrs.GetFloat("epsilon"), 1e-6);
  EXPECT_EQ(FindOp(p, "sgd"), nullptr);
}

TEST(AppendBackward, OptionErrors) {
  PassManager manager;
  EXPECT_EQ(manager.AddPipeline("append-backward{lr=-1}").message(),
            "pass pipeline, column 1: pass 'append-backward': lr must be > 0");
  EXPECT_EQ(manager.AddPipeline("append-backward{beta1=0.5}").message(),
            "pass pipeline, column 1: pass 'append-backward': beta1, beta2 and epsilon apply "
            "only to optimizer=adam");
  EXPECT_EQ(manager.AddPipeline("append-backward{optimizer=adam,beta2=1}").message(),
            "pass pipeline, column 1: pass 'append-backward': beta2 must be in [0, 1)");
  EXPECT_EQ(manager.AddPipeline("append-backward{optimizer=momentum}").message(),
            "pass pipeline, column 27: option 'optimizer' of pass 'append-backward': expected "
            "one of sgd, adam, got 'momentum'");
}

// ---- placement ----

TEST(AppendBackward, GradOpsKeepThePlacementOfTheirForwardOp) {
  Module module;
  module.AddProgram(Program("main"));
  ProgramBuilder b(module.main_program(), ops::Registry());
  b.SetPlacement(0, 0);
  b.Input("x", DataType::kFloat32, {2, 4});
  b.Parameter("w", {4, 4}, {});
  b.Op("matmul").In("X", "x").In("Y", "w").Out("Out", "y").Build();
  b.SetPlacement(1, 1);
  b.Parameter("v", {4, 4}, {});
  b.Op("matmul").In("X", "y").In("Y", "v").Out("Out", "z").Build();
  b.Op("mean").In("X", "z").Out("Out", "loss").Role(OpRole::kLoss).Build();
  ASSERT_TRUE(b.status().ok()) << b.status().message();
  ASSERT_TRUE(RunPipeline(module, "append-backward").ok());
  const Program& p = module.main_program();
  for (const Op& op : p.ops()) {
    if (op.role != OpRole::kBackward) continue;
    bool stage0 = op.type == "matmul_weight_grad" && op.Input("X") == "x";
    EXPECT_EQ(op.stage, stage0 ? 0 : 1) << op.type;
    EXPECT_EQ(op.chunk, stage0 ? 0 : 1) << op.type;
  }
  EXPECT_EQ(FindOp(p, "sgd", 0)->stage, 0);
  EXPECT_EQ(FindOp(p, "sgd", 1)->stage, 1);
  EXPECT_EQ(p.FindVar("y@GRAD")->stage, 0);  // the stage of the var, not of its grad op
  EXPECT_EQ(p.FindVar("loss@GRAD")->stage, 1);
}

// ---- zero gradients, with a test-only op whose grad reads both outputs' gradients ----

OpRegistry RegistryWithFork() {
  OpRegistry registry;
  for (const std::string& type : ops::Registry().Types())
    registry.Register(*ops::Registry().Find(type));
  registry.Register(OpDef{
      .type = "fork",
      .inputs = {{"X"}},
      .outputs = {{"A"}, {"B"}},
      .infer =
          [](InferContext& ctx) {
            ctx.SetOutput("A", ctx.Input("X"));
            ctx.SetOutput("B", ctx.Input("X"));
            return OkStatus();
          },
      .grad =
          [](GradContext& ctx) {
            const Op& fwd = ctx.forward();
            if (!ctx.NeedsGrad(fwd.Input("X"))) return OkStatus();
            Op& op = ctx.Emit("fork_grad");
            op.SetInput("A@GRAD", {ctx.Grad(fwd.Output("A"))});
            op.SetInput("B@GRAD", {ctx.Grad(fwd.Output("B"))});
            op.SetOutput("X@GRAD", {ctx.Grad(fwd.Input("X"))});
            return OkStatus();
          },
  });
  registry.Register(OpDef{
      .type = "fork_grad",
      .inputs = {{"A@GRAD"}, {"B@GRAD"}},
      .outputs = {{"X@GRAD"}},
      .infer =
          [](InferContext& ctx) {
            ctx.SetOutput("X@GRAD", ctx.Input("A@GRAD"));
            return OkStatus();
          },
  });
  registry.Register(OpDef{
      .type = "opaque", .inputs = {{"X"}}, .outputs = {{"Out"}}, .infer = [](InferContext& ctx) {
        ctx.SetOutput("Out", ctx.Input("X"));
        return OkStatus();
      }});
  return registry;
}

TEST(AppendBackward, GradientNobodyProducesIsZero) {
  OpRegistry registry = RegistryWithFork();
  Module module;
  module.AddProgram(Program("main"));
  ProgramBuilder b(module.main_program(), registry);
  b.Input("x", DataType::kFloat32, {2, 4});
  b.Parameter("w", {4, 4}, {});
  b.Op("matmul").In("X", "x").In("Y", "w").Out("Out", "y").Build();
  b.Op("fork").In("X", "y").Out("A", "a").Out("B", "unused").Build();
  b.Op("mean").In("X", "a").Out("Out", "loss").Role(OpRole::kLoss).Build();
  ASSERT_TRUE(b.status().ok()) << b.status().message();
  auto changed = RunPipeline(module, "append-backward", registry);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  const Program& p = module.main_program();
  const Op* zero = FindOp(p, "fill_constant", 1);
  ASSERT_NE(zero, nullptr);
  EXPECT_EQ(zero->Output("Out"), "unused@GRAD");
  EXPECT_EQ(zero->attrs.GetFloat("value", -1), 0.0);
  EXPECT_EQ(zero->attrs.GetInts("shape"), (std::vector<int64_t>{2, 4}));
  const Op* fork_grad = FindOp(p, "fork_grad");
  ASSERT_NE(fork_grad, nullptr);
  EXPECT_LT(IndexOf(p, zero), IndexOf(p, fork_grad));
  EXPECT_EQ(fork_grad->Input("B@GRAD"), "unused@GRAD");
}

// ---- errors ----

std::string ErrorOf(Module module, std::string_view pipeline = "append-backward",
                    const OpRegistry& registry = ops::Registry()) {
  auto result = RunPipeline(module, pipeline, registry);
  return result.ok() ? "<ok>" : result.status().message();
}

TEST(AppendBackward, RefusesAModuleThatAlreadyHasBackwardOps) {
  EXPECT_EQ(ErrorOf(TinyModule(), "append-backward,append-backward"),
            "pass 'append-backward' failed: module already has backward ops");
}

TEST(AppendBackward, NeedsALoss) {
  Module module = TinyModule();
  module.main_program().ops().back().role = OpRole::kForward;
  EXPECT_EQ(ErrorOf(module),
            "pass 'append-backward' failed: no loss: set the module metadata string 'loss' or "
            "give the loss op role loss");
  module.metadata.Set("loss", std::string("nope"));
  EXPECT_EQ(ErrorOf(module),
            "pass 'append-backward' failed: the loss var 'nope' named by the module metadata is "
            "not declared");
  module.metadata.Set("loss", int64_t{3});
  EXPECT_EQ(ErrorOf(module),
            "pass 'append-backward' failed: module metadata 'loss' must be a non-empty string");
  module.metadata.Set("loss", std::string("x"));
  EXPECT_EQ(ErrorOf(module),
            "pass 'append-backward' failed: the loss var 'x' is produced by no op");
}

TEST(AppendBackward, MetadataLossWinsOverTheLossRole) {
  Module module = TinyModule();
  module.metadata.Set("loss", std::string("z"));  // z [2, 3] instead of the scalar loss
  ASSERT_TRUE(RunPipeline(module, "append-backward").ok());
  const Op& seed = module.main_program().ops()[3];
  EXPECT_EQ(seed.Output("Out"), "z@GRAD");
  EXPECT_EQ(seed.attrs.GetInts("shape"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(FindOp(module.main_program(), "mean_grad"), nullptr);
}

TEST(AppendBackward, LossMustDependOnAParameter) {
  Module module = TinyModule();
  module.main_program().FindVar("w")->is_parameter = false;
  EXPECT_EQ(ErrorOf(module),
            "pass 'append-backward' failed: the loss 'loss' is not f32 or depends on no parameter");
}

TEST(AppendBackward, RefusesASplitModule) {
  Module module = TinyModule();
  module.AddProgram(Program("other"));
  EXPECT_EQ(ErrorOf(module),
            "pass 'append-backward' failed: expects an unsplit module with one program, got 2 "
            "(run it before split-program)");
}

TEST(AppendBackward, OpWithoutGradientOnTheLossPath) {
  OpRegistry registry = RegistryWithFork();
  Module module;
  module.AddProgram(Program("main"));
  ProgramBuilder b(module.main_program(), registry);
  b.Input("x", DataType::kFloat32, {2, 4});
  b.Parameter("w", {4, 4}, {});
  b.Op("matmul").In("X", "x").In("Y", "w").Out("Out", "y").Build();
  b.Op("opaque").In("X", "y").Out("Out", "o").Build();
  b.Op("mean").In("X", "o").Out("Out", "loss").Role(OpRole::kLoss).Build();
  ASSERT_TRUE(b.status().ok());
  EXPECT_EQ(ErrorOf(module, "append-backward", registry),
            "pass 'append-backward' failed: op 1 (opaque) has no gradient, but its input 'y' "
            "needs one");
}

TEST(AppendBackward, OpsAfterTheLossAreLeftAlone) {
  Module module = TinyModule();
  ProgramBuilder b(module.main_program(), ops::Registry());
  b.Op("scale").In("X", "loss").Out("Out", "reported").Attr("scale", 100.0).Build();
  ASSERT_TRUE(b.status().ok());
  ASSERT_TRUE(RunPipeline(module, "append-backward").ok());
  EXPECT_FALSE(module.main_program().HasVar("reported@GRAD"));
  EXPECT_EQ(module.main_program().ops()[4].type, "fill_constant");
}

}  // namespace
}  // namespace pw::testing
