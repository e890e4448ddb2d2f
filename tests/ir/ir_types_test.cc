#include <gtest/gtest.h>

#include "ir/module.h"
#include "ir/stream_type.h"

namespace pw {
namespace {

TEST(TypesTest, NamesShapesAndSizes) {
  DataType d;
  EXPECT_TRUE(ParseDataType("i64", &d));
  EXPECT_EQ(d, DataType::kInt64);
  EXPECT_FALSE(ParseDataType("f128", &d));
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(ShapeToString({2, 3}), "[2, 3]");
  Var v{"v", DataType::kFloat32, {8, 8}};
  EXPECT_EQ(v.num_bytes(), 256);
}

TEST(TypesTest, GradNames) {
  EXPECT_EQ(GradVarName("x"), "x@GRAD");
  EXPECT_TRUE(IsGradVarName("x@GRAD"));
  EXPECT_FALSE(IsGradVarName("@GRAD"));
  EXPECT_EQ(ForwardVarName("x@GRAD"), "x");
}

TEST(ProgramTest, VarsAddFindRemove) {
  Program p("main");
  EXPECT_TRUE(p.AddVar(Var{"a", DataType::kFloat32, {1}}));
  EXPECT_FALSE(p.AddVar(Var{"a", DataType::kFloat32, {2}}));
  EXPECT_TRUE(p.AddVar(Var{"b", DataType::kFloat32, {1}}));
  EXPECT_EQ(p.RemoveVarsIf([](const Var& v) { return v.name == "a"; }), 1u);
  EXPECT_EQ(p.FindVar("a"), nullptr);
  ASSERT_NE(p.FindVar("b"), nullptr);
  EXPECT_EQ(p.FindVar("b")->name, "b");
}

TEST(OpTest, SlotsAndRenames) {
  Op op;
  op.SetInput("X", {"a", "b"}).SetOutput("Out", {"c"});
  EXPECT_EQ(op.Input("X"), "a");
  EXPECT_EQ(op.Input("Y"), "");
  op.RenameInput("b", "z");
  EXPECT_EQ((*op.FindInput("X"))[1], "z");
  op.RenameOutput("c", "d");
  EXPECT_EQ(op.Output("Out"), "d");
}

}  // namespace
}  // namespace pw

TEST(StreamTypeTest, NamesRoundTripAndCommunicationRanksAboveCompute) {
  for (pw::StreamType type : pw::kAllStreamTypes) {
    auto parsed = pw::ParseStreamType(pw::StreamTypeName(type));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, type);
    EXPECT_LE(pw::StreamPriority(type), pw::kMaxStreamPriority);
    if (pw::IsCommStream(type))
      EXPECT_GT(pw::StreamPriority(type), pw::StreamPriority(pw::StreamType::kCompute));
  }
  EXPECT_EQ(*pw::ParseStreamType(""), pw::StreamType::kCompute);
  auto bad = pw::ParseStreamType("gpu_copy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mp_comm"), std::string::npos);
}
