#include "tests/ops/grad_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ir/op_def.h"
#include "ops/registry.h"
#include "tests/ops/op_runner.h"

namespace pw::testing {
namespace {

std::vector<std::string> LossOutputs(const GradCheck& c) {
  if (!c.loss_outputs.empty()) return c.loss_outputs;
  std::vector<std::string> outs;
  for (const Slot& s : c.op.outputs)
    if (s.name == "Out" || s.name == "Y" || s.name == "Loss")
      outs.insert(outs.end(), s.vars.begin(), s.vars.end());
  return outs;
}

// L(inputs) = sum(Out ⊙ R) in double.
double Loss(const GradCheck& c, const std::map<std::string, Tensor>& inputs,
            const std::map<std::string, Tensor>& weights) {
  TensorEnv env;
  for (const auto& [name, t] : inputs) env.Set(name, t);
  Status s = RunOps({c.op}, env);
  EXPECT_TRUE(s.ok()) << s.ToString();
  double loss = 0;
  for (const auto& [name, r] : weights) {
    const Tensor* out = env.Find(name);
    for (int64_t i = 0; i < r.numel(); ++i) loss += double(out->f32()[i]) * r.f32()[i];
  }
  return loss;
}

}  // namespace

GradCheckResult CheckGradients(const GradCheck& c) {
  GradCheckResult result;
  const OpDef* def = ops::Registry().Find(c.op.type);
  EXPECT_NE(def, nullptr) << c.op.type;
  if (!def || !def->grad) {
    ADD_FAILURE() << c.op.type << " has no grad maker";
    return result;
  }

  // Forward pass, then the loss weights R as the output gradients.
  TensorEnv env;
  for (const auto& [name, t] : c.inputs) env.Set(name, t.Clone());
  Status s = RunOps({c.op}, env);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return result;
  std::map<std::string, Tensor> weights;
  uint32_t seed = 1000;
  for (const std::string& out : LossOutputs(c)) {
    weights[out] = RandomTensor(env.Find(out)->shape(), seed++);
    env.Set(GradVarName(out), weights[out].Clone());
  }

  std::set<std::string> wanted;  // inputs whose gradient is checked
  for (const auto& [name, t] : c.inputs)
    if (t.dtype() == DataType::kFloat32 && !c.no_grad.count(name)) wanted.insert(name);

  std::map<std::string, Var> vars;
  GradContext ctx(
      c.op,
      [&](const std::string& name) -> const Var* {
        if (!env.Find(name)) return nullptr;
        vars[name] = env.VarOf(name);
        vars[name].is_parameter = c.params.count(name) > 0;
        return &vars[name];
      },
      [&](const std::string& name) { return wanted.count(name) > 0 || weights.count(name) > 0; });
  s = def->grad(ctx);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return result;
  result.grad_ops = ctx.emitted();
  result.aliases = ctx.aliases();
  for (const Op& op : result.grad_ops) {
    EXPECT_EQ(op.role == OpRole::kBackward || op.role == OpRole::kCommunication, true) << op.type;
  }
  for (const auto& [in_grad, out_grad] : result.aliases) env.Alias(in_grad, out_grad);
  s = RunOps(result.grad_ops, env);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return result;

  for (const std::string& x : wanted) {
    const Tensor* grad = env.Find(GradVarName(x));
    EXPECT_NE(grad, nullptr) << "no gradient for " << x;
    if (!grad) continue;
    const Tensor& value = c.inputs.at(x);
    EXPECT_EQ(grad->shape(), value.shape()) << x;
    int64_t n = value.numel();
    int64_t step = std::max<int64_t>(1, n / c.max_elements);
    for (int64_t i = 0; i < n; i += step) {
      std::map<std::string, Tensor> plus = c.inputs, minus = c.inputs;
      plus[x] = value.Clone();
      minus[x] = value.Clone();
      plus[x].f32()[i] += c.h;
      minus[x].f32()[i] -= c.h;
      double numeric = (Loss(c, plus, weights) - Loss(c, minus, weights)) / (2.0 * c.h);
      double analytic = grad->f32()[i];
      EXPECT_LE(std::abs(numeric - analytic),
                c.atol + c.rtol * std::max(std::abs(numeric), std::abs(analytic)))
          << c.op.type << ": d" << x << "[" << i << "] analytic " << analytic << " numeric "
          << numeric;
    }
  }
  return result;
}

}  // namespace pw::testing
