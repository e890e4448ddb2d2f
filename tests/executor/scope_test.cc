#include "executor/scope.h"

#include <gtest/gtest.h>

namespace pw {
namespace {

TEST(ScopeTest, ChildFallsThroughToParent) {
  Scope root;
  root.Set("w", Tensor(DataType::kFloat32, {2}));
  Scope child(&root);
  ASSERT_NE(child.Find("w"), nullptr);
  EXPECT_EQ(child.Find("w"), root.Find("w"));
  EXPECT_EQ(child.FindLocal("w"), nullptr);
  EXPECT_EQ(child.Find("missing"), nullptr);
  EXPECT_EQ(child.parent(), &root);
}

TEST(ScopeTest, LocalBindingsShadowAndErase) {
  Scope root;
  root.Set("x", Tensor(DataType::kFloat32, {1}));
  Scope child(&root);
  Tensor& local = child.Set("x", Tensor(DataType::kFloat32, {3}));
  EXPECT_EQ(child.Find("x"), &local);
  EXPECT_EQ(child.Find("x")->numel(), 3);
  EXPECT_TRUE(child.Erase("x"));
  EXPECT_FALSE(child.Erase("x"));
  EXPECT_EQ(child.Find("x")->numel(), 1);  // the parent's again
}

TEST(ScopeTest, PointersSurviveLaterInsertions) {
  Scope s;
  Tensor* first = &s.Set("a", Tensor(DataType::kFloat32, {1}));
  for (int i = 0; i < 1000; ++i) s.Set("v" + std::to_string(i), Tensor(DataType::kFloat32, {1}));
  EXPECT_EQ(s.Find("a"), first);
  EXPECT_EQ(s.size(), 1001u);
  EXPECT_EQ(s.LocalNames().front(), "a");
}

}  // namespace
}  // namespace pw
