// dce: which ops and vars go, which stay.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "tests/passes/test_modules.h"

namespace pw::testing {
namespace {

using ::testing::ElementsAre;

StatusOr<bool> RunDce(Module& module, PassContext* context = nullptr) {
  PassManager manager;
  PW_RETURN_IF_ERROR(manager.AddPipeline("dce"));
  if (context) return manager.Run(module, *context);
  return manager.Run(module);
}

std::vector<std::string> OutputsOf(const Program& p) {
  std::vector<std::string> outs;
  for (const Op& op : p.ops()) outs.push_back(op.outputs.front().vars.front());
  return outs;
}

TEST(Dce, KeepsALiveProgramUnchanged) {
  Module module = TinyModule();
  Module before = module;
  auto changed = RunDce(module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(module, before);
}

TEST(Dce, RemovesDeadChainsAndTheirVars) {
  Module module = TinyModule();
  ProgramBuilder b(module.main_program(), ops::Registry());
  b.Input("unused_input", DataType::kFloat32, {7});
  b.Op("scale").In("X", "y").Out("Out", "dead1").Build();
  b.Op("gelu").In("X", "dead1").Out("Out", "dead2").Build();
  ASSERT_TRUE(b.status().ok());
  PassContext context(ops::Registry());
  auto changed = RunDce(module, &context);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  const Program& p = module.main_program();
  EXPECT_THAT(OutputsOf(p), ElementsAre("y", "z", "loss"));
  EXPECT_FALSE(p.HasVar("dead1"));
  EXPECT_FALSE(p.HasVar("dead2"));
  EXPECT_FALSE(p.HasVar("unused_input"));
  EXPECT_TRUE(p.HasVar("x"));
  EXPECT_EQ(context.statistics()[0].counters, (std::vector<std::pair<std::string, int64_t>>{
                                                  {"ops-removed", 2}, {"vars-removed", 3}}));
}

TEST(Dce, KeepsPersistableWritesMetadataInputsAndTheLoss) {
  Module module = TinyModule();
  module.metadata.Set("inputs", std::vector<std::string>{"x", "labels"});
  ProgramBuilder b(module.main_program(), ops::Registry());
  b.Input("labels", DataType::kInt64, {2});  // fed, unused: kept
  Var state;
  state.name = "state";
  state.shape = {2, 3};
  state.persistable = true;
  b.Declare(state);
  Var unused_state = state;
  unused_state.name = "unused_state";
  b.Declare(unused_state);                                 // persistable, unused: kept
  b.Op("scale").In("X", "y").Out("Out", "state").Build();  // writes state: kept
  ASSERT_TRUE(b.status().ok());
  module.main_program().ops()[2].role = OpRole::kForward;  // the loss, found by metadata
  module.metadata.Set("loss", std::string("loss"));
  auto changed = RunDce(module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_FALSE(*changed);
  EXPECT_THAT(OutputsOf(module.main_program()), ElementsAre("y", "z", "loss", "state"));
  EXPECT_TRUE(module.main_program().HasVar("labels"));
  EXPECT_TRUE(module.main_program().HasVar("unused_state"));
}

TEST(Dce, KeepsOptimizerOpsAndWhatFeedsThem) {
  Module module = TinyModule();
  PassManager manager;
  ASSERT_TRUE(manager.AddPipeline("append-backward,dce").ok());
  PassContext context(ops::Registry());
  auto changed = manager.Run(module, context);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  // Nothing append-backward emits is dead here.
  EXPECT_TRUE(context.statistics()[1].counters.empty());
  EXPECT_EQ(module.main_program().ops().back().type, "sgd");
}

TEST(Dce, KeepsVarsOtherProgramsRead) {
  Module module = TinyModule();
  // A second program reads z; the first program's ops that make z stay.
  Program& consumer = module.AddProgram(Program("consumer"));
  consumer.AddVar(*module.main_program().FindVar("z"));
  Var out;
  out.name = "out";
  out.shape = {2, 3};
  out.persistable = true;
  consumer.AddVar(out);
  Op scale;
  scale.type = "scale";
  scale.SetInput("X", {"z"}).SetOutput("Out", {"out"});
  consumer.AddOp(scale);
  module.main_program().ops().pop_back();  // drop mean: z has no reader in main
  module.main_program().RemoveVarsIf([](const Var& v) { return v.name == "loss"; });
  PassContext context(ops::Registry());
  PassManager manager;
  manager.EnableVerifier(false);  // z is not defined in the consumer program
  ASSERT_TRUE(manager.AddPipeline("dce").ok());
  auto changed = manager.Run(module, context);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_THAT(OutputsOf(module.main_program()), ElementsAre("y", "z"));
}

}  // namespace
}  // namespace pw::testing
