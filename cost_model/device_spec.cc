#include "cost_model/device_spec.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "cost_model/proto_file.h"
#include "ir/stream_spin.h"

namespace pw::cost {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// What a GPU rank holds besides its tensors, assumed: the CUDA context (~0.5 GiB with
// lazy module loading), NCCL's buffers for the few communicators of a 3D-parallel rank
// (~1 GiB) and cuBLAS workspaces; the caching allocator's fragmentation is not counted.
constexpr double kGpuReserved = 2048 * kMiB;

void AddPeak(DeviceSpec& spec, const char* dtype, double flops) {
  auto* p = spec.add_peak_flops();
  p->set_dtype(dtype);
  p->set_flops_per_s(flops);
}

// Two cores shared by every rank process of this machine; `pipeweave profile` measures
// the peaks and bandwidth and stores them with the cost table.
DeviceSpec CpuSpec() {
  DeviceSpec s;
  s.set_name("cpu");
  AddPeak(s, "f32", 40e9);
  s.set_memory_bandwidth(10e9);
  s.set_launch_overhead(1e-6);
  s.set_min_kernel_time(0.3e-6);
  s.set_event_latency(5e-6);
  s.set_flops_efficiency(0.6);
  s.set_bandwidth_efficiency(0.6);
  s.set_intra_node_bandwidth(2e9);  // TCP over loopback
  s.set_intra_node_latency(30e-6);
  s.set_inter_node_bandwidth(1.25e9);  // 10 GbE
  s.set_inter_node_latency(50e-6);
  s.set_ranks_per_node(64);
  s.set_cores_per_node(2);
  s.set_cores_in_turns(true);  // the executor's ranks run their ops whole (core_turns.h)
  s.set_overlap_slowdown(0);   // the core-sharing model covers it
  s.set_comm_threads(0);       // the measured CPU per operation replaces it (CommFit)
  s.set_op_overhead(1e-6);
  s.set_reference_op_overhead(2e-6);
  s.set_busy_wake_latency(1e-3);
  s.set_wait_cpu(14e-6);  // measured on this project's 2-core VMs: 13-16 us
  // Measured there in the small GPT's plans on 4 processes: 0.045-0.075.
  s.set_spin_cpu_share(0.06);
  // The executor's spin (ir/stream_spin.h); profile measures the latency of a hand-off
  // caught spinning. PW_STREAM_SPIN=short spins briefly only; block never spins.
  using Seconds = std::chrono::duration<double>;
  const StreamSpin spin = ProcessStreamSpin();
  s.set_spin_budget(spin == StreamSpin::kBlock ? 0 : Seconds(kSpinBudget).count());
  s.set_long_spin_budget(spin == StreamSpin::kAdaptive ? Seconds(kLongSpinBudget).count()
                                                       : s.spin_budget());
  s.set_spin_latency(1e-6);
  // This machine's memory, shared by its rank processes; each also holds its code,
  // libraries and thread stacks (about 100 MiB resident for a rank process here).
  s.set_memory_capacity(static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                        static_cast<double>(sysconf(_SC_PAGE_SIZE)));
  s.set_memory_reserved(128.0 * kMiB);
  return s;
}

void AddFraction(DeviceSpec& spec, const char* dtype, double fraction) {
  auto* f = spec.add_gemm_efficiency();
  f->set_dtype(dtype);
  f->set_fraction(fraction);
}

// How a fused (flash) attention kernel's speed grows with the sequence and the head size, and
// how its time splits between forward and backward: fitted to pipeweave's measurements of
// PyTorch 2.11's cuDNN attention (bf16, forward and backward, 16384 tokens a batch) on an H200
// (cost_model/data/h200_reference_kernels.csv: 24 shapes, sequence 512 to 16k, head size 64
// and 128, causal and not; the fit's rms error 3.6 %, worst 7 %). A causal kernel at S tokens
// reaches S / (S + 740) of attention_efficiency on the half of the scores it computes, a
// non-causal one S / (S + 250); head size 64 reaches 0.77 of 128's; the backward takes 2.6-3.6x
// the forward's time (median 3.0). FlashAttention-2's curves on an A100 (Dao 2023, section 4.1)
// have the same shape; the A100 uses the same constants.
void FlashAttentionShapes(DeviceSpec& s) {
  s.set_attention_half_sequence(250);
  s.set_attention_causal_half_sequence(740);
  s.set_attention_half_head_dim(40);
  s.set_attention_backward_ratio(3.0);
}

// The kernel model of a Hopper GPU (cost_model/kernel_model.h). GEMMs: fitted to pipeweave's
// own cuBLAS measurements on an H100 80GB HBM3 and an H200 (cost_model/data/, 102 GEMMs of
// GPT-3 6.7B to 175B layers at mp 1 to 8): waves of 128 x 128 tiles on 132 SMs, 2.5 us a
// wave besides its FLOPs, which run at 0.875 of the SM's share of the bf16 dense peak (rms
// error 8 %, worst 24 % on skinny N <= 1536) and 0.794 of the f32 one (no TF32; rms 1.7 %).
// Attention: a fused (flash) kernel at 0.51 of peak over forward and backward at long sequences
// (the H200 fit above; between FlashAttention-2, about 35 % of an H100's peak, and
// FlashAttention-3, 75 %: Shah et al. 2024, section 1). Bandwidth-bound kernels: 0.9 of HBM
// bandwidth (a device-to-device copy measured about 3.0 TB/s on this H100), half of it at 8 MiB
// moved (about 2.5 us of launch and tail).
void HopperKernels(DeviceSpec& s) {
  s.set_multiprocessors(132);
  s.set_gemm_tile_m(128);
  s.set_gemm_tile_n(128);
  s.set_gemm_wave_overhead(2.5e-6);
  AddFraction(s, "bf16", 0.875);
  AddFraction(s, "f16", 0.875);
  AddFraction(s, "f32", 0.794);
  s.set_attention_efficiency(0.51);
  FlashAttentionShapes(s);
  s.set_bandwidth_efficiency(0.9);
  s.set_bandwidth_half_bytes(8 * kMiB);
}

// NCCL's protocols as its tuner models them (NCCL 2.x, src/graph/tuning.cc: ring
// latencies in us, base / per NVLink step / per network step; bandwidth relative to the
// Simple protocol's): LL 3.6 / 0.47 / 2.7 at a quarter of the bandwidth, LL128 10 / 1.9 / 4.0
// at 0.92, Simple 8.4 / 3.4 / 9.6.
void NcclProtocols(DeviceSpec& s) {
  auto add = [&](const char* name, double base_us, double nvlink_us, double net_us, double bw) {
    auto* p = s.add_collective_protocols();
    p->set_name(name);
    p->set_base_latency(base_us * 1e-6);
    p->set_intra_step_latency(nvlink_us * 1e-6);
    p->set_inter_step_latency(net_us * 1e-6);
    p->set_bandwidth_fraction(bw);
  };
  add("ll", 3.6, 0.47, 2.7, 0.25);
  add("ll128", 10.0, 1.9, 4.0, 0.92);
  add("simple", 8.4, 3.4, 9.6, 1.0);
}

// NVIDIA H100 SXM5 data sheet: dense tensor-core peaks, HBM3 3.35 TB/s, NVLink 4
// 900 GB/s (450 GB/s per direction), one 400 Gb/s NDR port per GPU.
DeviceSpec H100Spec() {
  DeviceSpec s;
  s.set_name("h100-sxm");
  AddPeak(s, "f32", 67e12);
  AddPeak(s, "tf32", 494.7e12);
  AddPeak(s, "bf16", 989.4e12);
  AddPeak(s, "f16", 989.4e12);
  s.set_memory_bandwidth(3.35e12);
  s.set_launch_overhead(4e-6);
  s.set_min_kernel_time(2.5e-6);
  s.set_event_latency(2e-6);
  s.set_flops_efficiency(0.7);
  s.set_bandwidth_efficiency(0.8);
  s.set_intra_node_bandwidth(450e9);
  s.set_intra_node_latency(5e-6);
  s.set_inter_node_bandwidth(50e9);
  s.set_inter_node_latency(8e-6);
  s.set_ranks_per_node(8);
  s.set_cores_per_node(0);
  s.set_overlap_slowdown(0.1);
  s.set_comm_threads(0);
  s.set_memory_capacity(81559 * kMiB);  // what the driver reports for an H100 80GB HBM3
  s.set_memory_reserved(kGpuReserved);
  HopperKernels(s);
  // Collectives: NCCL's ring reaches about 370 of NVLink 4's 450 GB/s (NVIDIA, in
  // NVIDIA/nccl-tests issue 212; its NVLink SHARP all-reduce, faster on 8 GPUs, is not
  // modelled); 24 of a NIC's 25 GB/s (NVIDIA, NVIDIA/nccl issue 412, for HDR; the same share of
  // NDR's 50 assumed); DGX H100: 8 NICs a node, one per GPU.
  NcclProtocols(s);
  s.set_collective_bus_efficiency(370.0 / 450.0);
  s.set_network_efficiency(0.96);
  s.set_nics_per_node(8);
  return s;
}

// NVIDIA H200 SXM data sheet: the H100's compute, HBM3e 4.8 TB/s, NVLink 4 900 GB/s.
DeviceSpec H200Spec() {
  DeviceSpec s = H100Spec();
  s.set_name("h200-sxm");
  s.set_memory_bandwidth(4.8e12);
  s.set_memory_capacity(143771 * kMiB);  // what the driver reports for an H200 (141 GB)
  return s;
}

// NVIDIA A100 80GB SXM data sheet: dense peaks, HBM2e 2.039 TB/s, NVLink 3 600 GB/s
// (300 GB/s per direction), one 200 Gb/s HDR port per GPU.
DeviceSpec A100Spec() {
  DeviceSpec s;
  s.set_name("a100-80gb");
  AddPeak(s, "f32", 19.5e12);
  AddPeak(s, "tf32", 156e12);
  AddPeak(s, "bf16", 312e12);
  AddPeak(s, "f16", 312e12);
  s.set_memory_bandwidth(2.039e12);
  s.set_launch_overhead(4e-6);
  s.set_min_kernel_time(3e-6);
  s.set_event_latency(2e-6);
  s.set_flops_efficiency(0.7);
  s.set_bandwidth_efficiency(0.8);
  s.set_intra_node_bandwidth(300e9);
  s.set_intra_node_latency(6e-6);
  s.set_inter_node_bandwidth(25e9);
  s.set_inter_node_latency(10e-6);
  s.set_ranks_per_node(8);
  s.set_cores_per_node(0);
  s.set_overlap_slowdown(0.1);
  s.set_comm_threads(0);
  s.set_memory_capacity(81920 * kMiB);  // what the driver reports for an A100 80GB
  s.set_memory_reserved(kGpuReserved);
  // Kernel model (not yet measured here on an A100): 108 SMs and the Hopper fit's tiles;
  // large bf16 GEMMs at 0.85 of peak (cuBLAS reaches 250-280 TF/s of 312 on large shapes);
  // fused attention at 0.55 (FlashAttention-2 reaches 50-73 % of an A100's peak forward and
  // backward, Dao 2023, section 4.1). The wave overhead is fitted to the only A100 kernel
  // times at hand, the Zero Bubble paper's profile of its four GPTs' pipeline stages (Qi et
  // al. 2024, Table 9: forward, input gradient and weight gradient, 12 figures;
  // tests/planning/data/zero_bubble_table5.csv, benchmarks/zb_stage_costs.sh): weight-gradient
  // GEMMs over 1024 tokens run there at about 240 TF/s, which leaves 1 us a wave (the Hopper
  // fit's 2.5 priced them 9-11 % slow). The bandwidth curve is fitted to that profile's
  // forwards and to the published runs (benchmarks/published_runs.sh) of Megatron-LM's
  // programs as they ran (fused bias-GELU and bias-dropout-add, views that copy nothing):
  // PyTorch's element-wise kernels of those runs (dropout, softmax, the fused epilogues,
  // transposes and their gradients) reach 0.56 of HBM bandwidth, half of it at 16 MiB moved,
  // i.e. about 15 us a kernel besides its bytes. A launch and a tail do not explain that
  // much (2 MiB, 1.7 us, priced the micro-batch-1 rows of 14.6B and 28.3B 8-13 % fast while
  // the large-batch rows were right); eager PyTorch's dispatch of each op would, where the GPU
  // waits for the host. Not yet measured on an A100. Fit: forwards within 2 %, weight
  // gradients within 6 %; the input gradients 10-22 % above the paper's, whose B is about its
  // F where Megatron's program has twice the forward's attention GEMMs in B and heavier
  // element-wise gradients (zb_stage_costs_test.sh holds these bounds).
  s.set_multiprocessors(108);
  s.set_gemm_tile_m(128);
  s.set_gemm_tile_n(128);
  s.set_gemm_wave_overhead(1e-6);
  AddFraction(s, "bf16", 0.85);
  AddFraction(s, "f16", 0.85);
  AddFraction(s, "f32", 0.9);
  s.set_attention_efficiency(0.55);
  FlashAttentionShapes(s);
  s.set_bandwidth_efficiency(0.56);
  s.set_bandwidth_half_bytes(16 * kMiB);
  // Collectives: NCCL's tuner caps an A100's bus bandwidth at 235 GB/s of NVLink 3's 300
  // (tuning.cc); 24 of an HDR NIC's 25 GB/s (NVIDIA/nccl issue 412); DGX A100: 8 HDR NICs.
  NcclProtocols(s);
  s.set_collective_bus_efficiency(235.0 / 300.0);
  s.set_network_efficiency(0.96);
  s.set_nics_per_node(8);
  return s;
}

}  // namespace

std::vector<std::string> BuiltinDeviceNames() { return {"cpu", "h100", "h200", "a100"}; }

StatusOr<DeviceSpec> BuiltinDeviceSpec(const std::string& name) {
  if (name == "cpu") return CpuSpec();
  if (name == "h100" || name == "h100-sxm") return H100Spec();
  if (name == "h200" || name == "h200-sxm") return H200Spec();
  if (name == "a100" || name == "a100-80gb") return A100Spec();
  return NotFound("unknown device '", name,
                  "' (built-in: cpu, h100, h200, a100; or a DeviceSpec file)");
}

StatusOr<DeviceSpec> ResolveDeviceSpec(const std::string& name_or_path) {
  StatusOr<DeviceSpec> builtin = BuiltinDeviceSpec(name_or_path);
  if (builtin.ok()) return builtin;
  if (name_or_path.find('.') == std::string::npos) return builtin.status();
  DeviceSpec spec;
  PW_RETURN_IF_ERROR(LoadProtoFile(name_or_path, "device spec", &spec));
  if (spec.name().empty()) spec.set_name(name_or_path);
  Status valid = ValidateDeviceSpec(spec);
  if (!valid.ok()) return valid.WithContext(name_or_path);
  return spec;
}

Status ValidateDeviceSpec(const DeviceSpec& s) {
  auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
  auto positive = [&](const char* field, double v) -> Status {
    if (bad(v) || v == 0)
      return InvalidArgument("device spec '", s.name(), "': ", field, " must be > 0, got ", v);
    return OkStatus();
  };
  auto non_negative = [&](const char* field, double v) -> Status {
    if (bad(v))
      return InvalidArgument("device spec '", s.name(), "': ", field, " must be >= 0, got ", v);
    return OkStatus();
  };
  if (s.peak_flops().empty())
    return InvalidArgument("device spec '", s.name(), "': no peak_flops entry");
  for (const auto& p : s.peak_flops()) {
    if (p.dtype().empty())
      return InvalidArgument("device spec '", s.name(), "': a peak_flops entry has no dtype");
    PW_RETURN_IF_ERROR(positive(("peak_flops[" + p.dtype() + "]").c_str(), p.flops_per_s()));
  }
  PW_RETURN_IF_ERROR(positive("memory_bandwidth", s.memory_bandwidth()));
  PW_RETURN_IF_ERROR(positive("intra_node_bandwidth", s.intra_node_bandwidth()));
  PW_RETURN_IF_ERROR(positive("inter_node_bandwidth", s.inter_node_bandwidth()));
  PW_RETURN_IF_ERROR(non_negative("memory_capacity", s.memory_capacity()));
  PW_RETURN_IF_ERROR(non_negative("memory_reserved", s.memory_reserved()));
  PW_RETURN_IF_ERROR(non_negative("launch_overhead", s.launch_overhead()));
  PW_RETURN_IF_ERROR(non_negative("min_kernel_time", s.min_kernel_time()));
  PW_RETURN_IF_ERROR(non_negative("event_latency", s.event_latency()));
  PW_RETURN_IF_ERROR(non_negative("intra_node_latency", s.intra_node_latency()));
  PW_RETURN_IF_ERROR(non_negative("inter_node_latency", s.inter_node_latency()));
  PW_RETURN_IF_ERROR(non_negative("overlap_slowdown", s.overlap_slowdown()));
  PW_RETURN_IF_ERROR(non_negative("comm_threads", s.comm_threads()));
  PW_RETURN_IF_ERROR(non_negative("op_overhead", s.op_overhead()));
  PW_RETURN_IF_ERROR(non_negative("reference_op_overhead", s.reference_op_overhead()));
  PW_RETURN_IF_ERROR(non_negative("busy_wake_latency", s.busy_wake_latency()));
  PW_RETURN_IF_ERROR(non_negative("wait_cpu", s.wait_cpu()));
  PW_RETURN_IF_ERROR(non_negative("transfer_cpu", s.transfer_cpu()));
  PW_RETURN_IF_ERROR(non_negative("spin_budget", s.spin_budget()));
  PW_RETURN_IF_ERROR(non_negative("long_spin_budget", s.long_spin_budget()));
  PW_RETURN_IF_ERROR(non_negative("spin_latency", s.spin_latency()));
  PW_RETURN_IF_ERROR(non_negative("held_spin_latency", s.held_spin_latency()));
  PW_RETURN_IF_ERROR(non_negative("held_wake_factor", s.held_wake_factor()));
  for (const auto& [field, share] :
       {std::pair<const char*, double>{"turn_straggle", s.turn_straggle()},
        {"spin_cpu_share", s.spin_cpu_share()}})
    if (!(share >= 0 && share <= 1))
      return InvalidArgument("device spec '", s.name(), "': ", field, " must be in [0, 1], got ",
                             share);
  for (double r : s.thread_rate())
    if (!std::isfinite(r) || r <= 0 || r > 1)
      return InvalidArgument("device spec '", s.name(), "': thread_rate entries must be in (0, 1]");
  if (s.flops_efficiency() < 0 || s.flops_efficiency() > 1 || s.bandwidth_efficiency() < 0 ||
      s.bandwidth_efficiency() > 1)
    return InvalidArgument("device spec '", s.name(), "': efficiencies must be in [0, 1]");
  PW_RETURN_IF_ERROR(non_negative("gemm_wave_overhead", s.gemm_wave_overhead()));
  PW_RETURN_IF_ERROR(non_negative("bandwidth_half_bytes", s.bandwidth_half_bytes()));
  PW_RETURN_IF_ERROR(non_negative("attention_half_sequence", s.attention_half_sequence()));
  PW_RETURN_IF_ERROR(non_negative("attention_half_head_dim", s.attention_half_head_dim()));
  PW_RETURN_IF_ERROR(
      non_negative("attention_causal_half_sequence", s.attention_causal_half_sequence()));
  PW_RETURN_IF_ERROR(non_negative("attention_backward_ratio", s.attention_backward_ratio()));
  if (s.attention_efficiency() < 0 || s.attention_efficiency() > 1)
    return InvalidArgument("device spec '", s.name(), "': attention_efficiency must be in [0, 1]");
  for (const auto& f : s.gemm_efficiency())
    if (f.dtype().empty() || !(f.fraction() > 0 && f.fraction() <= 1))
      return InvalidArgument("device spec '", s.name(),
                             "': a gemm_efficiency entry needs a dtype and a fraction in (0, 1]");
  if (s.multiprocessors() < 0 || s.gemm_tile_m() < 0 || s.gemm_tile_n() < 0)
    return InvalidArgument("device spec '", s.name(),
                           "': multiprocessors and gemm tiles must be >= 0");
  if (s.multiprocessors() > 0 &&
      (s.gemm_tile_m() == 0 || s.gemm_tile_n() == 0 || s.gemm_efficiency().empty()))
    return InvalidArgument("device spec '", s.name(),
                           "': a kernel model (multiprocessors > 0) needs gemm_tile_m, "
                           "gemm_tile_n and gemm_efficiency entries; set multiprocessors to 0 "
                           "for the flat roofline");
  if (s.cores_per_node() < 0 || s.ranks_per_node() < 0 || s.nics_per_node() < 0)
    return InvalidArgument("device spec '", s.name(),
                           "': cores_per_node, ranks_per_node and nics_per_node must be >= 0");
  for (const auto& p : s.collective_protocols()) {
    if (p.name().empty() || !(p.bandwidth_fraction() > 0 && p.bandwidth_fraction() <= 1))
      return InvalidArgument("device spec '", s.name(),
                             "': a collective_protocols entry needs a name and a "
                             "bandwidth_fraction in (0, 1]");
    for (double v : {p.base_latency(), p.intra_step_latency(), p.inter_step_latency()})
      if (bad(v))
        return InvalidArgument("device spec '", s.name(), "': collective protocol '", p.name(),
                               "' has a negative or non-finite latency");
  }
  if (!s.collective_protocols().empty() &&
      !(s.collective_bus_efficiency() > 0 && s.collective_bus_efficiency() <= 1 &&
        s.network_efficiency() > 0 && s.network_efficiency() <= 1))
    return InvalidArgument("device spec '", s.name(),
                           "': collective_protocols need collective_bus_efficiency and "
                           "network_efficiency in (0, 1]; remove the protocols for the plain "
                           "latency-bandwidth model");
  return OkStatus();
}

double PeakFlops(const DeviceSpec& spec, DataType dtype) {
  const char* name = DataTypeName(dtype);
  double f32 = 0, best = 0;
  for (const auto& p : spec.peak_flops()) {
    if (p.dtype() == name) return p.flops_per_s();
    if (p.dtype() == "f32") f32 = p.flops_per_s();
    best = std::max(best, p.flops_per_s());
  }
  return f32 > 0 ? f32 : best;
}

double RooflineTime(const DeviceSpec& spec, DataType dtype, double flops, double bytes) {
  // An unset efficiency (0) means the peaks are what kernels reach.
  double fe = spec.flops_efficiency() > 0 ? spec.flops_efficiency() : 1.0;
  double be = spec.bandwidth_efficiency() > 0 ? spec.bandwidth_efficiency() : 1.0;
  double peak = PeakFlops(spec, dtype);
  double compute = peak > 0 ? flops / (peak * fe) : 0;
  double memory = spec.memory_bandwidth() > 0 ? bytes / (spec.memory_bandwidth() * be) : 0;
  return std::max(spec.min_kernel_time(), std::max(compute, memory));
}

double ThreadRate(const DeviceSpec& spec, double threads) {
  const int cores = spec.cores_per_node();
  if (cores <= 0 || threads <= 0) return 1;
  const auto& rates = spec.thread_rate();
  if (rates.empty()) return std::min(1.0, cores / threads);
  const int n = rates.size();
  // Past the measured counts, the threads share what n of them got.
  if (threads >= n) return rates[n - 1] * n / threads;
  if (threads <= 1) return rates[0];
  int lo = static_cast<int>(threads);  // 1 <= lo < n: linear between lo and lo + 1 threads
  return rates[lo - 1] + (threads - lo) * (rates[lo] - rates[lo - 1]);
}

bool SameNode(const DeviceSpec& spec, int rank_a, int rank_b) {
  int per_node = spec.ranks_per_node() > 0 ? spec.ranks_per_node() : 1 << 30;
  return rank_a / per_node == rank_b / per_node;
}

}  // namespace pw::cost
