// The global registry holds the built-in passes without any registration call by the
// test: this binary links the static passes library, so it also proves that registration
// survives static linking.

#include <gtest/gtest.h>

#include "passes/pass_registry.h"
#include "tests/passes/test_passes.h"

namespace pw::testing {
namespace {

TEST(PassRegistry, BuiltinPassesAreRegistered) {
  const PassRegistry& registry = PassRegistry::Global();
  for (const char* name : {"append-backward", "dce"}) {
    const PassInfo* info = registry.Find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_FALSE(info->description.empty());
    std::unique_ptr<Pass> pass = registry.Create(name);
    ASSERT_NE(pass, nullptr);
    EXPECT_EQ(pass->name(), name);
  }
  EXPECT_EQ(registry.Create("no-such-pass"), nullptr);
}

TEST(PassRegistry, ListsPassesSortedByName) {
  std::vector<std::string> names;
  for (const PassInfo* info : TestPassRegistry().passes()) names.push_back(info->name);
  EXPECT_EQ(names, (std::vector<std::string>{"test-break", "test-fail", "test-noop", "test-options",
                                             "test-rename"}));
}

TEST(PassRegistry, SimilarNames) {
  const PassRegistry& registry = TestPassRegistry();
  EXPECT_EQ(registry.SimilarNames("test-nop"), (std::vector<std::string>{"test-noop"}));
  EXPECT_EQ(registry.SimilarNames("rename"), (std::vector<std::string>{"test-rename"}));
  EXPECT_TRUE(registry.SimilarNames("xyz").empty());
  EXPECT_EQ(PassRegistry::Global().SimilarNames("append-backwards"),
            (std::vector<std::string>{"append-backward"}));
}

TEST(PassRegistry, CreatesFreshInstances) {
  auto a = TestPassRegistry().Create("test-options");
  auto b = TestPassRegistry().Create("test-options");
  ASSERT_TRUE(a->FindOption("count")->Parse("9").ok());
  EXPECT_EQ(b->FindOption("count")->ValueText(), "3");
}

TEST(PassRegistryDeathTest, RegisteringANameTwiceAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // BLAS may have started threads
  PassRegistry registry;
  registry.Register<NoopPass>();
  EXPECT_DEATH(registry.Register<NoopPass>(), "pass 'test-noop' registered twice");
}

}  // namespace
}  // namespace pw::testing
