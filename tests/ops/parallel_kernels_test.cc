// Element-wise work on the kernel threads (ops/kernels/cpu/parallel_for.h): every range
// runs once, loops started from two threads at once both finish, and every kernel that
// splits its work gives the same bits at 1, 2 and 3 threads.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "ops/kernels/cpu/causal_blocks.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

using ops::cpu::ParallelFor;

// Every cut a grain allows, whether or not the pool's threads sleep at that moment.
class KernelThreads : public ::testing::Test {
 protected:
  void SetUp() override { ops::cpu::SetWakeAwareCuts(false); }
  void TearDown() override {
    ops::cpu::SetWakeAwareCuts(true);
    ops::SetKernelThreads(1);
  }
};

TEST_F(KernelThreads, EveryElementRunsOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ops::SetKernelThreads(threads);
    EXPECT_EQ(ops::cpu::KernelThreads(), threads);
    for (int64_t n : {0, 1, 7, 1000, 100003}) {
      for (int64_t grain : {1, 64, 1 << 20}) {
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::atomic<int> ranges{0};
        ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
          ASSERT_LT(begin, end);
          ranges.fetch_add(1);
          for (int64_t i = begin; i < end; ++i) seen[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << i;
        EXPECT_LE(ranges.load(), threads);
        if (grain == 1 && n >= threads) EXPECT_EQ(ranges.load(), threads);
      }
    }
  }
}

// While the pool's thread sleeps, a loop is cut only where each range holds
// kAsleepGrainFactor x its grain; without the rule, by the grain alone.
TEST(WakeAwareCuts, ASleepingPoolAsksLongerRanges) {
  ops::SetKernelThreads(2);
  const int64_t grain = 1000, factor = ops::cpu::kAsleepGrainFactor;
  ParallelFor(4 * grain, grain, [](int64_t, int64_t) {});  // starts the pool thread
  // It sleeps once its spin (microseconds) is over: wait until a cut says so.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ops::cpu::RangesFor(2 * grain, grain) != 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ops::cpu::RangesFor(2 * grain, grain), 1);
  EXPECT_EQ(ops::cpu::RangesFor(2 * factor * grain - 1, grain), 1);
  EXPECT_EQ(ops::cpu::RangesFor(2 * factor * grain, grain), 2);
  ops::cpu::SetWakeAwareCuts(false);
  EXPECT_EQ(ops::cpu::RangesFor(2 * grain, grain), 2);
  ops::cpu::SetWakeAwareCuts(true);
  ops::SetKernelThreads(1);
  EXPECT_EQ(ops::cpu::RangesFor(2 * factor * grain, grain), 1);
}

// A second stream's loop finds the pool busy and runs alone; both are complete.
TEST_F(KernelThreads, LoopsFromTwoThreadsAtOnce) {
  ops::SetKernelThreads(3);
  const int64_t n = 200000;
  std::vector<float> a(n), b(n);
  auto fill = [&](std::vector<float>& v, float value) {
    for (int round = 0; round < 50; ++round)
      ParallelFor(n, 1024, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) v[i] = value + static_cast<float>(round);
      });
  };
  std::thread other([&] { fill(a, 1.f); });
  fill(b, 2.f);
  other.join();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(a[i], 50.f) << i;
    ASSERT_EQ(b[i], 51.f) << i;
  }
}

// A range of attention heads holds at least kMinRangeMacs: a causal head of 70 rows and
// 64 columns does 2 x 64 x (32·32 + 32·64 + 6·70) multiply-adds forward, so three make a
// range (its backward, twice as many, two); the small GPT's heads (16 rows of 16) are never
// worth waking a thread for.
TEST(MacGrain, AttentionHeadsPerRange) {
  const ops::cpu::Blocks causal{ops::cpu::kCausalBlock, true};
  const int64_t head = ops::cpu::HeadMacs(70, 64, causal);
  EXPECT_EQ(head, 2 * 64 * (32 * 32 + 32 * 64 + 6 * 70));
  EXPECT_EQ(ops::cpu::MacGrain(head), 3);
  EXPECT_EQ(ops::cpu::MacGrain(2 * head), 2);
  EXPECT_EQ(ops::cpu::HeadMacs(70, 64, ops::cpu::Blocks{70, false}), 2 * 70 * 70 * 64);
  EXPECT_GT(ops::cpu::MacGrain(ops::cpu::HeadMacs(16, 16, causal)), 2 * 4 * 3);
  EXPECT_EQ(ops::cpu::MacGrain(ops::cpu::kMinRangeMacs), 1);
  EXPECT_EQ(ops::cpu::MacGrain(0), 1);
}

struct Case {
  std::string name;
  std::vector<Op> ops;
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::vector<std::string> outputs;
};

// Shapes large enough to be split at 3 threads, with widths that do not divide evenly.
std::vector<Case> Cases() {
  const Shape rows{301, 517};
  std::vector<Case> cases;
  cases.push_back({"gelu and its grad",
                   {MakeOp("gelu", {{"X", {"x"}}}, {{"Out", {"y"}}}),
                    MakeOp("gelu_grad", {{"X", {"x"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}})},
                   {{"x", RandomTensor(rows, 1, -5, 5)}, {"g", RandomTensor(rows, 2)}},
                   {"y", "dx"}});
  cases.push_back({"add, scale, sum",
                   {MakeOp("add", {{"X", {"x"}}, {"Y", {"z"}}}, {{"Out", {"a"}}}),
                    MakeOp("scale", {{"X", {"a"}}}, {{"Out", {"s"}}}),
                    MakeOp("sum", {{"X", {"x", "z", "s"}}}, {{"Out", {"z"}}})},
                   {{"x", RandomTensor(rows, 3)}, {"z", RandomTensor(rows, 4)}},
                   {"a", "s", "z"}});
  cases.back().ops[1].SetAttr("scale", 0.37);
  cases.back().ops[1].SetAttr("bias", 0.11);
  cases.push_back(
      {"bias_add and its grad",
       {MakeOp("bias_add", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {"y"}}}),
        MakeOp("bias_add_grad", {{"Out@GRAD", {"g"}}}, {{"Bias@GRAD", {"db"}}})},
       {{"x", RandomTensor(rows, 5)}, {"b", RandomTensor({517}, 6)}, {"g", RandomTensor(rows, 7)}},
       {"y", "db"}});
  cases.back().ops[1].SetAttr("bias_shape", std::vector<int64_t>{517});
  cases.push_back(
      {"layer_norm and its grads",
       {MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}},
               {{"Y", {"y"}}, {"Mean", {"m"}}, {"Rstd", {"r"}}}),
        MakeOp(
            "layer_norm_grad",
            {{"X", {"x"}}, {"Scale", {"s"}}, {"Mean", {"m"}}, {"Rstd", {"r"}}, {"Y@GRAD", {"g"}}},
            {{"X@GRAD", {"dx"}}}),
        MakeOp("layer_norm_param_grad",
               {{"X", {"x"}}, {"Mean", {"m"}}, {"Rstd", {"r"}}, {"Y@GRAD", {"g"}}},
               {{"Scale@GRAD", {"ds"}}, {"Bias@GRAD", {"db"}}})},
       {{"x", RandomTensor(rows, 8, -3, 3)},
        {"s", RandomTensor({517}, 9)},
        {"b", RandomTensor({517}, 10)},
        {"g", RandomTensor(rows, 11)}},
       {"y", "m", "r", "dx", "ds", "db"}});
  Op softmax = MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"y"}}});
  softmax.SetAttr("causal", true);
  cases.push_back(
      {"causal softmax and its grad",
       {softmax,
        MakeOp("softmax_grad", {{"Out", {"y"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}})},
       {{"x", RandomTensor({7, 129, 129}, 12, -6, 6)}, {"g", RandomTensor({7, 129, 129}, 13)}},
       {"y", "dx"}});
  cases.push_back({"softmax cross-entropy and its grad",
                   {MakeOp("softmax_cross_entropy", {{"Logits", {"x"}}, {"Label", {"label"}}},
                           {{"Loss", {"loss"}}, {"Softmax", {"p"}}}),
                    MakeOp("softmax_cross_entropy_grad",
                           {{"Softmax", {"p"}}, {"Label", {"label"}}, {"Loss@GRAD", {"dloss"}}},
                           {{"Logits@GRAD", {"dx"}}})},
                   {{"x", RandomTensor(rows, 14, -4, 4)},
                    {"label", RandomIds({301}, 517, 15)},
                    {"dloss", RandomTensor({301}, 16)}},
                   {"loss", "p", "dx"}});
  // Heads run on the pool: 2 x 5 = 10 heads, not a multiple of 3; 70 rows, past two
  // causal blocks of 32; heads of 64, so that 3 heads are worth a range (MacGrain).
  Op attention = MakeOp("attention", {{"QKV", {"qkv"}}}, {{"Out", {"o"}}, {"Probs", {"p"}}});
  attention.SetAttr("num_heads", int64_t{5});
  Op attention_grad =
      MakeOp("attention_grad", {{"QKV", {"qkv"}}, {"Probs", {"p"}}, {"Out@GRAD", {"g"}}},
             {{"QKV@GRAD", {"dqkv"}}});
  attention_grad.SetAttr("num_heads", int64_t{5});
  cases.push_back({"causal attention and its grad",
                   {attention, attention_grad},
                   {{"qkv", RandomTensor({2, 70, 3 * 5 * 64}, 25, -2, 2)},
                    {"g", RandomTensor({2, 70, 5 * 64}, 26)}},
                   {"o", "p", "dqkv"}});
  // Grouped-query attention: forward by query head, backward by kv head (3 groups of 2,
  // times 2 batches: 6 tasks), past two causal blocks, heads of 64 as above.
  Op gqa = MakeOp("gqa_attention", {{"Q", {"q"}}, {"K", {"k"}}, {"V", {"v"}}},
                  {{"Out", {"o"}}, {"Probs", {"p"}}});
  Op gqa_grad =
      MakeOp("gqa_attention_grad",
             {{"Q", {"q"}}, {"K", {"k"}}, {"V", {"v"}}, {"Probs", {"p"}}, {"Out@GRAD", {"g"}}},
             {{"Q@GRAD", {"dq"}}, {"K@GRAD", {"dk"}}, {"V@GRAD", {"dv"}}});
  for (Op* op : {&gqa, &gqa_grad})
    op->SetAttr("num_heads", int64_t{6}).SetAttr("kv_heads", int64_t{3});
  cases.push_back({"grouped-query attention and its grad",
                   {gqa, gqa_grad},
                   {{"q", RandomTensor({2, 70, 6 * 64}, 27, -2, 2)},
                    {"k", RandomTensor({2, 70, 3 * 64}, 28, -2, 2)},
                    {"v", RandomTensor({2, 70, 3 * 64}, 29)},
                    {"g", RandomTensor({2, 70, 6 * 64}, 30)}},
                   {"o", "p", "dq", "dk", "dv"}});
  Op rope = MakeOp("rotary_embedding", {{"X", {"x"}}}, {{"Out", {"y"}}});
  rope.SetAttr("head_dim", int64_t{11 * 2});
  cases.push_back({"rotary embedding", {rope}, {{"x", RandomTensor({7, 200, 22 * 5}, 31)}}, {"y"}});
  cases.push_back(
      {"rms norm, swiglu and their grads",
       {MakeOp("rms_norm", {{"X", {"x"}}, {"Scale", {"s"}}}, {{"Y", {"y"}}, {"Rstd", {"r"}}}),
        MakeOp("rms_norm_grad",
               {{"X", {"x"}}, {"Scale", {"s"}}, {"Rstd", {"r"}}, {"Y@GRAD", {"g"}}},
               {{"X@GRAD", {"dx"}}}),
        MakeOp("rms_norm_param_grad", {{"X", {"x"}}, {"Rstd", {"r"}}, {"Y@GRAD", {"g"}}},
               {{"Scale@GRAD", {"ds"}}}),
        MakeOp("swiglu", {{"Gate", {"x"}}, {"Up", {"g"}}}, {{"Out", {"sw"}}}),
        MakeOp("swiglu_grad", {{"Gate", {"x"}}, {"Up", {"g"}}, {"Out@GRAD", {"y"}}},
               {{"Gate@GRAD", {"dgate"}}, {"Up@GRAD", {"dup"}}})},
       {{"x", RandomTensor(rows, 32, -3, 3)},
        {"s", RandomTensor({517}, 33, 0.5f, 1.5f)},
        {"g", RandomTensor(rows, 34)}},
       {"y", "r", "dx", "ds", "sw", "dgate", "dup"}});
  Op grad = MakeOp("embedding_grad", {{"Ids", {"ids"}}, {"Out@GRAD", {"g"}}}, {{"W@GRAD", {"dw"}}});
  grad.SetAttr("vocab_size", int64_t{37});
  cases.push_back({"embedding and its grad (repeated ids)",
                   {MakeOp("embedding", {{"Ids", {"ids"}}, {"W", {"w"}}}, {{"Out", {"o"}}}), grad},
                   {{"ids", RandomIds({301}, 37, 17)},
                    {"w", RandomTensor({37, 517}, 18)},
                    {"g", RandomTensor(rows, 19)}},
                   {"o", "dw"}});
  cases.push_back(
      {"adam and sgd",
       {AdamOp(), MakeOp("sgd", {{"Param", {"q"}}, {"Grad", {"g"}}}, {{"ParamOut", {"q"}}})},
       {{"p", RandomTensor(rows, 20)},
        {"q", RandomTensor(rows, 21)},
        {"g", RandomTensor(rows, 22)},
        {"m1", RandomTensor(rows, 23)},
        {"m2", RandomTensor(rows, 24, 0, 1)},
        {"b1p", MakeTensor({1}, {0.9f})},
        {"b2p", MakeTensor({1}, {0.999f})}},
       {"p", "m1", "m2", "q"}});
  cases.back().ops[1].SetAttr("lr", 0.01);
  return cases;
}

TEST_F(KernelThreads, SplitKernelsKeepEveryBit) {
  for (const Case& c : Cases()) {
    std::vector<Tensor> one;
    for (int threads : {1, 2, 3}) {
      ops::SetKernelThreads(threads);
      TensorEnv env;
      for (const auto& [name, t] : c.inputs) env.Set(name, t.Clone());
      Status s = RunOps(c.ops, env);
      ASSERT_TRUE(s.ok()) << c.name << ": " << s.ToString();
      for (size_t i = 0; i < c.outputs.size(); ++i) {
        const Tensor* out = env.Find(c.outputs[i]);
        ASSERT_NE(out, nullptr) << c.name << ": " << c.outputs[i];
        if (threads == 1) {
          one.push_back(out->Clone());
          continue;
        }
        ASSERT_EQ(out->nbytes(), one[i].nbytes());
        EXPECT_EQ(std::memcmp(out->raw(), one[i].raw(), out->nbytes()), 0)
            << c.name << ": " << c.outputs[i] << " at " << threads << " threads";
      }
    }
  }
}

// The GEMM cuts C's columns (or, when C is narrow, its rows) across the threads: every
// element is still one dot product summed over K in the same order, so every thread count
// gives the bits of one, also where a cut does not fall on a 16-column line, for every
// transpose, with beta and with leading dims wider than the matrix.
TEST_F(KernelThreads, GemmKeepsEveryBit) {
  struct Shape {
    bool trans_a, trans_b;
    int64_t m, n, k;
  };
  const Shape shapes[] = {{false, false, 512, 1536, 512}, {false, true, 512, 517, 301},
                          {true, false, 301, 700, 129},   {true, true, 1000, 130, 77},
                          {false, false, 2051, 96, 640},  {false, true, 128, 128, 64}};
  std::mt19937 gen(7);
  std::normal_distribution<float> dist;
  for (const Shape& s : shapes) {
    const int64_t pad = 3;  // leading dims wider than the rows they hold
    const int64_t lda = (s.trans_a ? s.m : s.k) + pad, ldb = (s.trans_b ? s.k : s.n) + pad;
    const int64_t ldc = s.n + pad;
    std::vector<float> a((s.trans_a ? s.k : s.m) * lda), b((s.trans_b ? s.n : s.k) * ldb);
    std::vector<float> c0(s.m * ldc);
    for (float& x : a) x = dist(gen);
    for (float& x : b) x = dist(gen);
    for (float& x : c0) x = dist(gen);
    std::vector<float> one;
    for (int threads : {1, 2, 3}) {
      ops::SetKernelThreads(threads);
      std::vector<float> c = c0;
      ops::cpu::Gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f,
                     c.data(), ldc);
      if (threads == 1) {
        one = c;
        continue;
      }
      EXPECT_EQ(std::memcmp(c.data(), one.data(), c.size() * sizeof(float)), 0)
          << s.m << "x" << s.n << "x" << s.k << " trans " << s.trans_a << s.trans_b << " at "
          << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace pw::testing
