#include "cost_model/profiler.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "cost_model/wake_latency.h"
#include "ir/p2p_vars.h"
#include "ir/rank_sequence.h"
#include "ops/kernel.h"
#include "ops/low_precision.h"
#include "ops/registry.h"

namespace pw::cost {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// What reading the thread CPU clock twice costs (a system call on some machines): taken off
// every CPU-time sample.
double ThreadCpuClockCost() {
  static const double cost = [] {
    std::vector<double> d;
    for (int i = 0; i < 101; ++i) {
      double a = ThreadCpuSeconds();
      d.push_back(ThreadCpuSeconds() - a);
    }
    std::nth_element(d.begin(), d.begin() + 50, d.end());
    return d[50];
  }();
  return cost;
}

// Values no kernel trips over: ids 0 for integer inputs (valid token, label and index),
// small positive floats (square roots and logs stay finite, nothing is denormal), rounded
// to the var's dtype when it is bf16 or f16.
Tensor SyntheticTensor(const Var& var, std::mt19937& rng) {
  if (!IsFloatingType(var.dtype)) return Tensor(var.dtype, var.shape);
  Tensor wide(DataType::kFloat32, var.shape);
  std::uniform_real_distribution<float> dist(0.01f, 0.1f);
  float* p = wide.f32();
  for (int64_t i = 0; i < wide.numel(); ++i) p[i] = dist(rng);
  if (var.dtype == DataType::kFloat32) return wide;
  Tensor t(var.dtype, var.shape);
  ops::StoreFromF32(wide, t);
  return t;
}

// Adds `op` with the declarations from `lookup` unless its signature is already known.
Status AddDistinct(const Op& op, const OpRegistry& registry, const VarLookup& lookup,
                   std::set<std::string>& seen, std::vector<CostedOp>& out) {
  PW_ASSIGN_OR_RETURN(OpSignature sig, SignatureOf(op, registry, lookup));
  if (!seen.insert(sig.key).second) return OkStatus();
  CostedOp c;
  c.op = op;
  std::set<std::string> names;
  auto add_var = [&](const std::string& v) {
    if (!names.insert(v).second) return;
    if (const Var* decl = lookup(v)) c.vars.push_back(*decl);
  };
  op.ForEachInput(add_var);
  op.ForEachOutput(add_var);
  c.sig = std::move(sig);
  out.push_back(std::move(c));
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<CostedOp>> DistinctOps(const Module& module, const OpRegistry& registry) {
  std::vector<CostedOp> out;
  std::set<std::string> seen;
  std::vector<const Op*> optimizer_ops, other_ops;
  for (const Program& p : module.programs()) {
    bool optimizer_program = p.info().kind == "optimizer";
    for (const Op& op : p.ops())
      (optimizer_program || op.role == OpRole::kOptimize ? optimizer_ops : other_ops)
          .push_back(&op);
  }
  auto lookup = [&](const std::string& name) { return module.FindVar(name); };
  for (const Program& p : module.programs()) {
    auto local = [&](const std::string& name) { return module.FindVar(name, &p); };
    for (const Op& op : p.ops()) {
      Status s = AddDistinct(op, registry, local, seen, out);
      if (!s.ok()) return s.WithContext(StrCat("program '", p.name(), "'"));
    }
  }
  std::set<std::string> grads =
      OptimizerGradients(optimizer_ops, other_ops, [&](const std::string& v) {
        const Var* decl = lookup(v);
        return decl && decl->persistable;
      });
  for (const std::string& g : grads) {
    PW_RETURN_IF_ERROR(
        AddDistinct(AddedWorkOp(WorkKind::kAccumulate, g), registry, lookup, seen, out));
    PW_RETURN_IF_ERROR(
        AddDistinct(AddedWorkOp(WorkKind::kGradScale, g), registry, lookup, seen, out));
  }
  return out;
}

int64_t RankParameterBytes(const Module& module) {
  // Declared parameters are one mp shard each; a rank holds those its programs use.
  std::map<int, std::set<std::string>> seen;
  std::map<int, int64_t> per_rank;
  for (const Program& p : module.programs()) {
    const int rank = module.programs().size() > 1 ? ProgramPipelineRank(module, p) : 0;
    for (const Var& v : p.vars())
      if (v.is_parameter && seen[rank].insert(v.name).second) per_rank[rank] += v.num_bytes();
  }
  int64_t most = 0;
  for (const auto& [rank, bytes] : per_rank) most = std::max(most, bytes);
  return most;
}

SampleStats Summarize(std::vector<double> s) {
  SampleStats st;
  if (s.empty()) return st;
  std::sort(s.begin(), s.end());
  auto quantile = [&](double q) {
    double pos = q * (s.size() - 1);
    size_t i = static_cast<size_t>(pos);
    double f = pos - i;
    return i + 1 < s.size() ? s[i] * (1 - f) + s[i + 1] * f : s[i];
  };
  st.median = quantile(0.5);
  st.spread = quantile(0.75) - quantile(0.25);
  st.min = s.front();
  st.max = s.back();
  return st;
}

StatusOr<std::vector<double>> TimeOp(const CostedOp& c, int warmup, int repeats, double min_seconds,
                                     CacheEvictor* evictor, std::vector<double>* cpu) {
  const Op& op = c.op;
  CpuKernel kernel = FindCpuKernel(op.type);
  if (!kernel) return NotFound("no CPU kernel for op type '", op.type, "'");
  std::map<std::string, const Var*> decls;
  for (const Var& v : c.vars) decls[v.name] = &v;
  std::mt19937 rng(7);
  std::map<std::string, Tensor> inputs;
  op.ForEachInput([&](const std::string& v) {
    if (!inputs.count(v) && decls.count(v)) inputs[v] = SyntheticTensor(*decls[v], rng);
  });
  for (const Slot& s : op.inputs)
    for (const std::string& v : s.vars)
      if (!inputs.count(v)) return NotFound(c.sig.key, ": input var '", v, "' is not declared");
  std::vector<const Var*> output_decls;
  for (const Slot& s : op.outputs)
    for (const std::string& v : s.vars) {
      if (!decls.count(v)) return NotFound(c.sig.key, ": output var '", v, "' is not declared");
      output_decls.push_back(decls[v]);
    }

  // The context is built once, outside the timing (the runtimes resolve theirs ahead too);
  // every run gives it fresh output tensors, except in-place ones (an output naming an input
  // var), as the runtimes allocate outputs before each kernel.
  std::vector<Tensor> fresh(output_decls.size());
  std::vector<bool> in_place(output_decls.size(), false);
  KernelContext ctx{op, {}, {}, nullptr};
  ctx.inputs.resize(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i)
    for (const std::string& v : op.inputs[i].vars) ctx.inputs[i].push_back(&inputs[v]);
  ctx.outputs.resize(op.outputs.size());
  size_t k = 0;
  for (size_t i = 0; i < op.outputs.size(); ++i)
    for (const std::string& v : op.outputs[i].vars) {
      auto in = inputs.find(v);
      in_place[k] = in != inputs.end();
      ctx.outputs[i].push_back(in_place[k] ? &in->second : &fresh[k]);
      ++k;
    }

  std::vector<const Tensor*> activations;
  for (const auto& [name, tensor] : inputs)
    if (!decls[name]->persistable) activations.push_back(&tensor);

  std::vector<double> samples;
  double spent = 0;
  // Evicting costs more than a small op: no extra repetitions then.
  const int max_runs = std::max(repeats, 1) * (evictor ? 1 : 50);
  for (int run = 0; run < warmup + max_runs; ++run) {
    if (run >= warmup + repeats && spent >= min_seconds) break;
    for (Tensor& t : fresh) t = Tensor();  // the previous run's outputs are freed first
    if (evictor) {
      evictor->Evict();
      for (const Tensor* t : activations) CacheEvictor::Touch(t->raw(), t->nbytes());
    }
    const double cpu_start = cpu ? ThreadCpuSeconds() : 0;
    auto start = Clock::now();
    for (size_t j = 0; j < fresh.size(); ++j)
      if (!in_place[j]) fresh[j] = Tensor(output_decls[j]->dtype, output_decls[j]->shape);
    Status s = kernel(ctx);
    auto end = Clock::now();
    const double cpu_end = cpu ? ThreadCpuSeconds() : 0;
    if (!s.ok()) return s.WithContext(StrCat("running ", c.sig.key));
    if (run >= warmup) {
      samples.push_back(Seconds(start, end));
      spent += samples.back();
      if (cpu) cpu->push_back(std::max(0.0, cpu_end - cpu_start - ThreadCpuClockCost()));
    }
  }
  return samples;
}

StatusOr<ProfileResult> ProfileOps(const std::vector<CostedOp>& ops,
                                   const ProfileOptions& options) {
  if (options.repeats < 1) return InvalidArgument("repeats must be >= 1, got ", options.repeats);
  ops::SetKernelThreads(options.blas_threads);
  ProfileResult result;
  OpCostTable::Proto& proto = result.table.mutable_proto();
  proto.set_device("cpu");
  proto.set_blas_threads(options.blas_threads);
  if (options.measure_device) *proto.mutable_device_spec() = MeasureCpuSpec();
  std::unique_ptr<CacheEvictor> evictor;
  if (options.cache != CacheState::kHot)
    evictor = std::make_unique<CacheEvictor>(options.cache, ReadCacheSizes());
  for (size_t i = 0; i < ops.size(); ++i) {
    const CostedOp& c = ops[i];
    if (!FindCpuKernel(c.op.type)) {
      result.skipped.push_back(c.sig.key);
    } else {
      // CPU time is the op's work only when the kernel runs on this thread alone.
      std::vector<double> cpu;
      PW_ASSIGN_OR_RETURN(std::vector<double> samples,
                          TimeOp(c, options.warmup, options.repeats, options.min_seconds,
                                 evictor.get(), options.blas_threads == 1 ? &cpu : nullptr));
      SampleStats st = Summarize(samples);
      OpCostEntry e;
      e.set_op_type(c.sig.op_type);
      e.set_key(c.sig.key);
      e.set_median(std::max(st.median, 1e-9));
      double mean = 0;
      for (double t : samples) mean += t;
      e.set_mean(std::max(mean / samples.size(), 1e-9));
      if (!cpu.empty()) {
        double sum = 0;
        for (double t : cpu) sum += t;
        e.set_cpu(std::max(sum / cpu.size(), 1e-9));
      }
      e.set_spread(st.spread);
      e.set_min(st.min);
      e.set_max(st.max);
      e.set_repeats(static_cast<int>(samples.size()));
      e.set_flops(c.sig.flops);
      e.set_bytes(c.sig.bytes);
      e.set_dtype(DataTypeName(c.sig.dtype));
      result.table.Add(e);
    }
    if (options.progress) options.progress(i + 1, ops.size(), c.sig.key);
  }
  return result;
}

DeviceSpec MeasureCpuSpec() {
  DeviceSpec spec = *BuiltinDeviceSpec("cpu");
  const OpRegistry& registry = ops::Registry();
  auto make = [&](Op op, std::vector<Var> vars) -> StatusOr<CostedOp> {
    CostedOp c;
    c.op = std::move(op);
    c.vars = std::move(vars);
    std::map<std::string, const Var*> decls;
    for (const Var& v : c.vars) decls[v.name] = &v;
    auto lookup = [&](const std::string& n) -> const Var* {
      auto it = decls.find(n);
      return it == decls.end() ? nullptr : it->second;
    };
    PW_ASSIGN_OR_RETURN(c.sig, SignatureOf(c.op, registry, lookup));
    return c;
  };
  auto var = [](const char* name, Shape shape, DataType dtype = DataType::kFloat32) {
    Var v;
    v.name = name;
    v.dtype = dtype;
    v.shape = std::move(shape);
    return v;
  };
  // Peaks: a 512^3 GEMM per dtype, the best of a few runs (bf16 and f16 GEMMs convert
  // their operands and use the f32 one, so their peak is lower).
  Op mm;
  mm.type = "matmul";
  mm.SetInput("X", {"a"}).SetInput("Y", {"b"}).SetOutput("Out", {"c"});
  spec.clear_peak_flops();
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    auto gemm = make(mm, {var("a", {512, 512}, dtype), var("b", {512, 512}, dtype),
                          var("c", {512, 512}, dtype)});
    if (!gemm.ok()) continue;
    auto t = TimeOp(*gemm, 2, 5, 0.2);
    if (!t.ok() || t->empty()) continue;
    double best = *std::min_element(t->begin(), t->end());
    auto* peak = spec.add_peak_flops();
    peak->set_dtype(DataTypeName(dtype));
    peak->set_flops_per_s(gemm->sig.flops / best);
  }
  if (spec.peak_flops().empty()) *spec.add_peak_flops() = BuiltinDeviceSpec("cpu")->peak_flops(0);
  // Bandwidth: an add over 4 Mi floats per operand (48 MiB moved), beyond the caches.
  Op add;
  add.type = "add";
  add.SetInput("X", {"x"}).SetInput("Y", {"y"}).SetOutput("Out", {"z"});
  const int64_t n = int64_t{1} << 22;
  auto stream = make(add, {var("x", {n}), var("y", {n}), var("z", {n})});
  if (stream.ok()) {
    auto t = TimeOp(*stream, 1, 5, 0.2);
    if (t.ok() && !t->empty()) {
      double best = *std::min_element(t->begin(), t->end());
      spec.set_memory_bandwidth(stream->sig.bytes / best);
    }
  }
  // The measured figures are what kernels reach: efficiency 1 against them.
  spec.set_flops_efficiency(1.0);
  spec.set_bandwidth_efficiency(1.0);
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  spec.set_cores_per_node(cores);
  WakeLatency wake = MeasureWakeLatency(cores);
  spec.set_event_latency(wake.idle);
  spec.set_busy_wake_latency(std::max(0.0, wake.busy - wake.idle));
  for (double r : MeasureThreadRates(cores)) spec.add_thread_rate(r);
  return spec;
}

}  // namespace pw::cost
