#include "kernel_cases.h"

#include <cmath>

#include "ir/status.h"
#include "ir/var.h"
#include "ops/low_precision.h"

namespace pw::testing {
namespace {

class Maker {
 public:
  Tensor Uniform(Shape shape, float lo = -1, float hi = 1) {
    Tensor t(DataType::kFloat32, std::move(shape));
    std::uniform_real_distribution<float> u(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = u(rng_);
    return t;
  }
  Tensor Ids(Shape shape, int64_t bound) {
    Tensor t(DataType::kInt64, std::move(shape));
    std::uniform_int_distribution<int64_t> u(0, bound - 1);
    for (int64_t i = 0; i < t.numel(); ++i) t.i64()[i] = u(rng_);
    return t;
  }
  static Tensor Value(Shape shape, float v) {
    Tensor t(DataType::kFloat32, std::move(shape));
    t.Fill(v);
    return t;
  }

 private:
  std::mt19937 rng_{20240611};
};

Op MakeOp(std::string type, std::vector<Slot> inputs, std::vector<Slot> outputs) {
  Op op;
  op.type = std::move(type);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  return op;
}

const std::string kOut = "out";
std::string G(const std::string& v) { return GradVarName(v); }

void AddMatmulCases(Maker& m, std::vector<KernelCase>& cases) {
  struct Shapes {
    const char* name;
    Shape x, y;
    bool tx, ty;
  };
  const Shapes shapes[] = {
      {"matmul_plain", {8, 16}, {16, 12}, false, false},
      {"matmul_trans_x", {16, 8}, {16, 12}, true, false},
      {"matmul_trans_y", {8, 16}, {12, 16}, false, true},
      {"matmul_trans_both", {16, 8}, {12, 16}, true, true},
      {"matmul_batched_shared_y", {3, 8, 16}, {16, 12}, false, false},
      {"matmul_batched_shared_y_trans_x", {3, 16, 8}, {12, 16}, true, true},
      {"matmul_shared_x_batched_y", {8, 16}, {3, 16, 12}, false, false},
      {"matmul_both_batched", {2, 3, 8, 16}, {2, 3, 12, 16}, false, true},
      {"matmul_empty_k", {4, 0}, {0, 5}, false, false},
  };
  for (const Shapes& s : shapes) {
    KernelCase c{s.name, MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("trans_x", s.tx).SetAttr("trans_y", s.ty);
    c.inputs["x"] = m.Uniform(s.x);
    c.inputs["y"] = m.Uniform(s.y);
    c.tolerance = 1e-4;
    cases.push_back(std::move(c));
  }
  const Shapes grads[] = {
      {"matmul_weight_grad", {3, 8, 16}, {3, 8, 12}, false, false},
      {"matmul_weight_grad_trans_y", {3, 8, 16}, {3, 8, 12}, false, true},
      {"matmul_weight_grad_trans_x", {3, 16, 8}, {3, 8, 12}, true, false},
      {"matmul_weight_grad_trans_both", {3, 16, 8}, {3, 8, 12}, true, true},
  };
  for (const Shapes& s : grads) {
    KernelCase c{
        s.name,
        MakeOp("matmul_weight_grad", {{"X", {"x"}}, {G("Out"), {"g"}}}, {{G("Y"), {kOut}}}),
        {}};
    c.op.SetAttr("trans_x", s.tx).SetAttr("trans_y", s.ty);
    c.inputs["x"] = m.Uniform(s.x);
    c.inputs["g"] = m.Uniform(s.y);
    c.tolerance = 1e-4;
    cases.push_back(std::move(c));
  }
}

void AddElementwiseCases(Maker& m, std::vector<KernelCase>& cases) {
  {
    KernelCase c{
        "bias_add", MakeOp("bias_add", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {kOut}}}), {}};
    c.inputs["x"] = m.Uniform({4, 6, 8});
    c.inputs["b"] = m.Uniform({8});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{
        "bias_add_grad", MakeOp("bias_add_grad", {{G("Out"), {"g"}}}, {{G("Bias"), {kOut}}}), {}};
    c.op.SetAttr("bias_shape", std::vector<int64_t>{8});
    c.inputs["g"] = m.Uniform({4, 6, 8});
    cases.push_back(std::move(c));
  }
  {  // a sequence shard's row-group partial sums (ops/defs/row_groups.h)
    KernelCase c{"bias_add_grad_partials",
                 MakeOp("bias_add_grad", {{G("Out"), {"g"}}}, {{G("Bias"), {kOut}}}),
                 {}};
    c.op.SetAttr("bias_shape", std::vector<int64_t>{8}).SetAttr("partial_groups", int64_t{3});
    c.inputs["g"] = m.Uniform({4, 6, 8});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"sum_row_partials",
                 MakeOp("sum_row_partials", {{"X", {"p"}}, {"Param", {"w"}}}, {{"Out", {kOut}}}),
                 {}};
    c.inputs["p"] = m.Uniform({4, 8, 37});
    c.inputs["w"] = m.Uniform({37});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"add", MakeOp("add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {kOut}}}), {}};
    c.inputs["x"] = m.Uniform({5, 7});
    c.inputs["y"] = m.Uniform({5, 7});
    cases.push_back(std::move(c));
  }
  {
    // The accumulation the executor adds: Out is X (in place).
    KernelCase c{
        "add_in_place", MakeOp("add", {{"X", {"acc"}}, {"Y", {"y"}}}, {{"Out", {"acc"}}}), {}};
    c.inputs["acc"] = m.Uniform({5, 7});
    c.inputs["y"] = m.Uniform({5, 7});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"gelu", MakeOp("gelu", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.inputs["x"] = m.Uniform({6, 9}, -4, 4);
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"gelu_grad",
                 MakeOp("gelu_grad", {{"X", {"x"}}, {G("Out"), {"g"}}}, {{G("X"), {kOut}}}),
                 {}};
    c.inputs["x"] = m.Uniform({6, 9}, -4, 4);
    c.inputs["g"] = m.Uniform({6, 9});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"scale", MakeOp("scale", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("scale", 0.125).SetAttr("bias", -0.5);
    c.inputs["x"] = m.Uniform({3, 11});
    cases.push_back(std::move(c));
  }
  {
    // Rows of 9 cross Philox's groups of four; the second case is shard 0 of 2 along axis 1.
    for (int64_t shards : {1, 2}) {
      KernelCase c{shards == 1 ? "dropout" : "dropout_sharded",
                   MakeOp("dropout", {{"X", {"x"}}, {"Seed", {"seed"}}}, {{"Out", {kOut}}}),
                   {}};
      c.op.SetAttr("p", 0.3).SetAttr("salt", int64_t{5});
      if (shards > 1) c.op.SetAttr("shard_axis", int64_t{1}).SetAttr("shard_count", shards);
      c.inputs["x"] = m.Uniform({2, 3, 9});
      c.inputs["seed"] = m.Ids({1}, int64_t{1} << 40);
      cases.push_back(std::move(c));
    }
    {
      // Row block 2 of 3 along axis 1 (overlap-row-split's blocks).
      KernelCase c{"dropout_row_block",
                   MakeOp("dropout", {{"X", {"x"}}, {"Seed", {"seed"}}}, {{"Out", {kOut}}}),
                   {}};
      c.op.SetAttr("p", 0.3).SetAttr("salt", int64_t{5}).SetAttr("shard_axis", int64_t{1});
      c.op.SetAttr("block_count", int64_t{3}).SetAttr("block", int64_t{2});
      c.inputs["x"] = m.Uniform({2, 3, 9});
      c.inputs["seed"] = m.Ids({1}, int64_t{1} << 40);
      cases.push_back(std::move(c));
    }
    KernelCase c{
        "dropout_grad",
        MakeOp("dropout_grad", {{"Seed", {"seed"}}, {G("Out"), {"g"}}}, {{G("X"), {kOut}}}),
        {}};
    c.op.SetAttr("p", 0.3).SetAttr("salt", int64_t{5});
    c.inputs["g"] = m.Uniform({6, 9});
    c.inputs["seed"] = m.Ids({1}, int64_t{1} << 40);
    cases.push_back(std::move(c));
  }
  {
    // Out aliases the second summand, as gradient sums may.
    KernelCase c{"sum_in_place", MakeOp("sum", {{"X", {"a", "b", "c"}}}, {{"Out", {"b"}}}), {}};
    for (const char* v : {"a", "b", "c"}) c.inputs[v] = m.Uniform({4, 5});
    cases.push_back(std::move(c));
  }
  {
    // More summands than one pass of the CUDA kernel takes.
    std::vector<std::string> names;
    for (int i = 0; i < 70; ++i) names.push_back("x" + std::to_string(i));
    KernelCase c{"sum_many", MakeOp("sum", {{"X", names}}, {{"Out", {names[5]}}}), {}};
    for (const std::string& v : names) c.inputs[v] = m.Uniform({3, 4});
    cases.push_back(std::move(c));
  }
}

void AddEmbeddingCases(Maker& m, std::vector<KernelCase>& cases) {
  {
    KernelCase c{
        "embedding", MakeOp("embedding", {{"Ids", {"ids"}}, {"W", {"w"}}}, {{"Out", {kOut}}}), {}};
    c.inputs["ids"] = m.Ids({2, 5}, 13);
    c.inputs["w"] = m.Uniform({13, 8});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{
        "embedding_grad",
        MakeOp("embedding_grad", {{"Ids", {"ids"}}, {G("Out"), {"g"}}}, {{G("W"), {kOut}}}),
        {}};
    c.op.SetAttr("vocab_size", int64_t{6});
    c.inputs["ids"] = m.Ids({3, 7}, 6);  // 21 tokens over 6 rows: repeated ids add up
    c.inputs["g"] = m.Uniform({3, 7, 8});
    cases.push_back(std::move(c));
  }
}

void AddNormCases(Maker& m, std::vector<KernelCase>& cases) {
  Tensor x = m.Uniform({5, 3, 33}, -2, 2);
  {
    KernelCase c{"layer_norm",
                 MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}},
                        {{"Y", {"y"}}, {"Mean", {"mean"}}, {"Rstd", {"rstd"}}}),
                 {}};
    c.inputs["x"] = x;
    c.inputs["s"] = m.Uniform({33});
    c.inputs["b"] = m.Uniform({33});
    cases.push_back(std::move(c));
  }
  Tensor mean(DataType::kFloat32, {15}), rstd(DataType::kFloat32, {15});
  for (int64_t r = 0; r < 15; ++r) {
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < 33; ++j) sum += x.f32()[r * 33 + j];
    for (int64_t j = 0; j < 33; ++j) sq += std::pow(x.f32()[r * 33 + j] - sum / 33, 2);
    mean.f32()[r] = static_cast<float>(sum / 33);
    rstd.f32()[r] = static_cast<float>(1 / std::sqrt(sq / 33 + 1e-5));
  }
  {
    KernelCase c{"layer_norm_grad",
                 MakeOp("layer_norm_grad",
                        {{"X", {"x"}},
                         {"Scale", {"s"}},
                         {"Mean", {"mean"}},
                         {"Rstd", {"rstd"}},
                         {G("Y"), {"dy"}}},
                        {{G("X"), {kOut}}}),
                 {}};
    c.inputs["x"] = x;
    c.inputs["s"] = m.Uniform({33});
    c.inputs["mean"] = mean;
    c.inputs["rstd"] = rstd;
    c.inputs["dy"] = m.Uniform({5, 3, 33});
    cases.push_back(std::move(c));
  }
  for (int variant : {0, 1, 2}) {
    const bool both = variant != 1;
    std::vector<Slot> outs = {{G("Scale"), {"ds"}}};
    if (both) outs.push_back({G("Bias"), {"db"}});
    KernelCase c{
        variant == 0   ? "layer_norm_param_grad"
        : variant == 1 ? "layer_norm_param_grad_scale_only"
                       : "layer_norm_param_grad_partials",
        MakeOp("layer_norm_param_grad",
               {{"X", {"x"}}, {"Mean", {"mean"}}, {"Rstd", {"rstd"}}, {G("Y"), {"dy"}}}, outs),
        {}};
    if (variant == 2) c.op.SetAttr("partial_groups", int64_t{3});
    c.inputs["x"] = x;
    c.inputs["mean"] = mean;
    c.inputs["rstd"] = rstd;
    c.inputs["dy"] = m.Uniform({5, 3, 33});
    cases.push_back(std::move(c));
  }
}

void AddAttentionCases(Maker& m, std::vector<KernelCase>& cases) {
  const int64_t b = 2, s = 7, h = 3, d = 4;
  for (bool causal : {true, false}) {
    KernelCase c{causal ? "attention_causal" : "attention",
                 MakeOp("attention", {{"QKV", {"qkv"}}}, {{"Out", {kOut}}, {"Probs", {"probs"}}}),
                 {}};
    c.op.SetAttr("num_heads", h).SetAttr("causal", causal);
    c.inputs["qkv"] = m.Uniform({b, s, 3 * h * d});
    c.tolerance = 1e-4;
    cases.push_back(std::move(c));
  }
  // Probabilities as a softmax leaves them: zero where a causal mask hides the key (the CPU
  // kernel skips those entries, the CUDA one multiplies by the zero).
  for (bool causal : {true, false}) {
    KernelCase c{
        causal ? "attention_grad_causal" : "attention_grad",
        MakeOp("attention_grad", {{"QKV", {"qkv"}}, {"Probs", {"probs"}}, {G("Out"), {"dout"}}},
               {{G("QKV"), {kOut}}}),
        {}};
    c.op.SetAttr("num_heads", h).SetAttr("causal", causal);
    c.inputs["qkv"] = m.Uniform({b, s, 3 * h * d});
    Tensor probs = m.Uniform({b, h, s, s}, 0, 0.3f);
    if (causal)
      for (int64_t row = 0; row < b * h * s; ++row)
        for (int64_t key = row % s + 1; key < s; ++key) probs.f32()[row * s + key] = 0;
    c.inputs["probs"] = probs;
    c.inputs["dout"] = m.Uniform({b, s, h * d});
    c.tolerance = 1e-4;
    cases.push_back(std::move(c));
  }
}

void AddSoftmaxCases(Maker& m, std::vector<KernelCase>& cases) {
  for (bool causal : {false, true}) {
    KernelCase c{causal ? "softmax_causal" : "softmax",
                 MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {kOut}}}),
                 {}};
    c.op.SetAttr("causal", causal);
    c.inputs["x"] = m.Uniform({2, 3, 6, 6}, -5, 5);
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"softmax_grad",
                 MakeOp("softmax_grad", {{"Out", {"y"}}, {G("Out"), {"dy"}}}, {{G("X"), {kOut}}}),
                 {}};
    c.inputs["y"] = m.Uniform({4, 9}, 0, 0.2f);
    c.inputs["dy"] = m.Uniform({4, 9});
    cases.push_back(std::move(c));
  }
  Tensor labels = m.Ids({2, 5}, 11);
  labels.i64()[3] = -100;  // ignore_index
  {
    KernelCase c{"softmax_cross_entropy",
                 MakeOp("softmax_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
                        {{"Loss", {"loss"}}, {"Softmax", {"probs"}}}),
                 {}};
    c.inputs["logits"] = m.Uniform({2, 5, 11}, -6, 6);
    c.inputs["label"] = labels;
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"softmax_cross_entropy_grad",
                 MakeOp("softmax_cross_entropy_grad",
                        {{"Softmax", {"probs"}}, {"Label", {"label"}}, {G("Loss"), {"dloss"}}},
                        {{G("Logits"), {kOut}}}),
                 {}};
    c.inputs["probs"] = m.Uniform({2, 5, 11}, 0, 0.2f);
    c.inputs["label"] = labels;
    c.inputs["dloss"] = m.Uniform({2, 5});
    cases.push_back(std::move(c));
  }
}

void AddMiscCases(Maker& m, std::vector<KernelCase>& cases) {
  {
    KernelCase c{"mean", MakeOp("mean", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.inputs["x"] = m.Uniform({37, 29});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"mean_grad", MakeOp("mean_grad", {{G("Out"), {"g"}}}, {{G("X"), {kOut}}}), {}};
    c.op.SetAttr("shape", std::vector<int64_t>{7, 9});
    c.inputs["g"] = m.Uniform({});
    cases.push_back(std::move(c));
  }
  for (const char* dtype : {"f32", "i64"}) {
    KernelCase c{
        std::string("fill_constant_") + dtype, MakeOp("fill_constant", {}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("shape", std::vector<int64_t>{3, 5}).SetAttr("dtype", std::string(dtype));
    c.op.SetAttr("value", 7.0);
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"reshape", MakeOp("reshape", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("shape", std::vector<int64_t>{6, 4});
    c.inputs["x"] = m.Uniform({4, 6});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"transpose", MakeOp("transpose", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("perm", std::vector<int64_t>{2, 0, 3, 1});
    c.inputs["x"] = m.Uniform({2, 3, 4, 5});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"transpose_i64", MakeOp("transpose", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("perm", std::vector<int64_t>{1, 0});
    c.inputs["x"] = m.Ids({6, 4}, 1000);
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"split", MakeOp("split", {{"X", {"x"}}}, {{"Out", {"p", "q", "r"}}}), {}};
    c.op.SetAttr("axis", int64_t{1}).SetAttr("sections", std::vector<int64_t>{2, 3, 1});
    c.inputs["x"] = m.Uniform({4, 6, 3});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"concat", MakeOp("concat", {{"X", {"p", "q"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("axis", int64_t{-1});
    c.inputs["p"] = m.Uniform({4, 3, 2});
    c.inputs["q"] = m.Uniform({4, 3, 5});
    cases.push_back(std::move(c));
  }
  for (const char* type : {"c_identity", "c_allreduce_sum"}) {
    KernelCase c{type, MakeOp(type, {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.inputs["x"] = m.Uniform({3, 8});
    cases.push_back(std::move(c));
  }
  {  // a bucket over a group of one: packed into scratch and unpacked
    KernelCase c{"c_allreduce_coalesced",
                 MakeOp("c_allreduce_coalesced", {{"X", {"p", "q"}}}, {{"Out", {kOut, "o2"}}}),
                 {}};
    c.inputs["p"] = m.Uniform({3, 8});
    c.inputs["q"] = m.Uniform({5});
    cases.push_back(std::move(c));
  }
  {  // a reduce-scatter bucket over a group of one: packed and unpacked
    KernelCase c{"c_reduce_scatter_coalesced",
                 MakeOp("c_reduce_scatter_coalesced", {{"X", {"p", "q"}}}, {{"Out", {kOut, "o2"}}}),
                 {}};
    c.op.SetAttr("axis", int64_t{1}).SetAttr("nranks", int64_t{1});
    c.inputs["p"] = m.Uniform({3, 4, 5});
    c.inputs["q"] = m.Uniform({2, 6});
    cases.push_back(std::move(c));
  }
  // Over a group of one (no communicator): the staging and the slice copies of an inner
  // axis, which the transfers use at any group size.
  for (const char* type : {"c_all_gather", "c_reduce_scatter_sum", "c_split", "c_sync_shards"}) {
    KernelCase c{type, MakeOp(type, {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("axis", int64_t{1}).SetAttr("nranks", int64_t{1});
    c.inputs["x"] = m.Uniform({3, 4, 5});
    cases.push_back(std::move(c));
  }
  for (const char* type : {"c_member_concat", "c_member_sum"}) {
    KernelCase c{type, MakeOp(type, {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("axis", int64_t{1}).SetAttr("nranks", int64_t{1});
    c.inputs["x"] = m.Uniform({3, 4, 5});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"c_shift", MakeOp("c_shift", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("nranks", int64_t{1}).SetAttr("offset", int64_t{1});
    c.inputs["x"] = m.Uniform({3, 4, 5});
    cases.push_back(std::move(c));
  }
}

void AddOptimizerCases(Maker& m, std::vector<KernelCase>& cases) {
  {
    KernelCase c{
        "sgd", MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}}, {{"ParamOut", {"p"}}}), {}};
    c.op.SetAttr("lr", 0.05);
    c.inputs["p"] = m.Uniform({5, 6});
    c.inputs["g"] = m.Uniform({5, 6});
    cases.push_back(std::move(c));
  }
  KernelCase c{"adam",
               MakeOp("adam",
                      {{"Param", {"p"}},
                       {"Grad", {"g"}},
                       {"Moment1", {"m1"}},
                       {"Moment2", {"m2"}},
                       {"Beta1Pow", {"b1"}},
                       {"Beta2Pow", {"b2"}}},
                      {{"ParamOut", {"p"}},
                       {"Moment1Out", {"m1"}},
                       {"Moment2Out", {"m2"}},
                       {"Beta1PowOut", {"b1"}},
                       {"Beta2PowOut", {"b2"}}}),
               {}};
  c.op.SetAttr("lr", 0.01);
  c.inputs["p"] = m.Uniform({5, 6});
  c.inputs["g"] = m.Uniform({5, 6});
  c.inputs["m1"] = m.Uniform({5, 6}, -0.1f, 0.1f);
  c.inputs["m2"] = m.Uniform({5, 6}, 0, 0.01f);
  c.inputs["b1"] = Maker::Value({1}, 0.729f);
  c.inputs["b2"] = Maker::Value({1}, 0.997f);
  cases.push_back(std::move(c));
}

}  // namespace

// bf16 and f16: casts, the tensor-core GEMMs (one with a sum over batches, also written in
// f32), a widened
// kernel, a low-precision fill and the max all-reduce. Results are compared in f32 within
// a few steps of the low dtype (the GEMMs' summation order differs from the CPU's).
void AddLowPrecisionCases(Maker& m, std::vector<KernelCase>& cases) {
  auto low = [](const Tensor& t, DataType dtype) {
    Tensor out(dtype, t.shape());
    ops::StoreFromF32(t, out);
    return out;
  };
  for (const char* dtype : {"bf16", "f16", "f32"}) {
    KernelCase c{StrCat("cast_to_", dtype), MakeOp("cast", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
    c.op.SetAttr("dtype", std::string(dtype));
    c.inputs["x"] =
        std::string(dtype) == "f32" ? low(m.Uniform({37}), DataType::kBFloat16) : m.Uniform({37});
    cases.push_back(std::move(c));
  }
  for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16}) {
    const std::string name = DataTypeName(dtype);
    KernelCase mm{"matmul_batched_" + name,
                  MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {kOut}}}),
                  {},
                  2e-2};
    mm.inputs["x"] = low(m.Uniform({2, 3, 8, 16}), dtype);
    mm.inputs["y"] = low(m.Uniform({2, 3, 16, 12}), dtype);
    cases.push_back(std::move(mm));
    KernelCase wg{
        "matmul_weight_grad_trans_x_" + name,
        MakeOp("matmul_weight_grad", {{"X", {"x"}}, {G("Out"), {"g"}}}, {{G("Y"), {"dy"}}}),
        {},
        2e-2};
    wg.op.SetAttr("trans_x", true);
    wg.inputs["x"] = low(m.Uniform({3, 16, 8}), dtype);
    wg.inputs["g"] = low(m.Uniform({3, 8, 12}), dtype);
    // amp's weight gradient: the f32 sums of the 16-bit operands, unrounded.
    KernelCase wide = wg;
    wide.name = "matmul_weight_grad_" + name + "_f32_out";
    wide.op.SetAttr("out_dtype", std::string("f32"));
    wide.tolerance = 1e-4;
    cases.push_back(std::move(wg));
    cases.push_back(std::move(wide));
    KernelCase ln{"layer_norm_" + name,
                  MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}},
                         {{"Y", {"y"}}, {"Mean", {"mean"}}, {"Rstd", {"rstd"}}}),
                  {},
                  1e-2};
    ln.inputs["x"] = low(m.Uniform({4, 32}), dtype);
    ln.inputs["s"] = low(m.Uniform({32}), dtype);
    ln.inputs["b"] = low(m.Uniform({32}), dtype);
    cases.push_back(std::move(ln));
    KernelCase fill{"fill_constant_" + name, MakeOp("fill_constant", {}, {{"Out", {kOut}}}), {}};
    fill.op.SetAttr("shape", std::vector<int64_t>{5}).SetAttr("dtype", name).SetAttr("value", 0.3);
    cases.push_back(std::move(fill));
    KernelCase sum{"c_allreduce_sum_" + name,
                   MakeOp("c_allreduce_sum", {{"X", {"x"}}}, {{"Out", {kOut}}}),
                   {}};
    sum.inputs["x"] = low(m.Uniform({9}), dtype);
    cases.push_back(std::move(sum));
  }
  KernelCase max{
      "c_allreduce_max", MakeOp("c_allreduce_max", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
  max.inputs["x"] = m.Uniform({9});
  cases.push_back(std::move(max));
}

// Rank 0's shard (no communicator) of a vocabulary twice its rows: ids and labels in
// both halves, so the masked rows and columns are exercised.
void AddVocabParallelCases(Maker& m, std::vector<KernelCase>& cases) {
  const int64_t rows = 6, vocab = 12, h = 5;
  KernelCase emb{"c_embedding",
                 MakeOp("c_embedding", {{"Ids", {"ids"}}, {"W", {"w"}}}, {{"Out", {kOut}}}),
                 {}};
  emb.op.SetAttr("vocab_size", vocab);
  emb.inputs["ids"] = m.Ids({2, 7}, vocab);
  emb.inputs["w"] = m.Uniform({rows, h});
  cases.push_back(std::move(emb));
  KernelCase emb_grad{
      "c_embedding_grad",
      MakeOp("c_embedding_grad", {{"Ids", {"ids"}}, {G("Out"), {"g"}}}, {{G("W"), {"dw"}}}),
      {}};
  emb_grad.op.SetAttr("rows", rows).SetAttr("vocab_size", vocab);
  emb_grad.inputs["ids"] = m.Ids({2, 7}, vocab);
  emb_grad.inputs["g"] = m.Uniform({2, 7, h});
  cases.push_back(std::move(emb_grad));
  KernelCase max{"reduce_max", MakeOp("reduce_max", {{"X", {"x"}}}, {{"Out", {kOut}}}), {}};
  max.inputs["x"] = m.Uniform({3, 4, rows}, -3, 3);
  cases.push_back(std::move(max));
  Tensor logits = m.Uniform({3, 4, rows}, -3, 3);
  Tensor shift = m.Uniform({3, 4}, 2, 3);
  Tensor labels = m.Ids({3, 4}, vocab);
  KernelCase stats{"c_softmax_stats",
                   MakeOp("c_softmax_stats", {{"Logits", {"x"}}, {"Max", {"m"}}, {"Label", {"l"}}},
                          {{"SumExp", {"s"}}, {"TargetLogit", {"t"}}}),
                   {}};
  stats.op.SetAttr("vocab_size", vocab);
  stats.inputs = {{"x", logits}, {"m", shift}, {"l", labels}};
  cases.push_back(std::move(stats));
  KernelCase ce{"c_softmax_cross_entropy",
                MakeOp("c_softmax_cross_entropy",
                       {{"Logits", {"x"}},
                        {"Max", {"m"}},
                        {"SumExp", {"s"}},
                        {"TargetLogit", {"t"}},
                        {"Label", {"l"}}},
                       {{"Loss", {"loss"}}, {"Softmax", {"p"}}}),
                {}};
  ce.inputs = {{"x", logits},
               {"m", shift},
               {"s", m.Uniform({3, 4}, 1, 4)},
               {"t", m.Uniform({3, 4}, -1, 0)},
               {"l", labels}};
  cases.push_back(std::move(ce));
  KernelCase ce_grad{
      "c_softmax_cross_entropy_grad",
      MakeOp("c_softmax_cross_entropy_grad",
             {{"Softmax", {"p"}}, {"Label", {"l"}}, {G("Loss"), {"d"}}}, {{G("Logits"), {"dx"}}}),
      {}};
  ce_grad.inputs = {{"p", m.Uniform({3, 4, rows}, 0, 1)}, {"l", labels}, {"d", m.Uniform({3, 4})}};
  cases.push_back(std::move(ce_grad));
}

// Loss scaling: an unscale with an inf among its gradients, the scale's update after an
// overflow, and updates skipped by the flag.
void AddLossScalingCases(Maker& m, std::vector<KernelCase>& cases) {
  KernelCase check{"check_finite_and_unscale",
                   MakeOp("check_finite_and_unscale", {{"X", {"a", "b"}}, {"Scale", {"s"}}},
                          {{"Out", {"ua", "ub"}}, {"FoundInfinite", {"found"}}}),
                   {}};
  check.inputs["a"] = m.Uniform({7});
  check.inputs["b"] = m.Uniform({3, 5});
  check.inputs["b"].f32()[4] = INFINITY;
  check.inputs["s"] = Maker::Value({}, 1024);
  cases.push_back(std::move(check));
  KernelCase update{
      "update_loss_scaling",
      MakeOp("update_loss_scaling",
             {{"FoundInfinite", {"f"}},
              {"LossScale", {"s"}},
              {"GoodSteps", {"g"}},
              {"SkippedSteps", {"k"}}},
             {{"LossScaleOut", {"s"}}, {"GoodStepsOut", {"g"}}, {"SkippedStepsOut", {"k"}}}),
      {}};
  update.op.SetAttr("growth_interval", int64_t{2})
      .SetAttr("growth_factor", 2.0)
      .SetAttr("backoff_factor", 0.5);
  update.inputs = {{"f", Maker::Value({}, 1)},
                   {"s", Maker::Value({}, 1024)},
                   {"g", Maker::Value({}, 3)},
                   {"k", Maker::Value({}, 0)}};
  cases.push_back(std::move(update));
  KernelCase sgd{"sgd_skipped",
                 MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}, {"SkipUpdate", {"skip"}}},
                        {{"ParamOut", {"p"}}}),
                 {}};
  sgd.op.SetAttr("lr", 0.5);
  sgd.inputs = {{"p", m.Uniform({6})}, {"g", m.Uniform({6})}, {"skip", Maker::Value({}, 1)}};
  cases.push_back(std::move(sgd));
  // copy_unless in words (f32) and in bytes (three bf16 values: 6 bytes).
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
    KernelCase copy{StrCat("copy_unless_", DataTypeName(dtype)),
                    MakeOp("copy_unless", {{"X", {"x"}}, {"Skip", {"skip"}}}, {{"Out", {kOut}}}),
                    {}};
    Tensor x(dtype, dtype == DataType::kFloat32 ? Shape{37} : Shape{3});
    ops::StoreFromF32(m.Uniform(x.shape()), x);
    copy.inputs = {{"x", x}, {"skip", Maker::Value({}, 0)}};
    cases.push_back(std::move(copy));
  }
}

// The Llama ops: RMSNorm, SwiGLU, rotary embeddings and grouped-query attention.
void AddLlamaCases(Maker& m, std::vector<KernelCase>& cases) {
  Tensor x = m.Uniform({5, 3, 33}, -2, 2);
  Tensor scale = m.Uniform({33}, 0.5f, 1.5f);
  Tensor rstd = m.Uniform({15}, 0.5f, 1.5f);
  {
    KernelCase c{
        "rms_norm",
        MakeOp("rms_norm", {{"X", {"x"}}, {"Scale", {"s"}}}, {{"Y", {kOut}}, {"Rstd", {"rstd"}}}),
        {}};
    c.inputs["x"] = x;
    c.inputs["s"] = scale;
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"rms_norm_grad",
                 MakeOp("rms_norm_grad",
                        {{"X", {"x"}}, {"Scale", {"s"}}, {"Rstd", {"rstd"}}, {G("Y"), {"dy"}}},
                        {{G("X"), {kOut}}}),
                 {}};
    c.inputs["x"] = x;
    c.inputs["s"] = scale;
    c.inputs["rstd"] = rstd;
    c.inputs["dy"] = m.Uniform({5, 3, 33});
    cases.push_back(std::move(c));
  }
  for (int64_t partials : {0, 3}) {
    KernelCase c{partials ? "rms_norm_param_grad_partials" : "rms_norm_param_grad",
                 MakeOp("rms_norm_param_grad", {{"X", {"x"}}, {"Rstd", {"rstd"}}, {G("Y"), {"dy"}}},
                        {{G("Scale"), {kOut}}}),
                 {}};
    c.op.SetAttr("partial_groups", partials);
    c.inputs["x"] = x;
    c.inputs["rstd"] = rstd;
    c.inputs["dy"] = m.Uniform({5, 3, 33});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{
        "swiglu", MakeOp("swiglu", {{"Gate", {"a"}}, {"Up", {"b"}}}, {{"Out", {kOut}}}), {}};
    c.inputs["a"] = m.Uniform({6, 35}, -12, 12);
    c.inputs["b"] = m.Uniform({6, 35});
    cases.push_back(std::move(c));
  }
  for (bool both : {true, false}) {
    std::vector<Slot> outs = {{G("Up"), {"dup"}}};
    if (both) outs.insert(outs.begin(), {G("Gate"), {kOut}});
    KernelCase c{both ? "swiglu_grad" : "swiglu_grad_up_only",
                 MakeOp("swiglu_grad", {{"Gate", {"a"}}, {"Up", {"b"}}, {G("Out"), {"dy"}}}, outs),
                 {}};
    c.inputs["a"] = m.Uniform({6, 35}, -12, 12);
    c.inputs["b"] = m.Uniform({6, 35});
    c.inputs["dy"] = m.Uniform({6, 35});
    cases.push_back(std::move(c));
  }
  for (bool inverse : {false, true}) {
    KernelCase c{inverse ? "rotary_embedding_inverse" : "rotary_embedding",
                 MakeOp("rotary_embedding", {{"X", {"x"}}}, {{"Out", {kOut}}}),
                 {}};
    c.op.SetAttr("head_dim", int64_t{6}).SetAttr("theta", 500000.0).SetAttr("inverse", inverse);
    c.inputs["x"] = m.Uniform({2, 9, 18});
    cases.push_back(std::move(c));
  }
  const int64_t b = 2, s = 7, h = 4, g = 2, d = 4;
  for (bool causal : {true, false}) {
    KernelCase c{causal ? "gqa_attention_causal" : "gqa_attention",
                 MakeOp("gqa_attention", {{"Q", {"q"}}, {"K", {"k"}}, {"V", {"v"}}},
                        {{"Out", {kOut}}, {"Probs", {"probs"}}}),
                 {}};
    c.op.SetAttr("num_heads", h).SetAttr("kv_heads", g).SetAttr("causal", causal);
    c.inputs["q"] = m.Uniform({b, s, h * d});
    c.inputs["k"] = m.Uniform({b, s, g * d});
    c.inputs["v"] = m.Uniform({b, s, g * d});
    c.tolerance = 1e-4;
    cases.push_back(std::move(c));
  }
  // Probabilities zero where a causal mask hides the key, as a softmax leaves them.
  for (bool causal : {true, false}) {
    KernelCase c{
        causal ? "gqa_attention_grad_causal" : "gqa_attention_grad",
        MakeOp(
            "gqa_attention_grad",
            {{"Q", {"q"}}, {"K", {"k"}}, {"V", {"v"}}, {"Probs", {"probs"}}, {G("Out"), {"dout"}}},
            {{G("Q"), {kOut}}, {G("K"), {"dk"}}, {G("V"), {"dv"}}}),
        {}};
    c.op.SetAttr("num_heads", h).SetAttr("kv_heads", g).SetAttr("causal", causal);
    c.inputs["q"] = m.Uniform({b, s, h * d});
    c.inputs["k"] = m.Uniform({b, s, g * d});
    c.inputs["v"] = m.Uniform({b, s, g * d});
    Tensor probs = m.Uniform({b, h, s, s}, 0, 0.3f);
    if (causal)
      for (int64_t row = 0; row < b * h * s; ++row)
        for (int64_t key = row % s + 1; key < s; ++key) probs.f32()[row * s + key] = 0;
    c.inputs["probs"] = probs;
    c.inputs["dout"] = m.Uniform({b, s, h * d});
    c.tolerance = 1e-4;
    cases.push_back(std::move(c));
  }
}

// bias_gelu, bias_dropout_add and their grads: rows of 9 against a bias of 9 (Philox's groups
// of four cross the rows), the dropout whole and as shard 0 of 2 along the sequence, p 0
// without a seed, a grad with only the bias output, and row-group partial sums.
void AddBiasFusionCases(Maker& m, std::vector<KernelCase>& cases) {
  const Tensor x = m.Uniform({2, 4, 9}, -3, 3), bias = m.Uniform({9}), dy = m.Uniform({2, 4, 9});
  {
    KernelCase c{
        "bias_gelu", MakeOp("bias_gelu", {{"X", {"x"}}, {"Bias", {"b"}}}, {{"Out", {kOut}}}), {}};
    c.inputs = {{"x", x}, {"b", bias}};
    cases.push_back(std::move(c));
  }
  for (bool both : {true, false}) {
    std::vector<Slot> outs = {{G("Bias"), {"db"}}};
    if (both) outs.insert(outs.begin(), {G("X"), {kOut}});
    KernelCase c{
        both ? "bias_gelu_grad" : "bias_gelu_grad_bias_only",
        MakeOp("bias_gelu_grad", {{"X", {"x"}}, {"Bias", {"b"}}, {G("Out"), {"dy"}}}, outs),
        {}};
    c.inputs = {{"x", x}, {"b", bias}, {"dy", dy}};
    cases.push_back(std::move(c));
  }
  for (int64_t shards : {1, 2, 0}) {  // 0: p 0, no seed
    std::vector<Slot> ins = {{"X", {"x"}}, {"Bias", {"b"}}, {"Residual", {"r"}}};
    if (shards > 0) ins.push_back({"Seed", {"seed"}});
    KernelCase c{shards == 1   ? "bias_dropout_add"
                 : shards == 2 ? "bias_dropout_add_sharded"
                               : "bias_dropout_add_no_dropout",
                 MakeOp("bias_dropout_add", ins, {{"Out", {kOut}}}),
                 {}};
    c.op.SetAttr("p", shards > 0 ? 0.3 : 0.0).SetAttr("salt", int64_t{5});
    if (shards > 1) c.op.SetAttr("shard_axis", int64_t{1}).SetAttr("shard_count", shards);
    c.inputs = {{"x", x}, {"b", bias}, {"r", dy}};
    if (shards > 0) c.inputs["seed"] = m.Ids({1}, int64_t{1} << 40);
    cases.push_back(std::move(c));
  }
  for (int64_t partials : {0, 4}) {
    KernelCase c{partials ? "bias_dropout_add_grad_partials" : "bias_dropout_add_grad",
                 MakeOp("bias_dropout_add_grad", {{"Seed", {"seed"}}, {G("Out"), {"dy"}}},
                        {{G("X"), {kOut}}, {G("Bias"), {"db"}}}),
                 {}};
    c.op.SetAttr("p", 0.3).SetAttr("salt", int64_t{5}).SetAttr("bias_shape", Shape{9});
    c.op.SetAttr("partial_groups", partials);
    c.inputs = {{"dy", dy}, {"seed", m.Ids({1}, int64_t{1} << 40)}};
    cases.push_back(std::move(c));
  }
}

std::vector<KernelCase> KernelCases() {
  Maker m;
  std::vector<KernelCase> cases;
  AddMatmulCases(m, cases);
  AddElementwiseCases(m, cases);
  AddEmbeddingCases(m, cases);
  AddNormCases(m, cases);
  AddAttentionCases(m, cases);
  AddSoftmaxCases(m, cases);
  AddMiscCases(m, cases);
  AddLowPrecisionCases(m, cases);
  AddVocabParallelCases(m, cases);
  AddLossScalingCases(m, cases);
  AddOptimizerCases(m, cases);
  AddLlamaCases(m, cases);
  AddBiasFusionCases(m, cases);
  return cases;
}

std::vector<KernelCase> BadInputCases() {
  Maker m;
  std::vector<KernelCase> cases;
  {
    KernelCase c{"embedding_bad_id",
                 MakeOp("embedding", {{"Ids", {"ids"}}, {"W", {"w"}}}, {{"Out", {kOut}}}),
                 {}};
    c.inputs["ids"] = m.Ids({2, 5}, 13);
    c.inputs["ids"].i64()[6] = 13;
    c.inputs["w"] = m.Uniform({13, 8});
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{
        "embedding_grad_bad_id",
        MakeOp("embedding_grad", {{"Ids", {"ids"}}, {G("Out"), {"g"}}}, {{G("W"), {kOut}}}),
        {}};
    c.op.SetAttr("vocab_size", int64_t{6});
    c.inputs["ids"] = m.Ids({3, 7}, 6);
    c.inputs["ids"].i64()[4] = -2;
    c.inputs["g"] = m.Uniform({3, 7, 8});
    cases.push_back(std::move(c));
  }
  Tensor labels = m.Ids({2, 5}, 11);
  labels.i64()[7] = 11;
  {
    KernelCase c{"softmax_cross_entropy_bad_label",
                 MakeOp("softmax_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
                        {{"Loss", {"loss"}}, {"Softmax", {"probs"}}}),
                 {}};
    c.inputs["logits"] = m.Uniform({2, 5, 11});
    c.inputs["label"] = labels;
    cases.push_back(std::move(c));
  }
  {
    KernelCase c{"softmax_cross_entropy_grad_bad_label",
                 MakeOp("softmax_cross_entropy_grad",
                        {{"Softmax", {"probs"}}, {"Label", {"label"}}, {G("Loss"), {"dloss"}}},
                        {{G("Logits"), {kOut}}}),
                 {}};
    c.inputs["probs"] = m.Uniform({2, 5, 11}, 0, 0.2f);
    c.inputs["label"] = labels;
    c.inputs["dloss"] = m.Uniform({2, 5});
    cases.push_back(std::move(c));
  }
  KernelCase c{"adam_bad_beta_pow",
               MakeOp("adam",
                      {{"Param", {"p"}},
                       {"Grad", {"g"}},
                       {"Moment1", {"m1"}},
                       {"Moment2", {"m2"}},
                       {"Beta1Pow", {"b1"}},
                       {"Beta2Pow", {"b2"}}},
                      {{"ParamOut", {"p"}},
                       {"Moment1Out", {"m1"}},
                       {"Moment2Out", {"m2"}},
                       {"Beta1PowOut", {"b1"}},
                       {"Beta2PowOut", {"b2"}}}),
               {}};
  for (const char* v : {"p", "g", "m1", "m2"}) c.inputs[v] = m.Uniform({4});
  c.inputs["b1"] = Maker::Value({1}, 1.0f);
  c.inputs["b2"] = Maker::Value({1}, 0.5f);
  cases.push_back(std::move(c));
  return cases;
}

}  // namespace pw::testing
