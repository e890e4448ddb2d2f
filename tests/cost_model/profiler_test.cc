// The profiler: distinct signatures of a module (its ops and what the executor adds) and
// real measurements of them on the CPU kernels.

#include "cost_model/profiler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cost_model/wake_latency.h"
#include "ops/registry.h"

namespace pw::cost {
namespace {

Var V(const std::string& name, Shape shape, bool persistable = false) {
  Var v;
  v.name = name;
  v.shape = std::move(shape);
  v.persistable = persistable;
  v.is_parameter = persistable;
  return v;
}

Op MatMul(const std::string& x, const std::string& y, const std::string& out) {
  Op op;
  op.type = "matmul";
  op.SetInput("X", {x}).SetInput("Y", {y}).SetOutput("Out", {out});
  return op;
}

// Two matmuls of the same shapes (one signature), a gelu, and an sgd step on w whose
// gradient the executor accumulates and scales.
Module SmallModule() {
  Program p("main");
  for (Var v : {V("x", {4, 16}), V("w", {16, 16}, true), V("h", {4, 16}), V("z", {4, 16}),
                V("k", {4, 16}), V("w@GRAD", {16, 16})})
    p.AddVar(v);
  p.AddOp(MatMul("x", "w", "h"));
  p.AddOp(MatMul("h", "w", "z"));
  Op gelu;
  gelu.type = "gelu";
  gelu.SetInput("X", {"z"}).SetOutput("Out", {"k"});
  p.AddOp(gelu);
  Op grad;
  grad.type = "matmul_weight_grad";
  grad.role = OpRole::kBackward;
  grad.SetInput("X", {"x"}).SetInput("Out@GRAD", {"k"}).SetOutput("Y@GRAD", {"w@GRAD"});
  p.AddOp(grad);
  Op sgd;
  sgd.type = "sgd";
  sgd.role = OpRole::kOptimize;
  sgd.SetInput("Param", {"w"}).SetInput("Grad", {"w@GRAD"}).SetOutput("ParamOut", {"w"});
  sgd.SetAttr("lr", 0.1);
  p.AddOp(sgd);
  Module m;
  m.AddProgram(std::move(p));
  return m;
}

TEST(Profiler, FindsEachDistinctSignatureOnceWithTheExecutorsWork) {
  auto ops = DistinctOps(SmallModule(), ops::Registry());
  ASSERT_TRUE(ops.ok()) << ops.status().message();
  std::vector<std::string> types;
  for (const CostedOp& c : *ops) types.push_back(c.op.type);
  // matmul once; the gradient's scaling (scale) added. The weight-gradient GEMM adds into
  // the gradient sum itself (its Acc), so the executor runs no add of its own.
  EXPECT_EQ(types,
            (std::vector<std::string>{"matmul", "gelu", "matmul_weight_grad", "sgd", "scale"}));
  EXPECT_NE((*ops)[2].op.FindInput("Acc"), nullptr);
  EXPECT_NE((*ops)[2].sig.key.find("Acc:f32[16,16]"), std::string::npos) << (*ops)[2].sig.key;
  EXPECT_EQ((*ops)[0].sig.key, "matmul(X:f32[4,16];Y:f32[16,16])");
  EXPECT_DOUBLE_EQ((*ops)[0].sig.flops, 2.0 * 4 * 16 * 16);
}

// A collective over more than one rank (the distributed optimizer's reduce-scatter over dp 2)
// is priced by the communication model, and a member's slice (c_split) by the roofline, not
// timed as ops: alone they have no group to run over. Over a group of one they are ops like
// any other.
TEST(Profiler, LeavesCollectivesOverSeveralRanksToTheCommunicationModel) {
  for (int dp : {1, 2}) {
    Program p("main");
    for (Var v : {V("g", {8, 4}), V("s", {8 / dp, 4})}) p.AddVar(v);
    Op scatter;
    scatter.type = "c_reduce_scatter_sum";
    scatter.SetInput("X", {"g"}).SetOutput("Out", {"s"});
    scatter.SetAttr("group", std::string("dp")).SetAttr("axis", int64_t{0});
    scatter.SetAttr("nranks", int64_t{dp});
    p.AddOp(scatter);
    Op split;  // this member's rows of a tensor every member holds
    split.type = "c_split";
    split.SetInput("X", {"g"}).SetOutput("Out", {"s"});
    split.attrs = scatter.attrs;
    p.AddOp(split);
    Module m;
    m.mesh.dp = dp;
    m.AddProgram(std::move(p));
    auto ops = DistinctOps(m, ops::Registry());
    ASSERT_TRUE(ops.ok()) << ops.status().message();
    EXPECT_EQ(ops->size(), dp == 1 ? 2u : 0u) << "dp " << dp;
  }
}

TEST(Profiler, MeasuresEverySignature) {
  auto ops = DistinctOps(SmallModule(), ops::Registry());
  ASSERT_TRUE(ops.ok()) << ops.status().message();
  ProfileOptions options;
  options.warmup = 1;
  options.repeats = 5;
  options.min_seconds = 0;
  options.measure_device = false;
  size_t calls = 0;
  options.progress = [&](size_t done, size_t total, const std::string&) {
    ++calls;
    EXPECT_LE(done, total);
  };
  auto result = ProfileOps(*ops, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(calls, ops->size());
  EXPECT_TRUE(result->skipped.empty());
  ASSERT_EQ(result->table.size(), ops->size());
  for (const OpCostEntry& e : result->table.proto().entries()) {
    EXPECT_GT(e.median(), 0) << e.key();
    EXPECT_LE(e.min(), e.median()) << e.key();
    EXPECT_GE(e.max(), e.median()) << e.key();
    EXPECT_EQ(e.repeats(), 5) << e.key();
    // One BLAS thread: the kernel's CPU time is measured too (its work at full speed).
    EXPECT_GT(e.cpu(), 0) << e.key();
  }
  EXPECT_EQ(result->table.device(), "cpu");
  // The table is a valid one.
  EXPECT_TRUE(OpCostTable::FromProto(result->table.proto()).ok());
}

// A bf16 op is measured on its bf16 kernel and recorded with its dtype, so the estimator
// places it against the bf16 peak.
TEST(Profiler, MeasuresLowPrecisionSignaturesWithTheirDtype) {
  Program p("main");
  for (const char* name : {"x", "w", "h"}) {
    Var v = V(name, {8, 8});
    v.dtype = DataType::kBFloat16;
    p.AddVar(v);
  }
  p.AddOp(MatMul("x", "w", "h"));
  Module m;
  m.AddProgram(std::move(p));
  auto ops = DistinctOps(m, ops::Registry());
  ASSERT_TRUE(ops.ok()) << ops.status().message();
  ASSERT_EQ(ops->size(), 1u);
  EXPECT_EQ((*ops)[0].sig.key, "matmul(X:bf16[8,8];Y:bf16[8,8])");
  EXPECT_EQ((*ops)[0].sig.dtype, DataType::kBFloat16);
  EXPECT_DOUBLE_EQ((*ops)[0].sig.bytes, 3 * 64 * 2.0);  // two bytes an element
  ProfileOptions options;
  options.warmup = 1;
  options.repeats = 3;
  options.min_seconds = 0;
  options.measure_device = false;
  auto result = ProfileOps(*ops, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->table.size(), 1u);
  EXPECT_EQ(result->table.proto().entries(0).dtype(), "bf16");
  EXPECT_GT(result->table.proto().entries(0).median(), 0);
}

TEST(Profiler, MeasuresAPeakPerDtype) {
  DeviceSpec spec = MeasureCpuSpec();
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    bool found = false;
    for (const auto& peak : spec.peak_flops())
      found = found || (peak.dtype() == DataTypeName(dtype) && peak.flops_per_s() > 0);
    EXPECT_TRUE(found) << DataTypeName(dtype);
  }
}

TEST(Profiler, MeasuresTheWaitOfAThreadOnACoreThatComputeHolds) {
  // Every record is seen after it is made: both waits are positive (and finite: the
  // measurement ends).
  WakeLatency w = MeasureWakeLatency(2, 20);
  EXPECT_GT(w.held_spin, 0);
  EXPECT_GT(w.held_wake_factor, 0);
  EXPECT_TRUE(std::isfinite(w.held_spin) && std::isfinite(w.held_wake_factor));
}

TEST(Profiler, CountsTheParametersARankHolds) {
  // w is the only parameter (16 x 16 f32); its gradient and activations are not.
  EXPECT_EQ(RankParameterBytes(SmallModule()), 16 * 16 * 4);
}

TEST(Profiler, SummarizeGivesMedianAndInterQuartileRange) {
  SampleStats s = Summarize({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.spread, 2);  // 4 - 2
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
}

}  // namespace
}  // namespace pw::cost
