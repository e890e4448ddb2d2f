// overlap-row-split: overlap-1f1b's adaptive op splitting for plans whose jobs run alone.
// A row-parallel matmul's two-rank tensor-parallel all-reduce has nothing to hide under
// where no other job runs beside it (zero-bubble kinds, fthenb, 1f1b without
// overlap-1f1b): cut into row blocks, with the bias, dropout and residual add after it, each
// block's all-reduce runs under the next block's work (row_split.h: bit-identical). The
// number of blocks comes from the cost model (row_split_choice.h), in forward programs
// and in split backwards' input-gradient programs (a full backward's all-reduces already
// run under its weight gradient: overlap-column-parallel-backward). With sequence
// parallelism, a forward's all-gathers and reduce-scatters are cut in chunks with their
// matmuls instead (sequence_chunks.h).

#include <optional>

#include "cost_model/estimator.h"
#include "ir/stream_type.h"
#include "passes/cost_inputs.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/streams/row_split_choice.h"
#include "passes/streams/sequence_chunks.h"

namespace pw {
namespace {

class OverlapRowSplitPass : public Pass {
 public:
  std::string_view name() const override { return "overlap-row-split"; }
  std::string_view description() const override {
    return "cuts each row-parallel matmul of the forward and backward-input programs whose "
           "tensor-parallel all-reduce nothing else hides into row blocks, with the "
           "bias, dropout and residual add after it, so that each block's all-reduce runs under "
           "the next block's work (bit-identical at any group size: every transport sums in "
           "member order), and a forward's sequence-parallel all-gathers and reduce-scatters, with "
           "their matmuls, into chunks of every member's rows, in the numbers of blocks the "
           "cost model finds fastest (needs opt --device, and --costs for measured ops); "
           "split-ops=all cuts every eligible matmul of every program (and every sequence "
           "collective of a forward) in two (tests). For plans whose jobs run "
           "alone (zero-bubble kinds, fthenb, 1f1b); overlap-1f1b makes its own cuts for the "
           "forwards it does not pair. Run after assign-streams and before insert-events.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (!context.Find<cost::Estimator>())
      return FailedPrecondition(
          "overlap-row-split chooses its blocks with the cost model: pass --device D (and "
          "--costs F from 'pipeweave profile') to 'pipeweave opt'");
    for (const Program& p : module.programs()) {
      if (!p.info().segment_of.empty() || !p.info().variant_of.empty())
        return FailedPrecondition(
            "overlap-row-split runs on plans overlap-1f1b has not rewritten ('", p.name(),
            "' is one of its programs): overlap-1f1b cuts the forwards it does not pair itself");
      for (const Op& op : p.ops())
        if (op.type == "c_allreduce_sum" && (op.stream.empty() || op.stream == "compute"))
          return FailedPrecondition(
              "overlap-row-split hides all-reduces on the communication streams, but '", p.name(),
              "' runs one on compute: run assign-streams before it");
    }
    const RowSplitMode mode =
        split_ops.value() == "all" ? RowSplitMode::kAll : RowSplitMode::kForwardBackwardInput;
    const bool all = mode == RowSplitMode::kAll;
    // Chunks are kept only where the simulated step is shorter with them (their copies and
    // smaller GEMMs cost compute the chain model cannot weigh against the rest of the plan).
    std::optional<Module> unchunked;
    if (!all && !module.plan.empty()) unchunked = module;
    RowSplitCounts counts;
    for (Program& program : module.programs()) {
      // Chunks first: a row split cuts every matmul, those of the chunks' matmuls too.
      const SequenceChunkCounts chunked = ChunkSequenceCollectives(module, program, all, context);
      counts.sequence_gathers += chunked.gathers;
      counts.sequence_scatters += chunked.scatters;
      counts += SplitRowParallelMatmuls(module, program, mode, context);
    }
    const int chunks = counts.sequence_gathers + counts.sequence_scatters;
    if (unchunked && chunks > 0) {
      RowSplitCounts alone;
      for (Program& program : unchunked->programs())
        alone += SplitRowParallelMatmuls(*unchunked, program, mode, context);
      StatusOr<double> with = SimulatedStep(module, context);
      StatusOr<double> without = SimulatedStep(*unchunked, context);
      if (with.ok() && without.ok() && *with >= *without * 0.999) {
        module = std::move(*unchunked);
        counts = alone;
        context.AddStatistic("chunks-undone-step-not-shorter", chunks);
      }
    }
    context.AddStatistic("matmuls-split", counts.matmuls);
    context.AddStatistic("wide-all-reduces-cut", counts.wide_all_reduces);
    context.AddStatistic("sequence-gathers-chunked", counts.sequence_gathers);
    context.AddStatistic("sequence-scatters-chunked", counts.sequence_scatters);
    return counts.matmuls + counts.sequence_gathers + counts.sequence_scatters > 0;
  }

 private:
  Option<std::string> split_ops{this,
                                "split-ops",
                                "auto (where the cost model finds it pays) or all (every "
                                "eligible matmul in two, for tests)",
                                "auto",
                                {"auto", "all"}};
};

}  // namespace

PW_REGISTER_PASS(OverlapRowSplitPass)

}  // namespace pw
