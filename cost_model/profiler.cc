#include "cost_model/profiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "cost_model/wake_latency.h"
#include "ir/p2p_vars.h"
#include "ir/rank_layout.h"
#include "ir/rank_sequence.h"
#include "ir/thread_cpu_clock.h"
#include "ops/kernel.h"
#include "ops/op_run.h"
#include "ops/registry.h"

namespace pw::cost {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
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
  std::set<std::string> grads =
      OptimizerGradients(optimizer_ops, other_ops, [&](const std::string& v) {
        const Var* decl = lookup(v);
        return decl && decl->persistable;
      });
  // The ops as the executor runs them: a weight-gradient GEMM that adds into its gradient
  // sum takes the sum as Acc, and a sum only such GEMMs finish has no separate add.
  std::set<std::string> added;  // gradients the executor adds with its own op
  const RankLayout layout(module.mesh);
  for (const Program& p : module.programs()) {
    auto local = [&](const std::string& name) { return module.FindVar(name, &p); };
    for (size_t i = 0; i < p.ops().size(); ++i) {
      // A collective over more than one rank is priced by the communication model (measured
      // in a run with --comm), not as an op; a local op cut by its group's size (c_split,
      // c_member_concat, c_member_sum: attr nranks) by the roofline: alone, neither has its
      // group to run over (their kernels refuse a group that disagrees with nranks).
      const Op& op = p.ops()[i];
      if (const OpDef* def = registry.Find(op.type);
          def && (def->collective || op.attrs.Has("nranks")) &&
          layout.Group(op.attrs.GetString("group", "mp"), 0).size() > 1)
        continue;
      const ExecutedOp run = ExecutedForm(p, i, [&](const std::string& v) -> const Var* {
        return grads.count(v) ? local(v) : nullptr;
      });
      added.insert(run.added.begin(), run.added.end());
      Status s = AddDistinct(run.op, registry, local, seen, out);
      if (!s.ok()) return s.WithContext(StrCat("program '", p.name(), "'"));
    }
  }
  for (const std::string& g : grads) {
    if (added.count(g))
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

OpCostEntry EntryFromSamples(const OpSignature& sig, const std::vector<double>& samples,
                             const std::vector<double>& cpu) {
  const SampleStats st = Summarize(samples);
  OpCostEntry e;
  e.set_op_type(sig.op_type);
  e.set_key(sig.key);
  e.set_median(std::max(st.median, 1e-9));
  double mean = 0;
  for (double t : samples) mean += t;
  e.set_mean(std::max(mean / std::max<size_t>(samples.size(), 1), 1e-9));
  if (!cpu.empty()) {
    double sum = 0;
    for (double t : cpu) sum += t;
    e.set_cpu(std::max(sum / cpu.size(), 1e-9));
  }
  e.set_spread(st.spread);
  e.set_min(st.min);
  e.set_max(st.max);
  e.set_repeats(static_cast<int>(samples.size()));
  e.set_flops(sig.flops);
  e.set_bytes(sig.bytes);
  e.set_dtype(DataTypeName(sig.dtype));
  return e;
}

StatusOr<std::vector<double>> TimeOp(const CostedOp& c, int warmup, int repeats, double min_seconds,
                                     CacheEvictor* evictor, std::vector<double>* cpu) {
  CpuKernel kernel = FindCpuKernel(c.op.type);
  if (!kernel) return NotFound("no CPU kernel for op type '", c.op.type, "'");
  PW_ASSIGN_OR_RETURN(std::unique_ptr<ops::OpRun> op_run,
                      ops::OpRun::Create(c.op, c.vars, c.sig.key,
                                         [](Tensor host) -> StatusOr<Tensor> { return host; }));
  // Outputs are allocated inside the timing, as the runtimes allocate them before each kernel.
  const ops::OpRun::Allocate allocate = [](const Var& decl) -> StatusOr<Tensor> {
    return Tensor(decl.dtype, decl.shape);
  };
  std::vector<double> samples;
  double spent = 0;
  // Evicting costs more than a small op: no extra repetitions then.
  const int max_runs = std::max(repeats, 1) * (evictor ? 1 : 50);
  for (int run = 0; run < warmup + max_runs; ++run) {
    if (run >= warmup + repeats && spent >= min_seconds) break;
    op_run->ReleaseOutputs();  // the previous run's outputs are freed first
    if (evictor) {
      evictor->Evict();
      for (const Tensor* t : op_run->activations()) CacheEvictor::Touch(t->raw(), t->nbytes());
    }
    const double cpu_start = cpu ? ThreadCpuSeconds() : 0;
    auto start = Clock::now();
    Status s = op_run->AllocateOutputs(allocate);
    if (s.ok()) s = kernel(op_run->context());
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
  const KernelTimer* timer = options.timer;
  ProfileResult result;
  OpCostTable::Proto& proto = result.table.mutable_proto();
  std::unique_ptr<CacheEvictor> evictor;
  if (timer) {
    proto.set_device(timer->spec.name());
    *proto.mutable_device_spec() =
        options.measure_device ? MeasurePeaks(timer->spec, timer->time, 8192, int64_t{1} << 26)
                               : timer->spec;
  } else {
    ops::SetKernelThreads(options.blas_threads);
    proto.set_device("cpu");
    proto.set_blas_threads(options.blas_threads);
    if (options.measure_device) *proto.mutable_device_spec() = MeasureCpuSpec();
    if (options.cache != CacheState::kHot)
      evictor = std::make_unique<CacheEvictor>(options.cache, ReadCacheSizes());
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const CostedOp& c = ops[i];
    if (timer ? !timer->has_kernel(c.op.type) : !FindCpuKernel(c.op.type)) {
      result.skipped.push_back(c.sig.key);
    } else {
      // CPU time is the op's work only when the kernel runs on this thread alone.
      std::vector<double> cpu;
      StatusOr<std::vector<double>> timed =
          timer ? timer->time(c, options.warmup, options.repeats, options.min_seconds)
                : TimeOp(c, options.warmup, options.repeats, options.min_seconds, evictor.get(),
                         options.blas_threads == 1 ? &cpu : nullptr);
      if (timer && !timed.ok()) {
        result.failed.push_back(StrCat(c.sig.key, ": ", timed.status().message()));
        if (options.progress) options.progress(i + 1, ops.size(), c.sig.key);
        continue;
      }
      PW_RETURN_IF_ERROR(timed.status());
      if (timed->empty()) return Internal(c.sig.key, ": no timed runs");
      result.table.Add(EntryFromSamples(c.sig, *timed, cpu));
    }
    if (options.progress) options.progress(i + 1, ops.size(), c.sig.key);
  }
  return result;
}

namespace {

StatusOr<CostedOp> MakeCostedOp(Op op, std::vector<Var> vars) {
  CostedOp c;
  c.op = std::move(op);
  c.vars = std::move(vars);
  std::map<std::string, const Var*> decls;
  for (const Var& v : c.vars) decls[v.name] = &v;
  auto lookup = [&](const std::string& n) -> const Var* {
    auto it = decls.find(n);
    return it == decls.end() ? nullptr : it->second;
  };
  PW_ASSIGN_OR_RETURN(c.sig, SignatureOf(c.op, ops::Registry(), lookup));
  return c;
}

Var DeclaredVar(const char* name, Shape shape, DataType dtype = DataType::kFloat32) {
  Var v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  return v;
}

}  // namespace

DeviceSpec MeasurePeaks(DeviceSpec spec, const TimeFn& time, int64_t gemm_n,
                        int64_t stream_elements) {
  // Peaks: an n^3 GEMM per dtype, the best of a few runs (the CPU's bf16 and f16 GEMMs
  // convert their operands and use the f32 one, so their peak is lower).
  Op mm;
  mm.type = "matmul";
  mm.SetInput("X", {"a"}).SetInput("Y", {"b"}).SetOutput("Out", {"c"});
  const DeviceSpec base = spec;
  spec.clear_peak_flops();
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    const Shape square = {gemm_n, gemm_n};
    auto gemm = MakeCostedOp(mm, {DeclaredVar("a", square, dtype), DeclaredVar("b", square, dtype),
                                  DeclaredVar("c", square, dtype)});
    if (!gemm.ok()) continue;
    auto t = time(*gemm, 2, 5, 0.2);
    if (!t.ok() || t->empty()) continue;
    double best = *std::min_element(t->begin(), t->end());
    auto* peak = spec.add_peak_flops();
    peak->set_dtype(DataTypeName(dtype));
    peak->set_flops_per_s(gemm->sig.flops / best);
  }
  if (spec.peak_flops().empty()) *spec.mutable_peak_flops() = base.peak_flops();
  // Bandwidth: an add beyond the caches.
  Op add;
  add.type = "add";
  add.SetInput("X", {"x"}).SetInput("Y", {"y"}).SetOutput("Out", {"z"});
  const int64_t n = stream_elements;
  auto stream =
      MakeCostedOp(add, {DeclaredVar("x", {n}), DeclaredVar("y", {n}), DeclaredVar("z", {n})});
  if (stream.ok()) {
    auto t = time(*stream, 1, 5, 0.2);
    if (t.ok() && !t->empty()) {
      double best = *std::min_element(t->begin(), t->end());
      spec.set_memory_bandwidth(stream->sig.bytes / best);
    }
  }
  // The measured figures are what kernels reach: efficiency 1 against them.
  spec.set_flops_efficiency(1.0);
  spec.set_bandwidth_efficiency(1.0);
  return spec;
}

DeviceSpec MeasureCpuSpec() {
  const TimeFn time = [](const CostedOp& op, int warmup, int repeats, double min_seconds) {
    return TimeOp(op, warmup, repeats, min_seconds);
  };
  // 512^3 GEMMs; the add moves 48 MiB, beyond the caches.
  DeviceSpec spec = MeasurePeaks(*BuiltinDeviceSpec("cpu"), time, 512, int64_t{1} << 22);
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  spec.set_cores_per_node(cores);
  WakeLatency wake = MeasureWakeLatency(cores);
  spec.set_event_latency(wake.idle);
  spec.set_busy_wake_latency(std::max(0.0, wake.busy - wake.idle));
  spec.set_spin_latency(wake.spin);
  spec.set_held_spin_latency(wake.held_spin);
  spec.set_held_wake_factor(wake.held_wake_factor);
  for (double r : MeasureThreadRates(cores)) spec.add_thread_rate(r);
  return spec;
}

}  // namespace pw::cost
