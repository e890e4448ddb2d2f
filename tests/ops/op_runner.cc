#include "tests/ops/op_runner.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "ir/op_def.h"
#include "ops/registry.h"

namespace pw::testing {

std::string TensorEnv::Resolve(const std::string& name) const {
  std::string n = name;
  for (auto it = aliases_.find(n); it != aliases_.end(); it = aliases_.find(n)) n = it->second;
  return n;
}

Tensor* TensorEnv::Find(const std::string& name) {
  auto it = tensors_.find(Resolve(name));
  return it == tensors_.end() ? nullptr : &it->second;
}

Var TensorEnv::VarOf(const std::string& name) {
  Var v;
  v.name = name;
  if (Tensor* t = Find(name)) {
    v.dtype = t->dtype();
    v.shape = t->shape();
  }
  return v;
}

Status RunOps(const std::vector<Op>& ops, TensorEnv& env, Communicator* comm) {
  for (const Op& op : ops) {
    const OpDef* def = ops::Registry().Find(op.type);
    if (!def) return NotFound("no op '", op.type, "'");
    std::vector<std::vector<TensorType>> types;
    std::vector<std::vector<const Tensor*>> inputs;
    for (const Slot& s : op.inputs) {
      types.emplace_back();
      inputs.emplace_back();
      for (const std::string& v : s.vars) {
        const Tensor* t = env.Find(v);
        if (!t) return NotFound(op.type, ": input var '", v, "' has no value");
        types.back().push_back({t->dtype(), t->shape()});
        inputs.back().push_back(t);
      }
    }
    InferContext infer(op, std::move(types));
    PW_RETURN_IF_ERROR(def->infer(infer));
    std::vector<std::vector<Tensor*>> outputs;
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      outputs.emplace_back();
      for (size_t j = 0; j < op.outputs[i].vars.size(); ++j) {
        const std::string& v = op.outputs[i].vars[j];
        bool in_place = false;
        op.ForEachInput([&](const std::string& in) { in_place = in_place || in == v; });
        if (!in_place) {
          const TensorType& t = infer.outputs()[i][j];
          env.Set(v, Tensor(t.dtype, t.shape));
        }
        outputs.back().push_back(env.Find(v));
      }
    }
    CpuKernel kernel = FindCpuKernel(op.type);
    if (!kernel) return NotFound("no CPU kernel for '", op.type, "'");
    KernelContext ctx{op, std::move(inputs), std::move(outputs), comm};
    PW_RETURN_IF_ERROR(kernel(ctx));
  }
  return OkStatus();
}

Op MakeOp(std::string type, const SlotList& inputs, const SlotList& outputs) {
  Op op;
  op.type = std::move(type);
  for (const auto& [slot, vars] : inputs) op.SetInput(slot, vars);
  for (const auto& [slot, vars] : outputs) op.SetOutput(slot, vars);
  return op;
}

Op AdamOp() {
  return MakeOp("adam",
                {{"Param", {"p"}},
                 {"Grad", {"g"}},
                 {"Moment1", {"m1"}},
                 {"Moment2", {"m2"}},
                 {"Beta1Pow", {"b1p"}},
                 {"Beta2Pow", {"b2p"}}},
                {{"ParamOut", {"p"}},
                 {"Moment1Out", {"m1"}},
                 {"Moment2Out", {"m2"}},
                 {"Beta1PowOut", {"b1p"}},
                 {"Beta2PowOut", {"b2p"}}});
}

Tensor RandomTensor(const Shape& shape, uint32_t seed, float low, float high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  Tensor t(DataType::kFloat32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(rng);
  return t;
}

Tensor RandomIds(const Shape& shape, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
  Tensor t(DataType::kInt64, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.i64()[i] = dist(rng);
  return t;
}

Tensor MakeTensor(const Shape& shape, const std::vector<float>& values) {
  Tensor t(DataType::kFloat32, shape);
  std::copy(values.begin(), values.end(), t.f32());
  return t;
}

Tensor SeedTensor(int64_t value) {
  Tensor t(DataType::kInt64, {1});
  t.i64()[0] = value;
  return t;
}

Tensor Slice(const Tensor& t, int axis, int64_t begin, int64_t n) {
  Shape shape = t.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t extent = shape[axis];
  shape[axis] = n;
  Tensor out(DataType::kFloat32, shape);
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(t.f32() + (o * extent + begin) * inner, n * inner, out.f32() + o * n * inner);
  return out;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.f32(), b.f32(), sizeof(float) * a.numel()) == 0;
}

}  // namespace pw::testing
