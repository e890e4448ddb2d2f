// The PassManager: order, verification after each pass, errors naming the pass, and the
// --print-after / --time-passes / --stats instrumentation.

#include "passes/pass_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "ops/registry.h"
#include "tests/passes/test_modules.h"
#include "tests/passes/test_passes.h"

namespace pw::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

PassManager ManagerFor(std::string_view pipeline) {
  PassManager manager(ops::Registry());
  Status s = manager.AddPipeline(pipeline, TestPassRegistry());
  EXPECT_TRUE(s.ok()) << s.message();
  return manager;
}

TEST(PassManager, RunsPassesInOrderAndReportsChange) {
  Module module = TinyModule();
  PassManager manager = ManagerFor("test-noop,test-rename{to=first},test-rename{to=second}");
  auto changed = manager.Run(module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(module.name, "second");

  PassManager noop = ManagerFor("test-noop");
  auto unchanged = noop.Run(module);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_FALSE(*unchanged);
}

TEST(PassManager, VerificationFailureNamesThePass) {
  Module module = TinyModule();
  PassManager manager = ManagerFor("test-noop,test-break,test-noop");
  auto result = manager.Run(module);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(),
              HasSubstr("verification failed after pass 'test-break': "));
  EXPECT_THAT(result.status().message(), HasSubstr("no_such_var"));
  EXPECT_EQ(result.status().message().find('\n'), std::string::npos);
}

TEST(PassManager, NoVerifyLetsABrokenModuleThrough) {
  Module module = TinyModule();
  PassManager manager = ManagerFor("test-break");
  manager.EnableVerifier(false);
  EXPECT_TRUE(manager.Run(module).ok());
}

TEST(PassManager, InvalidInputIsReportedBeforeAnyPass) {
  Module module = TinyModule();
  module.main_program().ops()[0].SetInput("X", {"undeclared"});
  PassManager manager = ManagerFor("test-rename");
  auto result = manager.Run(module);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("the input module does not verify: "));
  EXPECT_EQ(module.name, "tiny");  // no pass ran
}

TEST(PassManager, PassErrorNamesThePass) {
  Module module = TinyModule();
  PassManager manager = ManagerFor("test-fail");
  auto result = manager.Run(module);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(result.status().message(), "pass 'test-fail' failed: the module is not ready");
}

TEST(PassManager, AddPipelineReportsParseErrors) {
  PassManager manager(ops::Registry());
  Status s = manager.AddPipeline("test-noop,", TestPassRegistry());
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(manager.passes().empty());
}

TEST(PassManager, PrintAfterSelectedPasses) {
  Module module = TinyModule();
  PassManager manager = ManagerFor("test-noop,test-rename{to=printed}");
  std::ostringstream out;
  manager.EnablePrintAfter({"test-rename"}, out);
  ASSERT_TRUE(manager.Run(module).ok());
  std::string text = out.str();
  EXPECT_EQ(text.rfind("// ----- IR after test-rename ----- //\n", 0), 0u) << text;
  EXPECT_THAT(text, HasSubstr("name: \"printed\""));
  EXPECT_THAT(text, Not(HasSubstr("IR after test-noop")));
}

TEST(PassManager, PrintAfterAll) {
  Module module = TinyModule();
  PassManager manager = ManagerFor("test-noop,test-rename");
  std::ostringstream out;
  manager.EnablePrintAfter({"all"}, out);
  ASSERT_TRUE(manager.Run(module).ok());
  std::string text = out.str();
  size_t first = text.find("// ----- IR after test-noop ----- //");
  size_t second = text.find("// ----- IR after test-rename ----- //");
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(second, std::string::npos);
  EXPECT_LT(first, second);
}

TEST(PassManager, TimingTableHasARowPerPassRun) {
  Module module = TinyModule();
  PassManager manager = ManagerFor("test-noop,test-rename,test-noop");
  std::ostringstream out;
  manager.EnableTiming(out);
  ASSERT_TRUE(manager.Run(module).ok());
  std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("Pass execution timing report"));
  EXPECT_THAT(text, HasSubstr("wall ms"));
  size_t rows = 0;
  for (size_t at = text.find("%  test-"); at != std::string::npos;
       at = text.find("%  test-", at + 1))
    ++rows;
  EXPECT_EQ(rows, 3u) << text;
  EXPECT_THAT(text, HasSubstr("%  (verifier)"));
  EXPECT_THAT(text, HasSubstr("100.0%  total"));
}

TEST(PassManager, TimingIsPrintedEvenWhenAPassFails) {
  Module module = TinyModule();
  PassManager manager = ManagerFor("test-noop,test-fail");
  std::ostringstream out;
  manager.EnableTiming(out);
  EXPECT_FALSE(manager.Run(module).ok());
  EXPECT_THAT(out.str(), HasSubstr("%  test-fail"));
}

TEST(PassManager, StatisticsPerPassRun) {
  Module module = TinyModule();
  PassManager manager = ManagerFor("test-rename,test-noop");
  std::ostringstream out;
  manager.EnableStatistics(out);
  PassContext context(ops::Registry());
  ASSERT_TRUE(manager.Run(module, context).ok());
  ASSERT_EQ(context.statistics().size(), 2u);
  EXPECT_EQ(context.statistics()[0].pass, "test-rename");
  EXPECT_EQ(context.statistics()[0].counters,
            (std::vector<std::pair<std::string, int64_t>>{{"renames", 2}}));
  EXPECT_TRUE(context.statistics()[1].counters.empty());
  std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("Pass statistics"));
  EXPECT_THAT(text, ContainsRegex("test-rename\n  renames +2\n"));
  EXPECT_THAT(text, HasSubstr("test-noop  (no statistics)"));
}

TEST(PassContext, ServicesAreFoundByType) {
  struct CostModel {
    double flops_per_second = 1e12;
  };
  PassContext context(ops::Registry());
  EXPECT_EQ(context.Find<CostModel>(), nullptr);
  context.Attach(std::make_shared<CostModel>());
  ASSERT_NE(context.Find<CostModel>(), nullptr);
  EXPECT_EQ(context.Find<CostModel>()->flops_per_second, 1e12);
  EXPECT_EQ(context.Find<int>(), nullptr);
}

}  // namespace
}  // namespace pw::testing
