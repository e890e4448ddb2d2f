// bf16 and f16: conversions (to nearest even, subnormals, infinities, NaN), dtype
// inference, and every kernel's contract: storage in the low dtype, arithmetic in f32,
// one rounding on store.

#include "ops/low_precision.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "ir/op_def.h"
#include "ops/kernel.h"
#include "ops/registry.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

using ops::Bf16ToFloat;
using ops::F16ToFloat;
using ops::FloatToBf16;
using ops::FloatToF16;
using ::testing::HasSubstr;

TEST(LowPrecision, Bf16RoundsToNearestEven) {
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f)), 1.0f);
  // bf16 has 8 significand bits: at 1.0 its step is 2^-7.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 0x1p-8f)), 1.0f);                // tie: down to even
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);  // tie: up to even
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::max()))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  // A NaN whose payload sits in the low bits must not round to infinity.
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::bit_cast<float>(0x7f800001u)))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-std::numeric_limits<float>::infinity())),
            -std::numeric_limits<float>::infinity());
}

TEST(LowPrecision, F16RoundsToNearestEven) {
  EXPECT_EQ(F16ToFloat(FloatToF16(1.0f + 0x1p-11f)), 1.0f);  // tie: down to even
  EXPECT_EQ(F16ToFloat(FloatToF16(1.0f + 3 * 0x1p-11f)), 1.0f + 0x1p-9f);
  EXPECT_EQ(F16ToFloat(FloatToF16(65504.f)), 65504.f);
  EXPECT_EQ(F16ToFloat(FloatToF16(65519.f)), 65504.f);
  EXPECT_TRUE(std::isinf(F16ToFloat(FloatToF16(65520.f))));  // tie rounds to "65536" = inf
  EXPECT_EQ(F16ToFloat(FloatToF16(0x1p-24f)), 0x1p-24f);     // smallest subnormal
  EXPECT_EQ(F16ToFloat(FloatToF16(0x1p-25f)), 0.f);          // tie: down to zero (even)
  EXPECT_EQ(F16ToFloat(FloatToF16(0x1.8p-25f)), 0x1p-24f);
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(std::nanf("")))));
  EXPECT_EQ(F16ToFloat(FloatToF16(-0.f)), 0.f);
  EXPECT_TRUE(std::signbit(F16ToFloat(FloatToF16(-0.f))));
}

#ifdef __FLT16_MAX__
// The compiler's _Float16 conversions are IEEE's: every f16 value widens the same way, and
// narrowing agrees on random floats of every magnitude.
TEST(LowPrecision, F16MatchesTheCompilersFloat16) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    _Float16 h;
    uint16_t b = static_cast<uint16_t>(bits);
    std::memcpy(&h, &b, 2);
    float want = static_cast<float>(h);
    float got = F16ToFloat(b);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << bits;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << bits;
    }
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    float f = std::bit_cast<float>(any(rng) & 0x8fffffffu | (any(rng) % 50 + 95) << 23);
    _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(FloatToF16(f), want) << f;
  }
}
#endif

// ---- inference ----

Var Decl(const std::string& name, DataType dtype, Shape shape) {
  return Var{.name = name, .dtype = dtype, .shape = std::move(shape)};
}

// Inference of `op` over declared vars: the status and each output slot's first type.
struct Inferred {
  Status status;
  std::map<std::string, TensorType> out;
  bool ok() const { return status.ok(); }
  TensorType Output(const std::string& slot) const { return out.at(slot); }
};

Inferred InferWith(const Op& op, const std::vector<Var>& vars) {
  auto ctx =
      InferOpTypes(*ops::Registry().Find(op.type), op, [&](const std::string& n) -> const Var* {
        for (const Var& v : vars)
          if (v.name == n) return &v;
        return nullptr;
      });
  Inferred r{ctx.status(), {}};
  if (ctx.ok())
    for (const Slot& s : op.outputs) r.out[s.name] = ctx->Output(s.name);
  return r;
}

TEST(LowPrecisionInfer, OutputsFollowTheComputeDtype) {
  Op mm = MakeOp("matmul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"o"}}});
  auto r = InferWith(
      mm, {Decl("x", DataType::kBFloat16, {2, 3}), Decl("w", DataType::kBFloat16, {3, 4})});
  ASSERT_TRUE(r.ok()) << r.status.ToString();
  EXPECT_EQ(r.Output("Out").dtype, DataType::kBFloat16);

  Op ln = MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}},
                 {{"Y", {"y"}}, {"Mean", {"m"}}, {"Rstd", {"r"}}});
  r = InferWith(ln, {Decl("x", DataType::kFloat16, {2, 3}), Decl("s", DataType::kFloat16, {3}),
                     Decl("b", DataType::kFloat16, {3})});
  ASSERT_TRUE(r.ok()) << r.status.ToString();
  EXPECT_EQ(r.Output("Y").dtype, DataType::kFloat16);
  EXPECT_EQ(r.Output("Mean").dtype, DataType::kFloat32);  // statistics stay f32
  EXPECT_EQ(r.Output("Rstd").dtype, DataType::kFloat32);
}

TEST(LowPrecisionInfer, MismatchNamesTheOpAndTheVar) {
  Op mm = MakeOp("matmul", {{"X", {"h"}}, {"Y", {"w"}}}, {{"Out", {"o"}}});
  auto r = InferWith(
      mm, {Decl("h", DataType::kBFloat16, {2, 3}), Decl("w", DataType::kFloat32, {3, 4})});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("matmul: Y ('w') [3, 4] has dtype f32, expected bf16"));

  Op add = MakeOp("bias_add", {{"X", {"ids"}}, {"Bias", {"b"}}}, {{"Out", {"o"}}});
  r = InferWith(add, {Decl("ids", DataType::kInt64, {2, 3}), Decl("b", DataType::kFloat32, {3})});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("bias_add: X ('ids')"));
  EXPECT_THAT(r.status.message(), HasSubstr("expected f32, bf16 or f16"));
}

TEST(LowPrecisionInfer, CastAndFill) {
  Op cast = MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"y"}}});
  cast.SetAttr("dtype", std::string("f16"));
  auto r = InferWith(cast, {Decl("x", DataType::kFloat32, {5})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.Output("Out"), (TensorType{DataType::kFloat16, {5}}));
  cast.SetAttr("dtype", std::string("f8"));
  r = InferWith(cast, {Decl("x", DataType::kFloat32, {5})});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("cast: dtype 'f8' is not f32, bf16 or f16"));

  Op fill = MakeOp("fill_constant", {}, {{"Out", {"z"}}});
  fill.SetAttr("shape", std::vector<int64_t>{2}).SetAttr("dtype", std::string("bf16"));
  r = InferWith(fill, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.Output("Out").dtype, DataType::kBFloat16);
}

TEST(LowPrecisionInfer, CostsCountBytesByDtype) {
  Op mm = MakeOp("matmul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"o"}}});
  const OpDef& def = *ops::Registry().Find("matmul");
  auto cost = [&](DataType dtype) {
    std::vector<Var> vars = {Decl("x", dtype, {8, 16}), Decl("w", dtype, {16, 4})};
    auto ctx = InferOpTypes(def, mm, [&](const std::string& n) -> const Var* {
      return n == "x" ? &vars[0] : &vars[1];
    });
    EXPECT_TRUE(ctx.ok());
    return def.cost(*ctx);
  };
  EXPECT_EQ(cost(DataType::kFloat32).flops, cost(DataType::kBFloat16).flops);
  EXPECT_EQ(cost(DataType::kFloat32).bytes, 2 * cost(DataType::kBFloat16).bytes);
}

// ---- kernels: low-precision storage, f32 arithmetic ----

// `t` (f32) rounded to `dtype`, as a tensor of that dtype; Widen below takes it back to
// f32. Both convert element by element with the scalar conversions the tests above check,
// not through the vector paths the kernels use (ops::StoreFromF32, ops::ToF32), so that a
// fault in those shows.
Tensor Narrow(const Tensor& t, DataType dtype) {
  Tensor out(dtype, t.shape());
  uint16_t* h = out.data<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    h[i] = dtype == DataType::kBFloat16 ? FloatToBf16(t.f32()[i]) : FloatToF16(t.f32()[i]);
  return out;
}

Tensor Widen(const Tensor& t) {
  Tensor out(DataType::kFloat32, t.shape());
  const uint16_t* h = t.data<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    out.f32()[i] = t.dtype() == DataType::kBFloat16 ? Bf16ToFloat(h[i]) : F16ToFloat(h[i]);
  return out;
}

struct KernelCase {
  const char* name;
  Op op;
  std::map<std::string, Tensor> inputs;  // f32; floating ones are stored low
  std::set<std::string> keep_f32;        // inputs that stay f32 (statistics)
};

std::vector<KernelCase> KernelCases() {
  std::vector<KernelCase> cases;
  auto add = [&](const char* name, Op op, std::map<std::string, Tensor> in,
                 std::set<std::string> keep = {}) {
    cases.push_back({name, std::move(op), std::move(in), std::move(keep)});
  };
  add("matmul", MakeOp("matmul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"o"}}}),
      {{"x", RandomTensor({2, 5, 8}, 1)}, {"w", RandomTensor({8, 6}, 2)}});
  Op wg = MakeOp("matmul_weight_grad", {{"X", {"x"}}, {"Out@GRAD", {"g"}}}, {{"Y@GRAD", {"dw"}}});
  add("matmul_weight_grad", wg,
      {{"x", RandomTensor({2, 5, 8}, 3)}, {"g", RandomTensor({2, 5, 6}, 4)}});
  Op attn = MakeOp("attention", {{"QKV", {"qkv"}}}, {{"Out", {"o"}}, {"Probs", {"p"}}});
  attn.SetAttr("num_heads", int64_t{2});
  add("attention", attn, {{"qkv", RandomTensor({2, 4, 12}, 5)}});
  add("layer_norm",
      MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}},
             {{"Y", {"y"}}, {"Mean", {"m"}}, {"Rstd", {"r"}}}),
      {{"x", RandomTensor({3, 8}, 6, -3, 3)},
       {"s", RandomTensor({8}, 7)},
       {"b", RandomTensor({8}, 8)}});
  add("layer_norm_grad",
      MakeOp("layer_norm_grad",
             {{"X", {"x"}}, {"Scale", {"s"}}, {"Mean", {"m"}}, {"Rstd", {"r"}}, {"Y@GRAD", {"g"}}},
             {{"X@GRAD", {"dx"}}}),
      {{"x", RandomTensor({3, 8}, 9)},
       {"s", RandomTensor({8}, 10)},
       {"m", RandomTensor({3}, 11)},
       {"r", RandomTensor({3}, 12, 0.5, 2)},
       {"g", RandomTensor({3, 8}, 13)}},
      {"m", "r"});
  add("gelu", MakeOp("gelu", {{"X", {"x"}}}, {{"Out", {"o"}}}),
      {{"x", RandomTensor({17}, 14, -4, 4)}});
  add("bias_add", MakeOp("bias_add", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {"o"}}}),
      {{"x", RandomTensor({3, 4}, 15)}, {"b", RandomTensor({4}, 16)}});
  add("sum_in_place", MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"b"}}}),
      {{"a", RandomTensor({9}, 17)}, {"b", RandomTensor({9}, 18)}});
  add("mean", MakeOp("mean", {{"X", {"x"}}}, {{"Out", {"o"}}}), {{"x", RandomTensor({33}, 19)}});
  Op softmax = MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}});
  softmax.SetAttr("causal", true);
  add("softmax", softmax, {{"x", RandomTensor({2, 5, 5}, 20, -6, 6)}});
  add("c_allreduce_sum", MakeOp("c_allreduce_sum", {{"X", {"x"}}}, {{"Out", {"o"}}}),
      {{"x", RandomTensor({7}, 21)}});
  return cases;
}

// The low-precision kernel's output equals the f32 kernel's on the rounded inputs, rounded
// once: bit for bit. The expected value comes from the same f32 kernel the low-precision
// path wraps (kernel.cc's RunWidened), so this checks the contract around it (inputs
// widened exactly, arithmetic in f32, one rounding on store, statistics kept f32), not the
// f32 arithmetic, which kernel_test and grad_test check against their own references; the
// widening and rounding here are the scalar ones.
void ExpectStorageLowArithmeticF32(DataType low) {
  for (KernelCase& c : KernelCases()) {
    TensorEnv wide, narrow;
    for (auto& [name, t] : c.inputs) {
      Tensor stored = c.keep_f32.count(name) ? t : Narrow(t, low);
      narrow.Set(name, stored);
      wide.Set(name, c.keep_f32.count(name) ? t : Widen(stored));
    }
    ASSERT_TRUE(RunOps({c.op}, wide).ok()) << c.name;
    Status s = RunOps({c.op}, narrow);
    ASSERT_TRUE(s.ok()) << c.name << ": " << s.ToString();
    c.op.ForEachOutput([&](const std::string& out) {
      const Tensor& got = *narrow.Find(out);
      const Tensor& f32 = *wide.Find(out);
      if (got.dtype() == DataType::kFloat32) {  // statistics: computed in f32
        EXPECT_EQ(std::memcmp(got.raw(), f32.raw(), got.nbytes()), 0) << c.name << " " << out;
        return;
      }
      ASSERT_EQ(got.dtype(), low) << c.name << " " << out;
      Tensor want = Narrow(f32, low);
      EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0) << c.name << " " << out;
    });
  }
}

TEST(LowPrecisionKernels, Bf16StoresLowComputesF32) {
  ExpectStorageLowArithmeticF32(DataType::kBFloat16);
}
TEST(LowPrecisionKernels, F16StoresLowComputesF32) {
  ExpectStorageLowArithmeticF32(DataType::kFloat16);
}

TEST(LowPrecisionKernels, CastRoundsAndWidens) {
  TensorEnv env;
  env.Set("x", MakeTensor({3}, {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -7.f}));
  Op down = MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"b"}}});
  down.SetAttr("dtype", std::string("bf16"));
  Op up = MakeOp("cast", {{"X", {"b"}}}, {{"Out", {"y"}}});
  up.SetAttr("dtype", std::string("f32"));
  Op half = MakeOp("cast", {{"X", {"b"}}}, {{"Out", {"h"}}});
  half.SetAttr("dtype", std::string("f16"));
  ASSERT_TRUE(RunOps({down, up, half}, env).ok());
  EXPECT_EQ(env.Find("b")->dtype(), DataType::kBFloat16);
  const float* y = env.Find("y")->f32();
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f + 0x1p-6f);
  EXPECT_EQ(y[2], -7.f);
  EXPECT_EQ(F16ToFloat(env.Find("h")->data<uint16_t>()[1]), 1.0f + 0x1p-6f);
}

// out_dtype=f32 (amp's weight gradients): the f32 sums of the 16-bit operands, the values
// the 16-bit result rounds; the same GEMM on f32 copies of the operands, bit for bit.
TEST(LowPrecisionKernels, WeightGradInF32IsTheUnroundedSum) {
  for (DataType low : {DataType::kBFloat16, DataType::kFloat16}) {
    TensorEnv env;
    env.Set("x", Narrow(RandomTensor({2, 8, 16}, 31), low));
    env.Set("g", Narrow(RandomTensor({2, 8, 12}, 32), low));
    env.Set("xf", Widen(*env.Find("x")));
    env.Set("gf", Widen(*env.Find("g")));
    auto grad = [](const char* x, const char* g, const char* out) {
      return MakeOp("matmul_weight_grad", {{"X", {x}}, {GradVarName("Out"), {g}}},
                    {{GradVarName("Y"), {out}}});
    };
    Op wide = grad("x", "g", "w32");
    wide.SetAttr("out_dtype", std::string("f32"));
    ASSERT_TRUE(RunOps({wide, grad("x", "g", "w16"), grad("xf", "gf", "ref")}, env).ok());
    const Tensor& w32 = *env.Find("w32");
    ASSERT_EQ(w32.dtype(), DataType::kFloat32);
    EXPECT_EQ(env.Find("w16")->dtype(), low);
    EXPECT_EQ(std::memcmp(w32.f32(), env.Find("ref")->f32(), 16 * 12 * sizeof(float)), 0);
    const Tensor rounded = Widen(*env.Find("w16"));
    EXPECT_EQ(std::memcmp(rounded.f32(), Widen(Narrow(w32, low)).f32(), 16 * 12 * sizeof(float)),
              0);
    int differ = 0;  // the rounding the f32 gradient skips
    for (int i = 0; i < 16 * 12; ++i) differ += w32.f32()[i] != rounded.f32()[i];
    EXPECT_GT(differ, 0);
  }
}

// With Acc (the executors' gradient sum), Y@GRAD = Acc + the f32 product, the bits of the
// separate add it replaces, in place or not; only into an f32 gradient of Acc's shape.
TEST(LowPrecisionKernels, WeightGradAddsItsFinishedProductToAcc) {
  TensorEnv env;
  env.Set("x", Narrow(RandomTensor({2, 8, 16}, 41), DataType::kBFloat16));
  env.Set("g", Narrow(RandomTensor({2, 8, 12}, 42), DataType::kBFloat16));
  env.Set("acc", RandomTensor({16, 12}, 43));
  env.Set("in_place", *env.Find("acc"));
  auto grad = [](const char* out, const char* acc) {
    Op op = MakeOp("matmul_weight_grad", {{"X", {"x"}}, {GradVarName("Out"), {"g"}}},
                   {{GradVarName("Y"), {out}}});
    op.SetAttr("out_dtype", std::string("f32"));
    if (acc) op.SetInput("Acc", {acc});
    return op;
  };
  ASSERT_TRUE(RunOps({grad("p", nullptr),
                      MakeOp("add", {{"X", {"acc"}}, {"Y", {"p"}}}, {{"Out", {"separate"}}}),
                      grad("fused", "acc"), grad("in_place", "in_place")},
                     env)
                  .ok());
  const size_t bytes = 16 * 12 * sizeof(float);
  EXPECT_EQ(std::memcmp(env.Find("fused")->f32(), env.Find("separate")->f32(), bytes), 0);
  EXPECT_EQ(std::memcmp(env.Find("in_place")->f32(), env.Find("separate")->f32(), bytes), 0);

  const OpDef* def = ops::Registry().Find("matmul_weight_grad");
  ASSERT_NE(def, nullptr);
  auto infer = [&](const Op& op, DataType acc, Shape acc_shape) {
    std::map<std::string, Var> vars;
    for (const auto& [name, dtype, shape] : {std::tuple{"x", DataType::kBFloat16, Shape{2, 8, 16}},
                                             std::tuple{"g", DataType::kBFloat16, Shape{2, 8, 12}},
                                             std::tuple{"acc", acc, acc_shape}}) {
      Var& v = vars[name];
      v.name = name, v.dtype = dtype, v.shape = shape;
    }
    return InferOpTypes(*def, op, [&](const std::string& v) -> const Var* {
      auto it = vars.find(v);
      return it == vars.end() ? nullptr : &it->second;
    });
  };
  EXPECT_TRUE(infer(grad("o", "acc"), DataType::kFloat32, {16, 12}).ok());
  StatusOr<InferContext> narrow_acc = infer(grad("o", "acc"), DataType::kBFloat16, {16, 12});
  ASSERT_FALSE(narrow_acc.ok());
  EXPECT_THAT(narrow_acc.status().message(), HasSubstr("Acc adds into an f32 gradient"));
  EXPECT_FALSE(infer(grad("o", "acc"), DataType::kFloat32, {12, 16}).ok());
  Op low_out = grad("o", "acc");
  low_out.attrs.Set("out_dtype", std::string());
  EXPECT_FALSE(infer(low_out, DataType::kFloat32, {16, 12}).ok());
  Op narrow_out = grad("o", nullptr);
  narrow_out.attrs.Set("out_dtype", std::string("bf16"));
  StatusOr<InferContext> refused = infer(narrow_out, DataType::kFloat32, {16, 12});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("out_dtype 'bf16' is not f32"));
  EXPECT_EQ(refused.status().message().find('\n'), std::string::npos);
}

TEST(LowPrecisionKernels, EmbeddingGathersLowRowsAndFillsLowValues) {
  TensorEnv env;
  Tensor w = Narrow(RandomTensor({5, 3}, 22), DataType::kBFloat16);
  env.Set("w", w);
  env.Set("ids", RandomIds({4}, 5, 23));
  Op fill = MakeOp("fill_constant", {}, {{"Out", {"z"}}});
  fill.SetAttr("shape", std::vector<int64_t>{2}).SetAttr("dtype", std::string("f16"));
  fill.SetAttr("value", 0.1);
  ASSERT_TRUE(
      RunOps({MakeOp("embedding", {{"Ids", {"ids"}}, {"W", {"w"}}}, {{"Out", {"o"}}}), fill}, env)
          .ok());
  const auto* o = env.Find("o")->data<uint16_t>();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(std::memcmp(o + 3 * i, w.data<uint16_t>() + 3 * env.Find("ids")->i64()[i], 6), 0);
  EXPECT_EQ(F16ToFloat(env.Find("z")->data<uint16_t>()[1]), F16ToFloat(FloatToF16(0.1f)));
}

}  // namespace
}  // namespace pw::testing
