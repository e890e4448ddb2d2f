// overlap-1f1b and its pieces: the interleaving of two jobs' ops under a cost model, row
// splits of a matmul (bit-identical on the CPU kernels for every shape tried), segment
// programs, and the pass on a planned GPT: what it pairs, how it cuts, and what it refuses.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "cost_model/device_spec.h"
#include "ir/plan.h"
#include "ir/verifier.h"
#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"
#include "passes/streams/interleave.h"
#include "passes/streams/program_segments.h"
#include "passes/streams/row_split.h"
#include "simulator/simulator.h"
#include "tests/ops/op_runner.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

// ---- Interleave ----

ChainOp Compute(double s, int waits = -1) { return ChainOp{s, false, waits}; }
ChainOp Comm(double s) { return ChainOp{s, true, -1}; }

// Each chain's ops stay in order in the merged order.
void ExpectChainsInOrder(const Interleaving& in, size_t a, size_t b) {
  std::vector<int> next(2, 0);
  for (auto [chain, op] : in.order) EXPECT_EQ(op, next[chain]++);
  EXPECT_EQ(next[0], static_cast<int>(a));
  EXPECT_EQ(next[1], static_cast<int>(b));
}

TEST(InterleaveTest, EachJobsAllReduceRunsUnderTheOthersCompute) {
  // Both jobs: 2 of compute, a 1-long all-reduce, 2 of compute reading it.
  std::vector<ChainOp> job = {Compute(2), Comm(1), Compute(2, 1)};
  Interleaving apart = BackToBack(job, job, {});
  Interleaving together = Interleave(job, job, {});
  EXPECT_DOUBLE_EQ(apart.makespan, 10);  // 2 + 1 (exposed) + 2, twice
  EXPECT_DOUBLE_EQ(apart.exposed, 2);
  EXPECT_DOUBLE_EQ(together.makespan, 8);  // the all-reduces hidden
  EXPECT_DOUBLE_EQ(together.exposed, 0);
  EXPECT_GT(together.segments, 2);
  ExpectChainsInOrder(together, 3, 3);
}

TEST(InterleaveTest, TheSecondOfTwoLikeJobsNeverOvertakesTheFirst) {
  std::vector<ChainOp> job = {Compute(1), Comm(5), Compute(1, 1), Compute(1)};
  InterleaveOptions options;
  options.same_program = true;
  Interleaving in = Interleave(job, job, options);
  std::vector<int> done(2, 0);
  for (auto [chain, op] : in.order) {
    if (chain == 1) EXPECT_LT(op, done[0]) << "op " << op << " of the second job ran first";
    ++done[chain];
  }
  ExpectChainsInOrder(in, 4, 4);
}

TEST(InterleaveTest, ALeadJobFinishesAsEarlyAsAlone) {
  std::vector<ChainOp> lead = {Compute(2), Comm(1), Compute(2, 1), Comm(1), Compute(2, 3)};
  std::vector<ChainOp> filler = {Compute(0.5), Compute(0.5), Compute(0.5), Compute(0.5)};
  InterleaveOptions options;
  options.lead_first = true;
  Interleaving in = Interleave(lead, filler, options);
  // Alone the lead takes 8 (6 of compute, 2 waiting on its all-reduces); the filler's 2
  // fit exactly into its waits, so the pair takes no longer and nothing waits.
  EXPECT_DOUBLE_EQ(BackToBack(lead, {}, options).makespan, 8);
  EXPECT_DOUBLE_EQ(in.makespan, 8);
  EXPECT_DOUBLE_EQ(in.exposed, 0);
  ExpectChainsInOrder(in, 5, 4);
}

// ---- Row splits ----

Program MatmulProgram(const Shape& x, const Shape& w, bool trans_y, bool reduce) {
  Program p("p");
  p.AddVar(Var{"x", DataType::kFloat32, x});
  p.AddVar(Var{"w", DataType::kFloat32, w, true, true});
  Shape out = x;
  out.back() = trans_y ? w[0] : w[1];
  p.AddVar(Var{"out", DataType::kFloat32, out});
  Op mm;
  mm.type = "matmul";
  mm.SetInput("X", {"x"}).SetInput("Y", {"w"}).SetOutput("Out", {"out"});
  mm.SetAttr("trans_x", false).SetAttr("trans_y", trans_y);
  p.AddOp(mm);
  if (reduce) {
    p.AddVar(Var{"y", DataType::kFloat32, out});
    Op ar;
    ar.type = "c_allreduce_sum";
    ar.SetInput("X", {"out"}).SetOutput("Out", {"y"}).SetAttr("group", std::string("mp"));
    p.AddOp(ar);
  }
  return p;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Every output element of a row block is the same dot product, summed over K in the same
// order: the CPU GEMM gives the same bits whatever the number of rows, for blocks of at
// least kMinSplitRows rows and outputs at least kMinSplitColumns wide (below that its
// small-matrix kernels sum in another order for some shapes, so CanSplitRows refuses).
TEST(RowSplitTest, BitIdenticalOnTheCpuKernelsForEveryShapeItAllows) {
  int cases = 0;
  for (int64_t batch : {1, 2})
    for (int64_t m : {64, 96, 128, 256, 512, 2048})
      for (int64_t k : {16, 64, 320, 1024})
        for (int64_t n : {8, 64, 192, 768})
          for (int blocks : {2, 4, 8})
            for (bool trans_y : {false, true}) {
              if (batch * m * k * n > int64_t{1} << 29) continue;  // keeps the test to seconds
              Shape x = {batch, m, k}, w = trans_y ? Shape{n, k} : Shape{k, n};
              Program whole = MatmulProgram(x, w, trans_y, false);
              if (!CanSplitRows(whole, 0, blocks, 1)) continue;
              Program split = whole;
              ASSERT_TRUE(SplitRows(split, 0, blocks).ok());
              TensorEnv a, b;
              for (TensorEnv* env : {&a, &b}) {
                env->Set("x", RandomTensor(x, 1));
                env->Set("w", RandomTensor(w, 2));
              }
              ASSERT_TRUE(RunOps(whole.ops(), a).ok());
              ASSERT_TRUE(RunOps(split.ops(), b).ok());
              EXPECT_TRUE(SameBits(*a.Find("out"), *b.Find("out")))
                  << "batch " << batch << " m " << m << " k " << k << " n " << n << " blocks "
                  << blocks << " trans_y " << trans_y;
              ++cases;
            }
  EXPECT_GT(cases, 150);
  // Where the guard refuses.
  EXPECT_FALSE(CanSplitRows(MatmulProgram({1, 64, 64}, {64, 64}, false, false), 0, 2, 1));
  EXPECT_FALSE(CanSplitRows(MatmulProgram({1, 256, 64}, {64, 16}, false, false), 0, 2, 1));
  EXPECT_TRUE(CanSplitRows(MatmulProgram({2, 64, 64}, {64, 64}, false, false), 0, 2, 1));
}

TEST(RowSplitTest, AMatmulWithItsTwoRankAllReduceAlternatesBlocksAndReductions) {
  Program p = MatmulProgram({1, 256, 32}, {32, 64}, false, true);
  ASSERT_TRUE(CanSplitRowsWithAllReduce(p, 0, 4, 1));  // any group: member-order sums
  ASSERT_TRUE(SplitRowsWithAllReduce(p, 0, 4).ok());
  std::vector<std::string> types;
  for (const Op& op : p.ops()) types.push_back(op.type);
  EXPECT_EQ(types, (std::vector<std::string>{"split", "matmul", "c_allreduce_sum", "matmul",
                                             "c_allreduce_sum", "matmul", "c_allreduce_sum",
                                             "matmul", "c_allreduce_sum", "concat"}));
  EXPECT_EQ(p.ops().back().Output("Out"), "y");  // readers of the reduced value unchanged
  EXPECT_EQ(p.FindVar("out"), nullptr);          // the unreduced whole is gone
  EXPECT_FALSE(CanSplitRows(p, 1, 2, 1));        // 64-row blocks do not split again
}

// A row-parallel linear as the GPT has it: matmul, all-reduce, bias, residual add, then
// a layer norm (not row-wise over the blocks' rows here: it stays whole).
Program RowParallelLinear(const Shape& x) {
  Program p = MatmulProgram(x, {x.back(), 64}, false, true);
  Shape out = x;
  out.back() = 64;
  p.AddVar(Var{"bias", DataType::kFloat32, {64}, true, true});
  p.AddVar(Var{"residual", DataType::kFloat32, out});
  p.AddVar(Var{"biased", DataType::kFloat32, out});
  p.AddVar(Var{"h", DataType::kFloat32, out});
  p.AddVar(Var{"normed", DataType::kFloat32, out});
  Op bias;
  bias.type = "bias_add";
  bias.SetInput("X", {"y"}).SetInput("Bias", {"bias"}).SetOutput("Out", {"biased"});
  p.AddOp(bias);
  Op add;
  add.type = "add";
  add.SetInput("X", {"residual"}).SetInput("Y", {"biased"}).SetOutput("Out", {"h"});
  p.AddOp(add);
  Op scale;
  scale.type = "scale";
  scale.SetInput("X", {"h"}).SetOutput("Out", {"normed"}).SetAttr("scale", 2.0);
  p.AddOp(scale);
  return p;
}

TEST(RowSplitTest, CarriesTheBiasAndResidualAddAfterTheAllReduceIntoTheBlocks) {
  Program p = RowParallelLinear({1, 256, 32});
  ASSERT_EQ(RowWiseTail(p, 0), 2);  // bias_add, add; the scale is not carried
  ASSERT_TRUE(SplitRowsWithAllReduce(p, 0, 2, 2).ok());
  std::vector<std::string> types;
  for (const Op& op : p.ops()) types.push_back(op.type);
  EXPECT_EQ(types, (std::vector<std::string>{"split", "split", "matmul", "c_allreduce_sum",
                                             "matmul", "c_allreduce_sum", "bias_add", "add",
                                             "bias_add", "add", "concat", "scale"}));
  // Both splits are views (one batch); the concat makes the add's output for its readers.
  EXPECT_TRUE(p.ops()[0].attrs.GetBool("view", false));
  EXPECT_EQ(p.ops()[1].Input("X"), "residual");
  EXPECT_TRUE(p.ops()[1].attrs.GetBool("view", false));
  EXPECT_EQ(p.ops()[10].Output("Out"), "h");
  for (const char* gone : {"out", "y", "biased"}) EXPECT_EQ(p.FindVar(gone), nullptr) << gone;
  Status verified = VerifyProgram(p, ops::Registry());
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  EXPECT_FALSE(SplitRowsWithAllReduce(p, 2, 2, 3).ok());  // more than follows

  // What stops the chain: a second reader of the biased value, or an export of it.
  Program read_twice = RowParallelLinear({1, 256, 32});
  read_twice.ops().back().SetInput("X", {"biased"});
  EXPECT_EQ(RowWiseTail(read_twice, 0), 1);
  Program exported = RowParallelLinear({1, 256, 32});
  exported.info().outputs = {"biased"};
  EXPECT_EQ(RowWiseTail(exported, 0), 1);
  // A residual of another shape is not cut into the same blocks.
  Program broadcast = RowParallelLinear({1, 256, 32});
  broadcast.FindVar("residual")->shape = {256, 64};
  EXPECT_EQ(RowWiseTail(broadcast, 0), 1);
}

// With Megatron's fused epilogue the bias and residual add are one bias_dropout_add: it runs
// per block (its residual cut like an add's summand); with dropout each block draws its rows
// of the whole tensor's mask (block and block_count along the rows' axis). A mask already cut
// along another axis (a shard of heads) stops the chain before it.
TEST(RowSplitTest, CarriesAFusedBiasDropoutAndResidualAdd) {
  auto fused = [](double p) {
    Program prog = RowParallelLinear({1, 256, 32});
    std::vector<Op>& ops = prog.ops();
    Op bda;
    bda.type = "bias_dropout_add";
    bda.SetInput("X", {"y"}).SetInput("Bias", {"bias"}).SetInput("Residual", {"residual"});
    bda.SetOutput("Out", {"h"}).SetAttr("p", p);
    if (p > 0) {
      prog.AddVar(Var{"seed", DataType::kInt64, {1}});
      bda.SetInput("Seed", {"seed"});
    }
    ops.erase(ops.begin() + 2, ops.begin() + 4);  // the bias_add and add
    ops.insert(ops.begin() + 2, bda);
    prog.RemoveVarsIf([](const Var& v) { return v.name == "biased"; });
    return prog;
  };
  Program p = fused(0);
  ASSERT_EQ(RowWiseTail(p, 0), 1);
  ASSERT_TRUE(SplitRowsWithAllReduce(p, 0, 2, 1).ok());
  std::vector<std::string> types;
  for (const Op& op : p.ops()) types.push_back(op.type);
  EXPECT_EQ(types, (std::vector<std::string>{"split", "split", "matmul", "c_allreduce_sum",
                                             "matmul", "c_allreduce_sum", "bias_dropout_add",
                                             "bias_dropout_add", "concat", "scale"}));
  EXPECT_EQ(p.ops()[1].Input("X"), "residual");
  EXPECT_NE(p.ops()[6].Input("Residual"), "residual");  // a block of it
  EXPECT_EQ(p.ops()[6].Input("Bias"), "bias");
  Status verified = VerifyProgram(p, ops::Registry());
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  EXPECT_FALSE(p.ops()[6].attrs.Has("block_count"));  // no mask: nothing to place

  Program dropped = fused(0.1);
  ASSERT_EQ(RowWiseTail(dropped, 0), 1);
  ASSERT_TRUE(SplitRowsWithAllReduce(dropped, 0, 2, 1).ok());
  for (int b = 0; b < 2; ++b) {
    const Op& block = dropped.ops()[6 + b];
    ASSERT_EQ(block.type, "bias_dropout_add");
    EXPECT_EQ(block.attrs.GetInt("shard_axis", -1), 1);  // the rows of [1, 256, 64]
    EXPECT_EQ(block.attrs.GetInt("block_count", 1), 2);
    EXPECT_EQ(block.attrs.GetInt("block", -1), b);
    EXPECT_EQ(block.Input("Seed"), "seed");
  }
  verified = VerifyProgram(dropped, ops::Registry());
  EXPECT_TRUE(verified.ok()) << verified.ToString();

  Program heads = fused(0.1);
  heads.ops()[2].SetAttr("shard_axis", int64_t{2}).SetAttr("shard_count", int64_t{2});
  EXPECT_EQ(RowWiseTail(heads, 0), 0);
  Program sequence = fused(0.1);
  sequence.ops()[2].SetAttr("shard_axis", int64_t{1}).SetAttr("shard_count", int64_t{2});
  EXPECT_EQ(RowWiseTail(sequence, 0), 1);  // blocks of a sequence shard: the same axis
}

// The unfused model's chain: bias_add, dropout, add, each per block.
TEST(RowSplitTest, CarriesADropoutBetweenTheBiasAndTheResidualAdd) {
  Program p = RowParallelLinear({2, 128, 32});
  p.AddVar(Var{"seed", DataType::kInt64, {1}});
  p.AddVar(Var{"dropped", DataType::kFloat32, {2, 128, 64}});
  Op dropout;
  dropout.type = "dropout";
  dropout.SetInput("X", {"biased"}).SetInput("Seed", {"seed"}).SetOutput("Out", {"dropped"});
  dropout.SetAttr("p", 0.1).SetAttr("salt", int64_t{3});
  p.ops().insert(p.ops().begin() + 3, dropout);
  p.ops()[4].SetInput("Y", {"dropped"});
  ASSERT_EQ(RowWiseTail(p, 0), 3);
  ASSERT_TRUE(SplitRowsWithAllReduce(p, 0, 2, 3).ok());
  int blocks = 0;
  for (const Op& op : p.ops())
    if (op.type == "dropout") {
      EXPECT_EQ(op.attrs.GetInt("block", -1), blocks++);
      EXPECT_EQ(op.attrs.GetInt("block_count", 1), 2);
      EXPECT_EQ(op.attrs.GetInt("shard_axis", -1), 1);
      EXPECT_EQ(op.attrs.GetInt("salt", 0), 3);
    }
  EXPECT_EQ(blocks, 2);
  Status verified = VerifyProgram(p, ops::Registry());
  EXPECT_TRUE(verified.ok()) << verified.ToString();
}

// Input gradients of two linears sharing their input, summed, then all-reduced: per block
// both matmuls, their sum and its all-reduce, bit-identical on the CPU kernels.
Program SummedLinears() {
  Program p("p");
  for (const char* v : {"a", "b"}) p.AddVar(Var{v, DataType::kFloat32, {1, 256, 32}});
  for (const char* w : {"wa", "wb"}) p.AddVar(Var{w, DataType::kFloat32, {32, 64}, true, true});
  for (const char* v : {"pa", "pb", "sum", "y"}) p.AddVar(Var{v, DataType::kFloat32, {1, 256, 64}});
  for (auto [x, w, out] : {std::tuple{"a", "wa", "pa"}, std::tuple{"b", "wb", "pb"}}) {
    Op mm;
    mm.type = "matmul";
    mm.SetInput("X", {x}).SetInput("Y", {w}).SetOutput("Out", {out});
    p.AddOp(mm);
  }
  Op sum;
  sum.type = "sum";
  sum.SetInput("X", {"pb", "pa"}).SetOutput("Out", {"sum"});
  p.AddOp(sum);
  Op ar;
  ar.type = "c_allreduce_sum";
  ar.SetInput("X", {"sum"}).SetOutput("Out", {"y"}).SetAttr("group", std::string("mp"));
  p.AddOp(ar);
  return p;
}

TEST(RowSplitTest, ASumOfMatmulsWithItsAllReduceAlternatesBlocksAndReductions) {
  Program whole = SummedLinears();
  EXPECT_EQ(SummedMatmuls(whole, 2), 2);
  EXPECT_FALSE(CanSplitRowsWithAllReduce(whole, 1, 2, 1));         // a matmul alone: no
  EXPECT_FALSE(CanSplitRowsOfSumWithAllReduce(whole, 2, 2, 512));  // 128-row blocks: too few
  ASSERT_TRUE(CanSplitRowsOfSumWithAllReduce(whole, 2, 2, 1));
  Program split = whole;
  ASSERT_TRUE(SplitRowsOfSumWithAllReduce(split, 2, 2).ok());
  std::vector<std::string> types;
  for (const Op& op : split.ops()) types.push_back(op.type);
  EXPECT_EQ(types, (std::vector<std::string>{"split", "split", "matmul", "matmul", "sum",
                                             "c_allreduce_sum", "matmul", "matmul", "sum",
                                             "c_allreduce_sum", "concat"}));
  // The block sums add their summands in the sum's order: b's block, then a's.
  EXPECT_NE(split.ops()[4].inputs.front().vars[0].find("pb"), std::string::npos);
  for (const char* gone : {"pa", "pb", "sum"}) EXPECT_EQ(split.FindVar(gone), nullptr) << gone;
  Status verified = VerifyProgram(split, ops::Registry());
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  TensorEnv a, b;
  for (TensorEnv* env : {&a, &b}) {
    env->Set("a", RandomTensor({1, 256, 32}, 1));
    env->Set("b", RandomTensor({1, 256, 32}, 2));
    env->Set("wa", RandomTensor({32, 64}, 3));
    env->Set("wb", RandomTensor({32, 64}, 4));
  }
  ASSERT_TRUE(RunOps(whole.ops(), a).ok());
  ASSERT_TRUE(RunOps(split.ops(), b).ok());
  EXPECT_TRUE(SameBits(*a.Find("y"), *b.Find("y")));

  // A summand read elsewhere too stays whole.
  Program read_twice = SummedLinears();
  Op scale;
  scale.type = "scale";
  read_twice.AddVar(Var{"z", DataType::kFloat32, {1, 256, 64}});
  scale.SetInput("X", {"pa"}).SetOutput("Out", {"z"});
  read_twice.AddOp(scale);
  EXPECT_EQ(SummedMatmuls(read_twice, 2), 0);
}

TEST(RowSplitTest, RefusesWhatWouldChangeResults) {
  Program p = MatmulProgram({1, 256, 32}, {32, 64}, false, false);
  ASSERT_TRUE(CanSplitRows(p, 0, 2, 1));
  p.ops()[0].SetAttr("trans_x", true);  // rows of X^T mix into the reduction
  EXPECT_FALSE(CanSplitRows(p, 0, 2, 1));
  Program w = MatmulProgram({1, 256, 32}, {32, 64}, false, false);
  w.ops()[0].type = "matmul_weight_grad";
  EXPECT_FALSE(CanSplitRows(w, 0, 2, 1));
  EXPECT_FALSE(CanSplitRows(MatmulProgram({1, 256, 32}, {32, 64}, false, false), 0, 3, 1));
}

TEST(RowSplitTest, BlocksAreViewsOfTheirInputWhereTheyLieOneAfterAnother) {
  auto split_of = [](Program p) {
    EXPECT_TRUE(SplitRows(p, 0, 2).ok());
    Status verified = VerifyProgram(p, ops::Registry());
    EXPECT_TRUE(verified.ok()) << verified.ToString();
    return p.ops().front();
  };
  EXPECT_TRUE(
      split_of(MatmulProgram({1, 256, 32}, {32, 64}, false, false)).attrs.GetBool("view", false));
  // Rows of two batches interleave in X: copied.
  EXPECT_FALSE(
      split_of(MatmulProgram({2, 256, 32}, {32, 64}, false, false)).attrs.GetBool("view", false));
  // X written again after the matmul: a view would change with it.
  Program rewritten = MatmulProgram({1, 256, 32}, {32, 64}, false, false);
  Op again;
  again.type = "scale";
  again.SetInput("X", {"x"}).SetOutput("Out", {"x"}).SetAttr("scale", 2.0);
  rewritten.AddOp(again);
  EXPECT_FALSE(SplitsAsView(rewritten, 0));
}

TEST(RowSplitTest, TheVerifierRefusesAViewThatIsNotContiguousOrIsWrittenAfter) {
  Program p = MatmulProgram({2, 256, 32}, {32, 64}, false, false);
  ASSERT_TRUE(SplitRows(p, 0, 2).ok());
  p.ops().front().SetAttr("view", true);
  Status s = VerifyProgram(p, ops::Registry());
  EXPECT_NE(s.message().find("every dim before axis 1 must be 1"), std::string::npos)
      << s.ToString();
  Program q = MatmulProgram({1, 256, 32}, {32, 64}, false, false);
  ASSERT_TRUE(SplitRows(q, 0, 2).ok());
  const std::string block = q.ops().front().outputs.front().vars.front();
  Op again;  // a block scaled in place would scale X's rows too
  again.type = "scale";
  again.SetInput("X", {block}).SetOutput("Out", {block}).SetAttr("scale", 2.0);
  q.AddOp(again);
  s = VerifyProgram(q, ops::Registry());
  EXPECT_NE(s.message().find("shares its bytes with this split{view}"), std::string::npos)
      << s.ToString();
}

// ---- Segments ----

TEST(ProgramSegmentsTest, ASegmentHoldsItsOpsAndSaysWhatCrossesItsEdges) {
  Module m;
  Program p = MatmulProgram({1, 8, 4}, {4, 4}, false, true);
  p.set_name("stage0_forward");
  p.info().kind = "forward";
  p.info().stage = 0;
  m.AddProgram(p);
  ASSERT_TRUE(AddSegmentPrograms(
                  m, {{"stage0_forward", 0, 1}, {"stage0_forward", 1, 2}, {"stage0_forward", 0, 2}})
                  .ok());
  ASSERT_EQ(m.programs().size(), 3u);  // the whole range adds nothing
  const Program* first = m.FindProgram("stage0_forward.seg0_1");
  const Program* second = m.FindProgram("stage0_forward.seg1_2");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->info().segment_of, "stage0_forward");
  EXPECT_EQ(second->info().segment_begin, 1);
  EXPECT_EQ(first->info().kind, "forward");
  EXPECT_EQ(first->info().inputs, std::vector<std::string>{"x"});  // w is a parameter
  EXPECT_EQ(first->info().outputs, std::vector<std::string>{"out"});
  EXPECT_EQ(second->info().inputs, std::vector<std::string>{"out"});
  EXPECT_FALSE(AddSegmentPrograms(m, {{"stage0_forward", 1, 5}}).ok());
  EXPECT_FALSE(AddSegmentPrograms(m, {{"nope", 0, 1}}).ok());
}

// ---- The pass ----

struct PassRun {
  Status status;
  std::map<std::string, int64_t> stats;  // overlap-1f1b's
};

PassRun RunWithCostModel(Module& m, const std::string& pipeline,
                         const std::string& device = "h100") {
  PassManager pm;
  PassContext context(ops::Registry());
  if (!device.empty()) {
    auto estimator = MakeEstimator(device, "");
    EXPECT_TRUE(estimator.ok());
    AttachCostModel(*estimator, context);
  }
  PassRun run;
  run.status = pm.AddPipeline(pipeline);
  if (run.status.ok()) run.status = pm.Run(m, context).status();
  for (const PassStatistics& s : context.statistics())
    if (s.pass == "overlap-1f1b")
      for (const auto& [name, value] : s.counters) run.stats[name] = value;
  return run;
}

Module Planned(const std::string& kind, int vpp = 1, bool split_backward = false,
               models::ChunkPlacement placement = models::ChunkPlacement::kLoop) {
  auto built = models::BuildGpt(SmallGptConfig(2, 2, vpp, placement));
  EXPECT_TRUE(built.ok());
  Module m = std::move(built).value();
  PassRun run = RunWithCostModel(
      m, StrCat("append-backward{optimizer=adam},split-program",
                split_backward ? "{split-backward=true}" : "", ",schedule{kind=", kind,
                ",micro-batches=8},insert-p2p,assign-streams,overlap-column-parallel-backward"));
  EXPECT_TRUE(run.status.ok()) << run.status.ToString();
  return m;
}

TEST(Overlap1F1BTest, FusesBackwardsWithTheForwardsAfterThemAndCutsThemIntoSegments) {
  Module m = Planned("1f1b");
  PassRun run = RunWithCostModel(m, "overlap-1f1b,insert-events");
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  EXPECT_GT(run.stats["pairs-steady"], 0);
  EXPECT_GT(run.stats["forward-collectives-on-mp_fwd_comm"], 0);
  int fused = 0, interleaved = 0;
  for (const RankPlan& rank : m.plan.ranks)
    for (const Job& job : rank.jobs) {
      if (job.kind != JobKind::kOverlapFB) continue;
      ++fused;
      // Each part's ops run once, in order: per (micro-batch, parent) the segments tile it.
      std::map<std::pair<int, std::string>, int> next;
      int switches = 0;
      for (size_t k = 0; k < job.sub_jobs.size(); ++k) {
        const Job& sub = job.sub_jobs[k];
        const Program* p = m.FindProgram(sub.program);
        ASSERT_NE(p, nullptr) << sub.program;
        const std::string parent = p->info().segment_of.empty() ? p->name() : p->info().segment_of;
        const int begin = p->info().segment_of.empty() ? 0 : p->info().segment_begin;
        int& at = next[{sub.micro_batch, parent}];
        EXPECT_EQ(begin, at) << sub.program;
        at = begin + static_cast<int>(p->ops().size());
        if (k && job.sub_jobs[k - 1].micro_batch != sub.micro_batch) ++switches;
      }
      for (const auto& [key, end] : next)
        EXPECT_EQ(end, static_cast<int>(m.FindProgram(key.second)->ops().size())) << key.second;
      interleaved += switches > 1;  // back to back: one switch
    }
  EXPECT_EQ(fused,
            run.stats["pairs-steady"] + run.stats["pairs-warmup"] + run.stats["pairs-cooldown"]);
  EXPECT_EQ(interleaved, run.stats["pairs-interleaved"]);
  EXPECT_GT(run.stats["segment-programs"], 0);
}

// Running forwards earlier buys the fused pairs their slack with activation memory: the
// statistics say how much, and max-forward-shift=0 keeps the memory as it was.
TEST(Overlap1F1BTest, SaysWhatRunningForwardsEarlierCostsInMemoryAndCanBeBounded) {
  Module shifted = Planned("1f1b");
  PassRun run = RunWithCostModel(shifted, "overlap-1f1b,insert-events");
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  const int pipeline_ranks = shifted.mesh.pp;
  EXPECT_GT(run.stats["peak-in-flight-before"], 0);
  EXPECT_GT(run.stats["forwards-earlier"], 0);  // on this model the pairs need the slack
  // Rank 0 runs c * (ranks - 1) more forwards before its first backward.
  EXPECT_EQ(run.stats["peak-in-flight-after"] - run.stats["peak-in-flight-before"],
            run.stats["forwards-earlier"] * (pipeline_ranks - 1));

  Module bounded = Planned("1f1b");
  PassRun kept = RunWithCostModel(bounded, "overlap-1f1b{max-forward-shift=0},insert-events");
  ASSERT_TRUE(kept.status.ok()) << kept.status.ToString();
  EXPECT_EQ(kept.stats["forwards-earlier"], 0);
  EXPECT_EQ(kept.stats["peak-in-flight-after"], kept.stats["peak-in-flight-before"]);
  EXPECT_GT(kept.stats["pairs-steady"], 0);

  Module bad = Planned("1f1b");
  EXPECT_FALSE(RunWithCostModel(bad, "overlap-1f1b{max-forward-shift=-1}").status.ok());
}

TEST(Overlap1F1BTest, RefusesWithoutACostModelAScheduleItCannotPairOrCollectivesOnCompute) {
  Module m = Planned("1f1b");
  PassRun no_model = RunWithCostModel(m, "overlap-1f1b", "");
  ASSERT_FALSE(no_model.status.ok());
  EXPECT_NE(no_model.status.message().find("--device"), std::string::npos);

  Module fthenb = Planned("fthenb");
  PassRun kind = RunWithCostModel(fthenb, "overlap-1f1b");
  ASSERT_FALSE(kind.status.ok());
  EXPECT_NE(kind.status.message().find("'fthenb'"), std::string::npos);

  auto built = models::BuildGpt(SmallGptConfig(2, 2));
  ASSERT_TRUE(built.ok());
  Module on_compute = std::move(built).value();
  PassRun streams = RunWithCostModel(on_compute,
                                     "append-backward,split-program,schedule{kind=1f1b,micro-"
                                     "batches=8},insert-p2p,overlap-1f1b");
  ASSERT_FALSE(streams.status.ok());
  EXPECT_NE(streams.status.message().find("run assign-streams before it"), std::string::npos);
}

TEST(OverlapRowSplitTest, CutsForwardsAndInputGradientsOfPlansWhoseJobsRunAloneOrRefuses) {
  auto count_splits = [](const Module& m, const std::string& kind) {
    int n = 0;
    for (const Program& p : m.programs())
      if (p.info().kind == kind)
        for (const Op& op : p.ops()) n += op.type == "split";
    return n;
  };
  auto row_split_stat = [](const PassContext& context) {
    for (const PassStatistics& s : context.statistics())
      if (s.pass == "overlap-row-split")
        for (const auto& [name, value] : s.counters)
          if (name == "matmuls-split") return value;
    return int64_t{-1};
  };
  // seq 64: 128-row GEMMs (micro-batch size 2), which split into 64-row blocks.
  models::GptConfig config = SmallGptConfig(2, 2);
  config.seq = 64;
  auto gpt = models::BuildGpt(config);
  ASSERT_TRUE(gpt.ok());
  Module zb = std::move(gpt).value();
  ASSERT_TRUE(RunWithCostModel(zb,
                               "append-backward{optimizer=adam},split-program{split-backward="
                               "true},schedule{kind=zb-h1,micro-batches=8},insert-p2p,assign-"
                               "streams,overlap-column-parallel-backward")
                  .status.ok());
  PassManager pm;
  PassContext context(ops::Registry());
  auto estimator = MakeEstimator("h100", "");
  ASSERT_TRUE(estimator.ok());
  AttachCostModel(*estimator, context);
  ASSERT_TRUE(pm.AddPipeline("overlap-row-split{split-ops=all},insert-events").ok());
  Status ran = pm.Run(zb, context).status();
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_GT(count_splits(zb, "forward"), 0);
  EXPECT_GT(count_splits(zb, "backward_input"), 0);
  EXPECT_GT(row_split_stat(context), 0);

  Module no_model = Planned("zb-h1", 1, true);
  PassRun refused = RunWithCostModel(no_model, "overlap-row-split", "");
  ASSERT_FALSE(refused.status.ok());
  EXPECT_NE(refused.status.message().find("--device"), std::string::npos);

  Module paired = Planned("1f1b");
  PassRun after = RunWithCostModel(paired, "overlap-1f1b,overlap-row-split");
  ASSERT_FALSE(after.status.ok());
  EXPECT_NE(after.status.message().find("overlap-1f1b cuts the forwards"), std::string::npos)
      << after.status.ToString();

  auto built = models::BuildGpt(SmallGptConfig(2, 2));
  ASSERT_TRUE(built.ok());
  Module on_compute = std::move(built).value();
  PassRun streams = RunWithCostModel(
      on_compute,
      "append-backward,split-program,schedule{kind=fthenb,micro-batches=8},insert-p2p,"
      "overlap-row-split");
  ASSERT_FALSE(streams.status.ok());
  EXPECT_NE(streams.status.message().find("run assign-streams before it"), std::string::npos);
}

// Beyond two stages a later stage's warm-up forwards get their inputs one after the other;
// where the rank has slack the pass pairs them too, and the simulated step is no longer
// than with no warm-up pairs at all.
TEST(Overlap1F1BTest, PairsALaterStagesWarmUpForwardsWhereTheStepIsNoLonger) {
  auto step_of = [](const std::string& overlap, PassRun& run) {
    auto built = models::BuildGpt(SmallGptConfig(2, 4));
    EXPECT_TRUE(built.ok());
    Module m = std::move(built).value();
    run = RunWithCostModel(m, StrCat("append-backward{optimizer=adam},split-program,"
                                     "schedule{kind=1f1b,micro-batches=8},insert-p2p,"
                                     "assign-streams,overlap-column-parallel-backward,",
                                     overlap, ",insert-events"));
    EXPECT_TRUE(run.status.ok()) << run.status.ToString();
    int later_stage_pairs = 0;
    for (const RankPlan& rank : m.plan.ranks)
      for (const Job& job : rank.jobs)
        later_stage_pairs +=
            job.kind == JobKind::kOverlapFB &&
            std::all_of(job.sub_jobs.begin(), job.sub_jobs.end(), [](const Job& sub) {
              return sub.kind == JobKind::kForward && sub.stage > 0;
            });
    EXPECT_EQ(later_stage_pairs, run.stats["pairs-warmup-later-stages"]);
    auto estimator = MakeEstimator("h100", "");
    EXPECT_TRUE(estimator.ok());
    StatusOr<cost::SimResult> sim = cost::Simulator(*estimator, ops::Registry()).Run(m);
    EXPECT_TRUE(sim.ok()) << sim.status().ToString();
    return sim.ok() ? sim->step_time : 0.0;
  };
  PassRun paired, unpaired;
  const double with_pairs = step_of("overlap-1f1b", paired);
  const double without = step_of("overlap-1f1b{warmup-cooldown=false}", unpaired);
  EXPECT_GT(paired.stats["pairs-warmup-later-stages"], 0);
  EXPECT_GT(paired.stats["pairs-warmup"], paired.stats["pairs-warmup-later-stages"]);
  EXPECT_EQ(unpaired.stats["pairs-warmup"], 0);
  EXPECT_LE(with_pairs, without * (1 + 1e-9));
  // Warm-up forward pairs may be cut evenly (shorter here), except the pair of the step's
  // first micro-batch, which starts the pipeline's fill: it stays lead-first.
  EXPECT_GT(paired.stats["pairs-cut-evenly"], 0);
  EXPECT_LE(paired.stats["pairs-cut-evenly"], paired.stats["pairs-warmup"] - 1);
}

// A GPT-3 175B layer's shape at mp 8 with sequence parallelism, bf16 on the H100 spec: the
// forwards that run alone (warm-up and cool-down) gather and reduce-scatter 2048 tokens x
// 12288 around matmuls of 2048 rows. Their variant cuts those collectives in chunks of every
// member's rows (sequence_chunks.h), the B/F pairs' edge collectives are cut likewise, and
// the plan gets faster for it.
TEST(Overlap1F1BTest, ChunksSequenceParallelCollectivesOfForwardsThatRunAlone) {
  auto step_of = [](const std::string& overlap, PassRun& run) {
    models::GptConfig c;
    c.layers = 2;
    c.hidden = 12288;
    c.heads = 96;
    c.ffn = 49152;
    c.seq = 2048;
    c.vocab = 51200;
    c.micro_batch_size = 1;
    c.mp = 8;
    c.pp = 2;
    auto built = models::BuildGpt(c);
    EXPECT_TRUE(built.ok());
    Module m = std::move(built).value();
    run = RunWithCostModel(m, StrCat("sequence-parallel,append-backward{optimizer=adam},"
                                     "amp{dtype=bf16},split-program,"
                                     "schedule{kind=1f1b,micro-batches=8},insert-p2p,"
                                     "assign-streams,overlap-column-parallel-backward,"
                                     "defer-weight-grads,",
                                     overlap, ",insert-events"));
    EXPECT_TRUE(run.status.ok()) << run.status.ToString();
    auto estimator = MakeEstimator("h100", "");
    EXPECT_TRUE(estimator.ok());
    StatusOr<cost::SimResult> sim = cost::Simulator(*estimator, ops::Registry()).Run(m);
    EXPECT_TRUE(sim.ok()) << sim.status().ToString();
    return sim.ok() ? sim->step_time : 0.0;
  };
  PassRun chunked, whole;
  const double with_chunks = step_of("overlap-1f1b", chunked);
  const double without = step_of("overlap-1f1b{split-ops=off}", whole);
  EXPECT_GT(chunked.stats["sequence-scatters-chunked"], 0);
  EXPECT_GT(chunked.stats["sequence-gathers-chunked"], 0);
  EXPECT_GT(chunked.stats["jobs-on-row-split-variants"], 0);
  // The steady B/F pairs run the edge variants (their first gather and last reduce-scatter
  // in chunks): the pairs are shorter so.
  EXPECT_GT(chunked.stats["paired-jobs-on-edge-variants"], 0);
  EXPECT_EQ(whole.stats["sequence-scatters-chunked"], 0);
  EXPECT_EQ(whole.stats["paired-jobs-on-edge-variants"], 0);
  EXPECT_LT(with_chunks, without);
}

// Forwards run earlier hold more activations. On a device whose memory holds the plan
// without overlap-1f1b but not the pairs with forwards two slots earlier, the pass keeps a
// plan that fits: a smaller shift, or the plan as it was.
TEST(Overlap1F1BTest, KeepsThePlanInTheDevicesMemory) {
  auto planned = [] {
    auto built = models::BuildGpt(SmallGptConfig(2, 4));
    EXPECT_TRUE(built.ok());
    Module m = std::move(built).value();
    PassRun run = RunWithCostModel(m,
                                   "append-backward{optimizer=adam},split-program,"
                                   "schedule{kind=1f1b,micro-batches=8},insert-p2p,"
                                   "assign-streams,overlap-column-parallel-backward");
    EXPECT_TRUE(run.status.ok()) << run.status.ToString();
    return m;
  };
  auto spec = cost::BuiltinDeviceSpec("h100");
  ASSERT_TRUE(spec.ok());
  auto peak = [&](const Module& m) {
    auto estimator = cost::Estimator::Create(*spec, cost::OpCostTable{});
    EXPECT_TRUE(estimator.ok());
    StatusOr<cost::SimResult> sim = cost::Simulator(*estimator, ops::Registry()).Run(m);
    EXPECT_TRUE(sim.ok()) << sim.status().ToString();
    int64_t most = 0;
    for (const cost::RankResult& r : sim->ranks) most = std::max(most, r.peak_bytes);
    return most;
  };
  Module unpaired = planned(), paired = planned();
  ASSERT_TRUE(RunWithCostModel(paired, "overlap-1f1b,insert-events").status.ok());
  const int64_t before = peak(unpaired), after = peak(paired);
  ASSERT_GT(after, before);  // the earlier forwards hold more
  // A device with room for the plan before, not for the pairs' peak.
  spec->set_memory_capacity(spec->memory_reserved() + static_cast<double>(before + after) / 2);
  auto estimator = cost::Estimator::Create(*spec, cost::OpCostTable{});
  ASSERT_TRUE(estimator.ok());
  PassContext context(ops::Registry());
  AttachCostModel(*estimator, context);
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("overlap-1f1b,insert-events").ok());
  Module m = planned();
  ASSERT_TRUE(pm.Run(m, context).ok());
  std::map<std::string, int64_t> stats;
  for (const PassStatistics& s : context.statistics())
    if (s.pass == "overlap-1f1b")
      for (const auto& [name, value] : s.counters) stats[name] = value;
  EXPECT_EQ(stats["forward-shift-lowered-to-fit"] > 0, stats["undone-does-not-fit"] == 0);
  EXPECT_LE(peak(m), static_cast<int64_t>(spec->memory_capacity() - spec->memory_reserved()));
}

TEST(Overlap1F1BTest, InterleavesDualPipesOwnFusedJobs) {
  Module m = Planned("dualpipe-v", 2, true, models::ChunkPlacement::kV);
  PassRun run = RunWithCostModel(m, "overlap-1f1b,insert-events");
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  EXPECT_GT(run.stats["pairs-dualpipe"], 0);
  EXPECT_EQ(run.stats["pairs-steady"], 0);  // dualpipe-v's own pairs, none added
  EXPECT_GT(run.stats["pairs-interleaved"], 0);
}

// ---- defer-weight-grads ----

// The all-gathers sequence parallelism puts before each row-parallel linear's backward
// (on mp_comm, read by a matmul on compute) with weight-gradient work placed between the
// gather and that matmul; and how many there are.
std::pair<int, int> FilledGathers(const Module& m) {
  int filled = 0, gathers = 0;
  for (const Program& p : m.programs()) {
    if (p.info().kind != "backward") continue;
    const std::vector<Op>& ops = p.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].type != "c_all_gather" || ops[i].weight_grad || ops[i].stream.empty()) continue;
      const std::string& gathered = ops[i].Output("Out");
      bool weight_work = false;
      for (size_t k = i + 1; k < ops.size(); ++k) {
        if (ops[k].type == "matmul" && ops[k].Input("X") == gathered) {
          ++gathers;
          filled += weight_work;
          break;
        }
        weight_work = weight_work || (ops[k].weight_grad && ops[k].stream.empty());
      }
    }
  }
  return {filled, gathers};
}

TEST(DeferWeightGradsTest, PutsWeightGradientsUnderTheBackwardsAllGathers) {
  const std::string plan =
      "sequence-parallel,append-backward{optimizer=adam},split-program,schedule{kind=1f1b,"
      "micro-batches=4},insert-p2p,assign-streams,overlap-column-parallel-backward";
  Module plain = *models::BuildGpt(SmallGptConfig(2, 2));
  Module deferred = plain;
  ASSERT_TRUE(RunWithCostModel(plain, plan).status.ok());
  ASSERT_TRUE(RunWithCostModel(deferred, plan + ",defer-weight-grads").status.ok());
  auto [before, gathers] = FilledGathers(plain);
  auto [after, gathers_after] = FilledGathers(deferred);
  ASSERT_GT(gathers, 0);
  EXPECT_EQ(gathers_after, gathers);
  EXPECT_EQ(before, 0);  // append-backward puts the dW matmuls after the reader
  // Every one: the first of each stage's backward gets the dW of the LM head or of the
  // layer after it, the others the previous linear's.
  EXPECT_EQ(after, gathers);
}

}  // namespace
}  // namespace pw::testing
