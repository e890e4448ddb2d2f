// The simulated figures of mixed precision, vocabulary parallelism and stage balancing on
// the GPT-3 6.7B shape (32 layers, hidden 4096, 32 heads, ffn 16384, seq 2048, vocab 51200,
// micro-batch 1, mp 2 x pp 4), 1f1b over 16 micro-batches, priced for the H100 (roofline
// from its data sheet, NVLink within the node):
//
//   1. the step before and after each change: f32 -> bf16 (amp) -> vocabulary-parallel ->
//      balance-stages (-> the stream passes with overlap-1f1b, which hide the
//      tensor-parallel communication), with the simulator's bubble rate (compute idle, which counts
//      the tensor-parallel all-reduces that block the compute stream), the compute stream's idle
//      share (the pipeline bubble proper), exposed communication, and the slowest rank's compute
//      over the mean;
//   2. one layer's matmul time per micro-batch against the 989 TFLOP/s bf16 peak: the
//      roofline's (whose efficiency is the spec's assumed flops_efficiency) and the one
//      measured on an H100 (COSTS, cost_model/data/h100.pbtxt by default; its provenance
//      in cost_model/data/README.md).
//
//   build/benchmarks/amp_figures [MICRO_BATCHES (16)] [COSTS]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

#include "cost_model/estimator.h"
#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw {
namespace {

constexpr int kPp = 4;

models::GptConfig Gpt67B(bool vocab_parallel) {
  models::GptConfig c;
  c.layers = 32, c.hidden = 4096, c.heads = 32, c.ffn = 16384, c.seq = 2048, c.vocab = 51200;
  c.micro_batch_size = 1, c.mp = 2, c.pp = kPp;
  c.vocab_parallel = vocab_parallel;
  return c;
}

void Check(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "amp_figures: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

StatusOr<Module> Planned(bool vocab_parallel, const std::string& passes, int micro_batches,
                         std::shared_ptr<cost::Estimator> est, const std::string& after = "") {
  PW_ASSIGN_OR_RETURN(Module m, models::BuildGpt(Gpt67B(vocab_parallel)));
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline(
      StrCat(passes, ",split-program,schedule{kind=1f1b,micro-batches=", micro_batches,
             "},insert-p2p", after)));
  PassContext context(ops::Registry());
  context.Attach(std::move(est));
  PW_RETURN_IF_ERROR(pm.Run(m, context).status());
  return m;
}

void StepTable(std::shared_ptr<cost::Estimator> est, int micro_batches) {
  struct Row {
    const char* name;
    bool vocab_parallel;
    const char* passes;
    const char* after = "";  // passes after insert-p2p
  };
  const Row rows[] = {
      {"f32, whole vocabulary, whole-layer stages", false, "append-backward{optimizer=adam}"},
      {"+ bf16 (amp)", false, "append-backward{optimizer=adam},amp{dtype=bf16}"},
      {"+ vocabulary-parallel", true, "append-backward{optimizer=adam},amp{dtype=bf16}"},
      {"+ balance-stages", true,
       "append-backward{optimizer=adam},amp{dtype=bf16},balance-stages{report=false}"},
      {"+ stream passes and overlap-1f1b", true,
       "append-backward{optimizer=adam},amp{dtype=bf16},balance-stages{report=false}",
       ",assign-streams,overlap-column-parallel-backward,overlap-1f1b,insert-events"},
  };
  const double formula = double(kPp - 1) / (micro_batches + kPp - 1);
  std::printf("GPT-3 6.7B shape, mp 2 x pp 4, 1f1b, %d micro-batches, h100 (simulated)\n",
              micro_batches);
  std::printf("1F1B's bubble (p-1)/(m+p-1) = %.1f %%\n\n", 100 * formula);
  std::printf("%-44s %10s %8s %12s %10s %11s\n", "plan", "step ms", "bubble", "stream idle",
              "exposed", "max/mean");
  std::printf("%-44s %10s %8s %12s %10s %11s\n", "", "", "(sim)", "(compute)", "comm ms",
              "rank work");
  cost::Simulator sim(est, ops::Registry());
  for (const Row& r : rows) {
    StatusOr<Module> m = Planned(r.vocab_parallel, r.passes, micro_batches, est, r.after);
    Check(m.status(), r.name);
    StatusOr<cost::SimResult> s = sim.Run(*m);
    Check(s.status(), r.name);
    // The compute stream runs kernels and the all-reduces that block it: what it does not
    // run is the pipeline's bubble.
    std::vector<double> busy;
    for (const cost::RankResult& rr : s->ranks)
      busy.push_back(rr.busy[static_cast<int>(StreamType::kCompute)]);
    const double mean = std::accumulate(busy.begin(), busy.end(), 0.0) / busy.size();
    const double max = *std::max_element(busy.begin(), busy.end());
    std::printf("%-44s %10.1f %7.1f%% %11.1f%% %10.1f %10.3f\n", r.name, 1e3 * s->step_time,
                100 * s->bubble_rate, 100 * (1 - mean / s->step_time), 1e3 * s->exposed_comm,
                max / mean);
  }
}

// One layer's GEMMs (forward and the gradients made from it) on one mp rank: the roofline
// estimate, whose efficiency is the device spec's flops_efficiency (an assumption fed back,
// not a measurement), and the times `measured` (an estimator over a cost table measured on
// an H100) takes from its table.
void MatmulFigure(std::shared_ptr<cost::Estimator> est, const cost::Estimator& measured) {
  StatusOr<Module> m = Planned(true, "append-backward{optimizer=adam},amp{dtype=bf16}", 16, est);
  Check(m.status(), "bf16 module");
  const std::string layer = "layer10.";
  double flops = 0, seconds = 0, measured_flops = 0, measured_seconds = 0;
  int gemms = 0, found = 0;
  for (const Program& p : m->programs())
    for (const Op& op : p.ops()) {
      const std::string& owner = op.origin.empty() ? OriginName(op) : op.origin;
      if (owner.rfind(layer, 0) != 0) continue;
      if (op.type != "matmul" && op.type != "matmul_weight_grad") continue;
      auto sig = cost::SignatureOf(op, ops::Registry(),
                                   [&](const std::string& v) { return p.FindVar(v); });
      Check(sig.status(), "signature");
      flops += sig->flops;
      seconds += est->OpTime(*sig).seconds;
      ++gemms;
      const cost::Estimate hit = measured.OpTime(*sig);
      if (hit.path == cost::EstimatePath::kTable) {
        measured_flops += sig->flops;
        measured_seconds += hit.seconds;
        ++found;
      }
    }
  const cost::DeviceSpec& spec = est->device();
  const double peak = cost::PeakFlops(spec, DataType::kBFloat16);
  std::printf(
      "\nOne layer's matmuls per micro-batch on one mp rank (bf16, forward + backward, "
      "%d GEMMs): %.1f GFLOP, %.3f ms at the %.0f TFLOP/s peak\n",
      gemms, flops / 1e9, 1e3 * flops / peak, peak / 1e12);
  std::printf(
      "  roofline: %.3f ms, assuming the %s spec's flops_efficiency of %.0f %% of peak (an "
      "input, not measured)\n",
      1e3 * seconds, spec.name().c_str(), 100 * spec.flops_efficiency());
  if (found == 0) {
    std::printf("  measured: none of these GEMMs is in the cost table\n");
    return;
  }
  std::printf(
      "  measured on an H100 (cost table, %d of %d GEMMs): %.3f ms for %.1f GFLOP, %.0f "
      "TFLOP/s, %.0f %% of peak\n",
      found, gemms, 1e3 * measured_seconds, measured_flops / 1e9,
      measured_flops / measured_seconds / 1e12, 100 * measured_flops / peak / measured_seconds);
}

}  // namespace
}  // namespace pw

int main(int argc, char** argv) {
  const int micro_batches = argc > 1 ? std::atoi(argv[1]) : 16;
  if (micro_batches < 1) {
    std::fprintf(stderr, "amp_figures: MICRO_BATCHES must be >= 1\n");
    return 1;
  }
  auto est =
      pw::cost::Estimator::Create(*pw::cost::BuiltinDeviceSpec("h100"), pw::cost::OpCostTable());
  pw::Check(est.status(), "h100 estimator");
  const std::string costs = argc > 2 ? argv[2] : PW_H100_COSTS;
  auto table = pw::cost::OpCostTable::Load(costs);
  pw::Check(table.status(), costs.c_str());
  auto measured = pw::cost::Estimator::Create(*pw::cost::BuiltinDeviceSpec("h100"), *table);
  pw::Check(measured.status(), costs.c_str());
  pw::StepTable(*est, micro_batches);
  pw::MatmulFigure(*est, **measured);
  return 0;
}
