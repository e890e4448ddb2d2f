// dropout: the Philox generator against its published answers, the mask's determinism and
// statistics, the gradient, and the property sharded models lean on: a rank's slice (heads,
// a sequence shard) draws exactly its part of the unsharded tensor's mask.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "ops/dropout_mask.h"
#include "ops/kernel.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

using ::testing::HasSubstr;

Op DropoutOp(double p, int64_t salt = 0) {
  Op op = MakeOp("dropout", {{"X", {"x"}}, {"Seed", {"seed"}}}, {{"Out", {"out"}}});
  op.SetAttr("p", p).SetAttr("salt", salt);
  return op;
}

Tensor RunDropout(const Op& op, const Tensor& x, int64_t seed, Communicator* comm = nullptr) {
  TensorEnv env;
  env.Set("x", x);
  env.Set("seed", SeedTensor(seed));
  Status s = RunOps({op}, env, comm);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? *env.Find("out") : Tensor();
}

// Random123's known answers for philox4x32 with 10 rounds (kat_vectors).
TEST(Dropout, PhiloxMatchesPublishedAnswers) {
  ops::PhiloxBlock zero = ops::Philox4x32(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(zero.w[0], 0x6627e8d5u);
  EXPECT_EQ(zero.w[1], 0xe169c58du);
  EXPECT_EQ(zero.w[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.w[3], 0x9b00dbd8u);
  const uint32_t f = 0xffffffffu;
  ops::PhiloxBlock ones = ops::Philox4x32(f, f, f, f, f, f);
  EXPECT_EQ(ones.w[0], 0x408f276du);
  EXPECT_EQ(ones.w[1], 0x41c83b0eu);
  EXPECT_EQ(ones.w[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.w[3], 0x6d5451fdu);
}

TEST(Dropout, DropsAboutPAndScalesTheRest) {
  const Tensor x = RandomTensor({64, 1024}, 1, 0.5f, 1.5f);
  for (double p : {0.1, 0.5}) {
    Tensor out = RunDropout(DropoutOp(p), x, 42);
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    int64_t dropped = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (out.f32()[i] == 0.0f) {
        ++dropped;
      } else {
        ASSERT_EQ(out.f32()[i], x.f32()[i] * scale) << i;
      }
    }
    // 65536 draws: the fraction's standard deviation is at most 0.002.
    EXPECT_NEAR(static_cast<double>(dropped) / x.numel(), p, 0.008) << "p " << p;
  }
}

TEST(Dropout, MaskIsAFunctionOfSeedSaltAndIndex) {
  const Tensor x = RandomTensor({8, 33}, 2, 0.5f, 1.5f);
  Tensor a = RunDropout(DropoutOp(0.3), x, 7);
  EXPECT_TRUE(SameBits(a, RunDropout(DropoutOp(0.3), x, 7)));
  EXPECT_FALSE(SameBits(a, RunDropout(DropoutOp(0.3), x, 8)));     // another micro-batch
  EXPECT_FALSE(SameBits(a, RunDropout(DropoutOp(0.3, 1), x, 7)));  // another site
  // The same bits on several kernel threads (the draw depends on the index only), cut
  // whether or not the pool sleeps.
  ops::SetKernelThreads(3);
  ops::cpu::SetWakeAwareCuts(false);
  Tensor big_x = RandomTensor({4, 8192}, 3);
  Tensor threaded = RunDropout(DropoutOp(0.3), big_x, 7);
  ops::cpu::SetWakeAwareCuts(true);
  ops::SetKernelThreads(1);
  EXPECT_TRUE(SameBits(threaded, RunDropout(DropoutOp(0.3), big_x, 7)));
}

// Heads of [B, heads, S, S] probabilities over mp, or a sequence shard of [B, S, H]: each
// rank's mask is its slice of the whole tensor's. Rows of 5 and 3 elements cross Philox's
// four-element groups.
TEST(Dropout, ShardDrawsItsSliceOfTheWholeMask) {
  struct Case {
    Shape shape;
    int axis;
    int shards;
  };
  for (const Case& c : {Case{{2, 4, 5, 5}, 1, 2}, Case{{2, 6, 3}, 1, 3}, Case{{3, 8}, 0, 2}}) {
    const Tensor x = RandomTensor(c.shape, 4, 0.5f, 1.5f);
    const Tensor whole = RunDropout(DropoutOp(0.4, 5), x, 11);
    const int64_t n = c.shape[c.axis] / c.shards;
    for (int r = 0; r < c.shards; ++r) {
      Op op = DropoutOp(0.4, 5);
      op.SetAttr("shard_axis", int64_t{c.axis}).SetAttr("shard_count", int64_t{c.shards});
      GroupMember comm(r, c.shards);
      Tensor got = RunDropout(op, Slice(x, c.axis, r * n, n), 11, &comm);
      EXPECT_TRUE(SameBits(got, Slice(whole, c.axis, r * n, n)))
          << ShapeToString(c.shape) << " axis " << c.axis << " rank " << r;
    }
  }
}

// overlap-row-split's blocks: block b of k equal blocks along an axis, of the whole tensor or
// of a rank's shard along the same axis, draws its rows of the whole tensor's mask.
TEST(Dropout, RowBlockDrawsItsRowsOfTheWholeMask) {
  struct Case {
    Shape shape;
    int axis;
    int shards;
    int blocks;
  };
  for (const Case& c : {Case{{2, 8, 3}, 1, 1, 4}, Case{{6, 5}, 0, 1, 3}, Case{{2, 8, 3}, 1, 2, 2},
                        Case{{12, 4}, 0, 3, 2}}) {
    const Tensor x = RandomTensor(c.shape, 8, 0.5f, 1.5f);
    const Tensor whole = RunDropout(DropoutOp(0.3, 2), x, 21);
    const int64_t shard_rows = c.shape[c.axis] / c.shards, rows = shard_rows / c.blocks;
    for (int r = 0; r < c.shards; ++r)
      for (int b = 0; b < c.blocks; ++b) {
        Op op = DropoutOp(0.3, 2);
        op.SetAttr("shard_axis", int64_t{c.axis}).SetAttr("shard_count", int64_t{c.shards});
        op.SetAttr("block_count", int64_t{c.blocks}).SetAttr("block", int64_t{b});
        GroupMember comm(r, c.shards);
        const int64_t first = r * shard_rows + b * rows;
        Tensor got = RunDropout(op, Slice(x, c.axis, first, rows), 21, &comm);
        EXPECT_TRUE(SameBits(got, Slice(whole, c.axis, first, rows)))
            << ShapeToString(c.shape) << " axis " << c.axis << " rank " << r << " block " << b;
      }
  }
}

TEST(Dropout, GradDrawsTheForwardMaskAgain) {
  GradCheck c;
  c.op = DropoutOp(0.25, 3);
  c.inputs["x"] = RandomTensor({3, 7}, 5);
  c.inputs["seed"] = SeedTensor(99);
  GradCheckResult r = CheckGradients(c);
  ASSERT_EQ(r.grad_ops.size(), 1u);
  EXPECT_EQ(r.grad_ops[0].type, "dropout_grad");
  EXPECT_EQ(r.grad_ops[0].attrs.GetInt("salt"), 3);
  EXPECT_EQ(r.grad_ops[0].Input("Seed"), "seed");
}

TEST(Dropout, BadAttributesAreOneLineErrors) {
  TensorEnv env;
  env.Set("x", RandomTensor({2, 4}, 6));
  env.Set("seed", SeedTensor(1));
  Status s = RunOps({DropoutOp(0.0)}, env);
  EXPECT_THAT(s.message(), HasSubstr("p must be in (0, 1), got 0 (for p = 0 leave the op out)"));
  Op op = DropoutOp(0.1);
  op.SetAttr("shard_count", int64_t{2});
  s = RunOps({op}, env);
  EXPECT_THAT(s.message(), HasSubstr("shard_axis -1 is not an axis of"));
  op.SetAttr("shard_axis", int64_t{1});
  GroupMember three(0, 3);
  s = RunOps({op}, env, &three);
  EXPECT_THAT(s.message(), HasSubstr("shard_count 2 but group 'mp' has 3 members"));
  Op blocked = DropoutOp(0.1);
  blocked.SetAttr("block_count", int64_t{2});
  s = RunOps({blocked}, env);
  EXPECT_THAT(s.message(), HasSubstr("block_count 2 needs one"));
  blocked.SetAttr("shard_axis", int64_t{0}).SetAttr("block", int64_t{2});
  s = RunOps({blocked}, env);
  EXPECT_THAT(s.message(), HasSubstr("block 2 of block_count 2 is not a block"));
  env.Set("seed", RandomTensor({1}, 7));
  s = RunOps({DropoutOp(0.1)}, env);
  EXPECT_THAT(s.message(), HasSubstr("Seed"));
}

}  // namespace
}  // namespace pw::testing
