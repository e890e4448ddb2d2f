#pragma once
// Measures op costs on this machine's CPU backend: every distinct op signature of a
// module (its programs' ops and the work the executor adds, ir/rank_sequence.h) runs its CPU
// kernel on synthetic inputs, with warm-up and repetitions; the table keeps the median and
// the spread. Each repetition allocates the outputs afresh, as the executor does, so the
// allocation and zero-fill are part of the cost. Also measures the CPU's DeviceSpec figures
// (peak GEMM FLOP/s, memory bandwidth) the roofline falls back on.

#include <functional>
#include <string>
#include <vector>

#include "cost_model/cache_state.h"
#include "cost_model/device_spec.h"
#include "cost_model/op_cost_table.h"
#include "cost_model/op_signature.h"
#include "ir/module.h"

namespace pw::cost {

// An op with the declarations of its vars: what the profiler needs to run it alone.
struct CostedOp {
  Op op;
  std::vector<Var> vars;
  OpSignature sig;
};

// Every distinct signature a module's execution runs, in first-seen order.
StatusOr<std::vector<CostedOp>> DistinctOps(const Module& module, const OpRegistry& registry);

// Bytes of parameters the largest rank holds (its pipeline stage's, one mp shard): what
// one pass over its layers reads.
int64_t RankParameterBytes(const Module& module);

// Per-run seconds of `warmup` + at least `repeats` runs of an op (more, up to 50 times
// `repeats`, until `min_seconds` were spent on it).
using TimeFn = std::function<StatusOr<std::vector<double>>(const CostedOp& op, int warmup,
                                                           int repeats, double min_seconds)>;

// Kernels timed somewhere other than this CPU: a GPU through the CUDA backend.
struct KernelTimer {
  std::function<bool(const std::string& op_type)> has_kernel;
  TimeFn time;
  // The device (its built-in spec's name and links); peaks and bandwidth are measured.
  DeviceSpec spec;
};

struct ProfileOptions {
  int warmup = 3;
  int repeats = 20;
  int blas_threads = 1;
  // Keep repeating a signature until this much time was spent on it (small ops get more
  // repetitions and a steadier median), up to 50 times `repeats`.
  double min_seconds = 0.02;
  bool measure_device = true;          // fill the table's device_spec with measured CPU figures
  CacheState cache = CacheState::kL3;  // what each timed run finds in the caches (CPU only)
  // Null: the CPU kernels, on this thread and the kernel pool.
  const KernelTimer* timer = nullptr;
  // Called after every signature: (done, total, key).
  std::function<void(size_t, size_t, const std::string&)> progress;
};

struct ProfileResult {
  OpCostTable table;
  std::vector<std::string> skipped;  // signatures without a kernel (roofline only)
  // Signatures a KernelTimer could not time, each with the reason (the CPU kernels fail the
  // whole profile instead: their errors are bugs of ours).
  std::vector<std::string> failed;
};

StatusOr<ProfileResult> ProfileOps(const std::vector<CostedOp>& ops, const ProfileOptions& options);

// Runs one op `warmup + repeats` times; returns the per-run seconds of the repeats (wall
// time; with `cpu`, also the calling thread's CPU time of each run, less the clock's own
// cost). With an evictor, the caches are evicted and the op's non-persistent inputs
// touched before every run (outside the timing).
StatusOr<std::vector<double>> TimeOp(const CostedOp& op, int warmup, int repeats,
                                     double min_seconds, CacheEvictor* evictor = nullptr,
                                     std::vector<double>* cpu = nullptr);

// Peak f32 GEMM rate and memory bandwidth of this CPU (the built-in "cpu" spec with them).
DeviceSpec MeasureCpuSpec();

// `base` with the peak GEMM rate of every dtype (an n^3 matmul, the best of a few runs)
// and the memory bandwidth (an add over `stream_elements` f32 per operand) that `time`
// measures; efficiencies 1 against them.
DeviceSpec MeasurePeaks(DeviceSpec base, const TimeFn& time, int64_t gemm_n,
                        int64_t stream_elements);

// Median, inter-quartile range, min and max of samples.
struct SampleStats {
  double median = 0, spread = 0, min = 0, max = 0;
};
SampleStats Summarize(std::vector<double> samples);

// The table entry of `sig` from its timed runs (seconds, not empty): median, mean, spread,
// extremes; `cpu`, when not empty, the CPU seconds of each run on the timing thread.
OpCostEntry EntryFromSamples(const OpSignature& sig, const std::vector<double>& samples,
                             const std::vector<double>& cpu = {});

}  // namespace pw::cost
