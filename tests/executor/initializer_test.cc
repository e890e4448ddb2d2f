// Initializers: values are a pure function of (seed, key, full index), so mp shards are
// bit-exact slices of the unsharded tensor.

#include "executor/initializer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "models/gpt.h"

namespace pw {
namespace {

Var NormalVar(const std::string& name, Shape shape, uint64_t seed = 7) {
  Var v;
  v.name = name;
  v.shape = std::move(shape);
  v.persistable = true;
  v.init.kind = Initializer::Kind::kNormal;
  v.init.std = 0.02;
  v.init.seed = seed;
  v.init.key = name;
  return v;
}

bool BitEqual(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

Tensor Materialize(const Var& v) {
  StatusOr<Tensor> t = MaterializeVar(v);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

// Concatenates same-rank f32 tensors along `axis`.
Tensor Concat(const std::vector<Tensor>& parts, int axis) {
  Shape shape = parts[0].shape();
  shape[axis] = 0;
  for (const Tensor& t : parts) shape[axis] += t.dim(axis);
  Tensor out(DataType::kFloat32, shape);
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  float* dst = out.f32();
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& t : parts) {
      int64_t block = t.numel() / outer;
      std::memcpy(dst, t.f32() + o * block, block * sizeof(float));
      dst += block;
    }
  }
  return out;
}

TEST(InitializerTest, DeterministicAndKeyed) {
  Var v = NormalVar("w", {8, 16});
  Tensor a = Materialize(v), b = Materialize(v);
  EXPECT_TRUE(BitEqual(a, b));
  Var renamed = v;
  renamed.name = "other_name";  // same key: same values
  EXPECT_TRUE(BitEqual(a, Materialize(renamed)));
  Var other_key = v;
  other_key.init.key = "w2";
  EXPECT_FALSE(BitEqual(a, Materialize(other_key)));
  Var other_seed = v;
  other_seed.init.seed = 8;
  EXPECT_FALSE(BitEqual(a, Materialize(other_seed)));
  Var empty_key = v;  // an empty key means the var's name
  empty_key.init.key.clear();
  EXPECT_TRUE(BitEqual(a, Materialize(empty_key)));
}

TEST(InitializerTest, NormalHasTheRequestedMoments) {
  Tensor t = Materialize(NormalVar("w", {256, 256}));
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    sum += t.f32()[i];
    sq += double(t.f32()[i]) * t.f32()[i];
  }
  double mean = sum / t.numel(), std = std::sqrt(sq / t.numel() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(std, 0.02, 0.0005);
}

TEST(InitializerTest, UniformStaysInRange) {
  Var v = NormalVar("u", {1000});
  v.init.kind = Initializer::Kind::kUniform;
  v.init.low = -0.5;
  v.init.high = 0.25;
  Tensor t = Materialize(v);
  float lo = 1, hi = -1;
  for (int64_t i = 0; i < t.numel(); ++i)
    lo = std::min(lo, t.f32()[i]), hi = std::max(hi, t.f32()[i]);
  EXPECT_GE(lo, -0.5f);
  EXPECT_LE(hi, 0.25f);
  EXPECT_LT(lo, -0.45f);
  EXPECT_GT(hi, 0.2f);
}

TEST(InitializerTest, ZerosConstantAndNone) {
  Var v = NormalVar("c", {3, 5});
  v.init.kind = Initializer::Kind::kConstant;
  v.init.value = 1.5;
  Tensor c = Materialize(v);
  for (int64_t i = 0; i < c.numel(); ++i) EXPECT_EQ(c.f32()[i], 1.5f);
  v.init.kind = Initializer::Kind::kZeros;
  Tensor z = Materialize(v);
  for (int64_t i = 0; i < z.numel(); ++i) EXPECT_EQ(z.f32()[i], 0.0f);
  v.init = Initializer{};
  EXPECT_EQ(Materialize(v).f32()[14], 0.0f);
  v.dtype = DataType::kInt64;
  v.init.kind = Initializer::Kind::kConstant;
  v.init.value = 3;
  EXPECT_EQ(Materialize(v).i64()[7], 3);
}

TEST(InitializerTest, ShardsAreSlicesOfTheFullTensor) {
  for (int axis : {0, 1, 2}) {
    Var full = NormalVar("t", {4, 6, 8});
    Tensor expected = Materialize(full);
    std::vector<Tensor> parts;
    for (int r = 0; r < 2; ++r) {
      Var shard = full;
      shard.shape[axis] /= 2;
      shard.init.full_shape = full.shape;
      shard.init.shard_axis = axis;
      shard.init.num_shards = 2;
      parts.push_back(Materialize(ShardForRank(shard, r)));
    }
    EXPECT_TRUE(BitEqual(Concat(parts, axis), expected)) << "axis " << axis;
    EXPECT_FALSE(BitEqual(parts[0], parts[1]));
  }
}

TEST(InitializerTest, RejectsInconsistentShards) {
  Var v = NormalVar("t", {4, 3});
  v.init.full_shape = {4, 8};
  v.init.shard_axis = 1;
  v.init.num_shards = 2;
  EXPECT_FALSE(MaterializeVar(v).ok());  // 3 is not 8 / 2
  v.shape = {4, 4};
  v.init.shard_index = 2;
  StatusOr<Tensor> t = MaterializeVar(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("shard_index 2"), std::string::npos);
}

TEST(InitializerTest, ShardForRankLeavesReplicatedVarsAlone) {
  Var v = NormalVar("b", {8});
  EXPECT_EQ(ShardForRank(v, 3), v);
}

// Every parameter of a GPT built with mp=2: rank 0 and rank 1 shards concatenated are
// bit-identical to the parameter of the mp=1 build.
TEST(InitializerTest, GptMp2ShardsConcatenateToMp1Parameters) {
  models::GptConfig c;
  c.layers = 2;
  c.hidden = 16;
  c.heads = 4;
  c.ffn = 32;
  c.seq = 4;
  c.vocab = 20;
  c.seed = 123;
  StatusOr<Module> mp1 = models::BuildGpt(c);
  c.mp = 2;
  StatusOr<Module> mp2 = models::BuildGpt(c);
  ASSERT_TRUE(mp1.ok() && mp2.ok());
  int sharded = 0;
  for (const Var& v : mp2->main_program().vars()) {
    if (!v.is_parameter) continue;
    const Var* full = mp1->main_program().FindVar(v.name);
    ASSERT_NE(full, nullptr) << v.name;
    Tensor expected = Materialize(*full);
    if (v.init.num_shards == 1) {
      EXPECT_TRUE(BitEqual(Materialize(v), expected)) << v.name;
      continue;
    }
    ++sharded;
    Tensor joined = Concat({Materialize(ShardForRank(v, 0)), Materialize(ShardForRank(v, 1))},
                           v.init.shard_axis);
    EXPECT_TRUE(BitEqual(joined, expected)) << v.name;
  }
  // qkv, fc1 weight+bias; proj, fc2 weight per layer; the vocabulary-parallel wte and head
  EXPECT_EQ(sharded, 2 * 6 + 2);
}

}  // namespace
}  // namespace pw
