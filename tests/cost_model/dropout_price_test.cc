// Dropout is priced as the element-wise op it is: every site of one shape is one signature
// (its salt and shard placement choose the mask, not the work), and on a GPU spec it costs
// what an element-wise op moving the same bytes costs.

#include <gtest/gtest.h>

#include "cost_model/kernel_model.h"
#include "cost_model/op_signature.h"
#include "ir/program.h"
#include "ops/registry.h"

namespace pw::cost {
namespace {

Program Probs() {
  Program p("main");
  for (const char* name : {"probs", "out"}) {
    Var v;
    v.name = name;
    v.dtype = DataType::kBFloat16;
    v.shape = {1, 24, 2048, 2048};
    p.AddVar(v);
  }
  Var seed;
  seed.name = "seed";
  seed.dtype = DataType::kInt64;
  seed.shape = {1};
  p.AddVar(seed);
  return p;
}

Op DropoutOn(int64_t salt, int64_t shards) {
  Op op;
  op.type = "dropout";
  op.SetInput("X", {"probs"}).SetInput("Seed", {"seed"}).SetOutput("Out", {"out"});
  op.SetAttr("p", 0.1).SetAttr("salt", salt);
  if (shards > 1) op.SetAttr("shard_axis", int64_t{1}).SetAttr("shard_count", shards);
  return op;
}

TEST(DropoutPrice, EverySiteOfOneShapeIsOneSignatureCostingItsBytes) {
  const Program p = Probs();
  auto find = [&](const std::string& v) { return p.FindVar(v); };
  auto a = SignatureOf(DropoutOn(1, 1), ops::Registry(), find);
  auto b = SignatureOf(DropoutOn(7, 2), ops::Registry(), find);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->key, b->key);
  EXPECT_EQ(a->key.find("salt"), std::string::npos) << a->key;
  const double elements = 24.0 * 2048 * 2048;
  EXPECT_DOUBLE_EQ(a->bytes, 2 * 2 * elements + 8);  // bf16 in and out, the seed

  Op scale;
  scale.type = "scale";
  scale.SetInput("X", {"probs"}).SetOutput("Out", {"out"});
  auto s = SignatureOf(scale, ops::Registry(), find);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (const char* device : {"a100", "h100"}) {
    const DeviceSpec spec = *BuiltinDeviceSpec(device);
    const double dropout = KernelTime(spec, *a), same_bytes = KernelTime(spec, *s);
    EXPECT_GT(dropout, 0) << device;
    EXPECT_NEAR(dropout / same_bytes, 1.0, 0.01) << device;
  }
}

}  // namespace
}  // namespace pw::cost
