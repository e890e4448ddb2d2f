#pragma once
// Hand-written programs and plans for executor tests, and the small kernels they use
// (registered with the CPU backend, so the tests do not depend on the op library).

#include <chrono>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "executor/cpu/cpu_backend.h"
#include "ir/module.h"

namespace pw::testing {

inline Var F32(const std::string& name, Shape shape = {1}, bool persistable = false) {
  Var v;
  v.name = name;
  v.dtype = DataType::kFloat32;
  v.shape = std::move(shape);
  v.persistable = persistable;
  return v;
}

struct OpSpec {
  std::string type;
  std::vector<Slot> inputs;
  std::vector<Slot> outputs;
  std::string stream = "";
  std::vector<std::string> waits = {};
  std::vector<std::string> records = {};
  double sleep_us = 0;
  OpRole role = OpRole::kForward;
};

inline Op MakeOp(const OpSpec& s) {
  Op op;
  op.type = s.type;
  op.inputs = s.inputs;
  op.outputs = s.outputs;
  op.stream = s.stream;
  op.wait_events = s.waits;
  op.record_events = s.records;
  op.role = s.role;
  if (s.sleep_us > 0) op.SetAttr("sleep_us", s.sleep_us);
  return op;
}

// A program over `vars` running `ops`, placed on `stage` as `kind`.
inline Program MakeProgram(const std::string& name, const std::string& kind, int stage,
                           const std::vector<Var>& vars, const std::vector<OpSpec>& ops) {
  Program p(name);
  p.info().kind = kind;
  p.info().stage = stage;
  for (const Var& v : vars) p.AddVar(v);
  for (const OpSpec& s : ops) p.AddOp(MakeOp(s));
  return p;
}

inline Job MakeJob(JobKind kind, int stage, int mb, std::string program, int peer = -1) {
  Job j;
  j.kind = kind;
  j.stage = stage;
  j.micro_batch = mb;
  j.program = std::move(program);
  j.peer = peer;
  return j;
}

// Test kernels: element-wise over f32, optionally sleeping first (`sleep_us`) so that
// streams really overlap.
inline void MaybeSleep(const KernelContext& ctx) {
  double us = ctx.attrs().GetFloat("sleep_us", 0);
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(us)));
}
inline Status TCopy(KernelContext& ctx) {  // Out = X
  MaybeSleep(ctx);
  const Tensor& x = *ctx.In("X");
  std::memmove(ctx.Out("Out")->raw(), x.raw(), x.nbytes());
  return OkStatus();
}
inline Status TDouble(KernelContext& ctx) {  // Out = 2 X
  MaybeSleep(ctx);
  const Tensor& x = *ctx.In("X");
  for (int64_t i = 0; i < x.numel(); ++i) ctx.Out("Out")->f32()[i] = 2 * x.f32()[i];
  return OkStatus();
}
inline Status TAdd(KernelContext& ctx) {  // Out = X + Y
  MaybeSleep(ctx);
  const Tensor& x = *ctx.In("X");
  const Tensor& y = *ctx.In("Y");
  for (int64_t i = 0; i < x.numel(); ++i) ctx.Out("Out")->f32()[i] = x.f32()[i] + y.f32()[i];
  return OkStatus();
}
inline Status TMul(KernelContext& ctx) {  // Out = X * Y
  const Tensor& x = *ctx.In("X");
  const Tensor& y = *ctx.In("Y");
  for (int64_t i = 0; i < x.numel(); ++i) ctx.Out("Out")->f32()[i] = x.f32()[i] * y.f32()[i];
  return OkStatus();
}
inline Status TSum(KernelContext& ctx) {  // Out[0] = sum(X)
  const Tensor& x = *ctx.In("X");
  float s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += x.f32()[i];
  ctx.Out("Out")->f32()[0] = s;
  return OkStatus();
}
inline Status TSgd(KernelContext& ctx) {  // ParamOut = Param - 0.5 Grad
  const Tensor& p = *ctx.In("Param");
  const Tensor& g = *ctx.In("Grad");
  for (int64_t i = 0; i < p.numel(); ++i)
    ctx.Out("ParamOut")->f32()[i] = p.f32()[i] - 0.5f * g.f32()[i];
  return OkStatus();
}
inline Status TFail(KernelContext&) { return Internal("t_fail always fails"); }

inline cpu::CpuBackendOptions TestBackendOptions(CommFactory* comm = nullptr) {
  cpu::CpuBackendOptions o;
  o.comm = comm;
  o.extra_kernels = {{"t_copy", TCopy}, {"t_double", TDouble}, {"t_add", TAdd},  {"t_mul", TMul},
                     {"t_sum", TSum},   {"t_sgd", TSgd},       {"t_fail", TFail}};
  return o;
}

}  // namespace pw::testing
