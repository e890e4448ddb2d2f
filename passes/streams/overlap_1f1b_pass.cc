// overlap-1f1b: the 1F1B backward-forward overlap. Two independent jobs of a rank run as
// one fused job whose programs are cut into segments that alternate on the compute stream,
// so that the tensor-parallel all-reduces of each run on the communication streams under
// the other's compute.
//
//   1. Pairs (fused_pairs.h): B(i) with the F(j) after it in the steady phase, F(i) with
//      F(i+1) in the warm-up (on later stages where the action-level simulator finds the
//      plan no slower) and B with B in the cool-down; dualpipe-v's own fused jobs.
//      Sends and recvs are placed again around the fused jobs and the plan is checked
//      deadlock-free.
//   2. Cuts (interleave.h): for each kind of pair, the two jobs' ops are priced with the
//      cost model (PassContext's estimator: `opt --device/--costs`) and list-scheduled on
//      one compute stream and the communication link; every switch between the jobs is a
//      cut, so each all-reduce is covered by the compute it is paired with. The choice is
//      checked with the simulator: a pair whose fused job does not beat the two jobs back
//      to back runs back to back (the statistics say how many).
//   3. Op splitting (row_split.h): a matmul whose all-reduce no other job hides is cut
//      into row blocks with the all-reduce, so that each block's runs under the next
//      block's matmul (bit-identical at any group size: collectives sum in member order);
//      the bias, dropout and residual add after it run per block too (each block's dropout
//      draws its rows of the whole mask), the first blocks' while the last blocks'
//      all-reduces are still on the link. The blocks are
//      views of the matmul's input (split{view}) where they lie one after another, and the
//      cuts live in a variant of the forward program that only the forwards with no
//      backward beside them run (warm-up forwards, F/F pairs).
//   4. Streams: forward collectives move to mp_fwd_comm, below the backward's mp_comm.
//
// Segment programs are real programs of the module, named after their parent and op range
// (program_segments.h). Everything only reorders: results are bit-identical. Run it after
// assign-streams (and overlap-column-parallel-backward) and before insert-events.

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "cost_model/op_price.h"
#include "ir/p2p_vars.h"
#include "ir/plan_actions.h"
#include "ir/stream_type.h"
#include "passes/cost_inputs.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/pipeline/module_stages.h"
#include "passes/streams/fused_pairs.h"
#include "passes/streams/interleave.h"
#include "passes/streams/program_segments.h"
#include "passes/streams/row_split.h"
#include "passes/streams/row_split_choice.h"
#include "passes/streams/sequence_chunks.h"
#include "simulator/action_simulator.h"
#include "simulator/memory_fit.h"
#include "simulator/simulator.h"

namespace pw {
namespace {

constexpr const char* kSupported[] = {"1f1b", "eager-1f1b", "interleaved-1f1b", "dualpipe-v"};

// One side of a fused job: its job and the programs it runs, in order (a split B: its I,
// then its W).
struct Part {
  const Job* job = nullptr;
  std::vector<const Job*> runs;  // jobs that name the programs
};

Part PartOf(const Job& job) {
  Part part{&job, {}};
  if (RunsSubJobs(job)) {
    for (const Job& sub : job.sub_jobs) part.runs.push_back(&sub);
  } else {
    part.runs.push_back(&job);
  }
  return part;
}

// A run of one part's program in the fused job: ops [begin, end) of part `chain`'s
// program `program`.
struct SegmentRun {
  int chain = 0, program = 0, begin = 0, end = 0;
};

struct Decision {
  bool interleave = false;  // the simulator found the fused job faster than back to back
  bool even = false;        // two jobs alike cut evenly, not lead-first
  double seconds = 0;       // the fused job, simulated
  double apart = 0;         // its two jobs back to back, simulated
  std::vector<SegmentRun> runs;
  std::vector<SegmentRange> segments;  // the programs the runs name, per run
};

// The key of a kind of pair: the programs of both parts, in order.
using PairKey = std::vector<std::string>;

class Overlap1F1BPass : public Pass {
 public:
  std::string_view name() const override { return "overlap-1f1b"; }
  std::string_view description() const override {
    return "1F1B backward-forward overlap: on every rank, B(i) and the F(j) after it (and, "
           "in the warm-up and cool-down, F with F and B with B; a later stage's warm-up "
           "forwards where the plan is no slower for it) become one fused job whose "
           "programs are cut into segments that alternate on the compute stream, so that "
           "each job's tensor-parallel all-reduces run under the other's compute. Cuts come "
           "from the cost model (needs opt --device, and --costs for measured ops) and are "
           "checked with the simulator; pairs that would not gain run back to back. "
           "split-ops=auto cuts a row-parallel matmul and its all-reduce (with the bias, "
           "dropout and residual add after it) into row blocks (views of its inputs where they "
           "are contiguous) so each block's all-reduce runs under the next block's work "
           "(bit-identical at any group size: every transport sums in member order), "
           "and sequence parallelism's all-gathers and reduce-scatters, with the matmuls "
           "beside them, into chunks of every member's rows (each chunk's collective under "
           "the next chunk's matmul), in a variant of the forward program "
           "(<name>.rows) that only forwards with no backward beside them run; all cuts every "
           "eligible matmul of every program (and a forward's sequence collectives) in two, "
           "off none. A B/F pair's edges (the backward's first all-gather, the forward's last "
           "reduce-scatter) run in chunks where the pair simulates shorter. Forward "
           "collectives move to mp_fwd_comm. A fused pair starts once both inputs are there, so "
           "1f1b ranks run forwards up to c*(ranks-1-r) slots earlier (rank r) where the pairs "
           "need that slack: statistics peak-in-flight-before/after say the memory it costs, "
           "max-forward-shift bounds c; where the device's memory held the plan before but "
           "not with the earlier forwards, smaller c are tried (forward-shift-lowered-to-fit) "
           "or the plan is left as it was (undone-does-not-fit). Plans of 1f1b, eager-1f1b, "
           "interleaved-1f1b "
           "and dualpipe-v; run after assign-streams and before insert-events.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override;
  // The pass with forwards at most `max_shift` slots earlier (max-forward-shift).
  StatusOr<bool> Pair(Module& module, PassContext& context, int max_shift);

 private:
  Status CheckModule(const Module& module, PassContext& context) const;
  RowSplitCounts SplitOps(Module& module, PassContext& context);
  int UseVariants(Plan& plan) const;
  StatusOr<std::vector<ChainOp>> Chain(const Module& module, const Part& part,
                                       PassContext& context);
  StatusOr<Decision> Decide(const Module& module, const Part& first, const Part& second,
                            bool lead_must_finish_first, PassContext& context);
  StatusOr<Decision> Cut(const Module& module, const Part& first, const Part& second,
                         const std::vector<ChainOp>& a, const std::vector<ChainOp>& b,
                         const InterleaveOptions& options, PassContext& context);
  StatusOr<double> Simulate(const Module& module, const std::vector<Job>& jobs,
                            const std::vector<SegmentRange>& segments, PassContext& context);
  std::vector<Job> Interleaved(const Module& module, const Part& first, const Part& second,
                               const Decision& d) const;
  StatusOr<double> ComputeSeconds(const Module& module, const std::string& program,
                                  PassContext& context);
  StatusOr<ActionCosts> StageCosts(const Module& module, const pipeline::ModuleStages& stages,
                                   PassContext& context);

  Option<std::string> split_ops{this,
                                "split-ops",
                                "cut long matmuls into row blocks: auto, all (every eligible "
                                "matmul, for tests) or off",
                                "auto",
                                {"auto", "all", "off"}};
  Option<bool> warmup{this, "warmup-cooldown",
                      "also pair F with F in the warm-up and B with B in the cool-down", true};
  Option<int> max_forward_shift{
      this, "max-forward-shift",
      "at most c: forwards run up to c*(ranks-1-r) slots earlier on rank r (more activations "
      "held) when the fused plan needs that slack to be no slower",
      2};
  std::map<PairKey, Decision> decisions_;
  std::map<std::string, std::string> variants_;  // forward program -> its row-split variant
  // A pair's edges: a backward's first all-gather (`.head`) and a forward's last
  // reduce-scatter (`.tail`) cut in chunks (sequence_chunks.h), where a B/F pair is shorter.
  std::map<std::string, std::string> edge_variants_;    // program -> its edge variant
  std::map<std::string, std::vector<ChainOp>> chains_;  // per program
};

Status Overlap1F1BPass::CheckModule(const Module& module, PassContext& context) const {
  if (!context.Find<cost::Estimator>())
    return FailedPrecondition(
        "overlap-1f1b chooses its cuts with the cost model: pass --device D (and --costs F "
        "from 'pipeweave profile') to 'pipeweave opt'");
  if (module.plan.empty())
    return FailedPrecondition(
        "overlap-1f1b pairs the jobs of a plan: run split-program,schedule{...},insert-p2p "
        "before it");
  const std::string& kind = module.plan.schedule;
  if (std::find(std::begin(kSupported), std::end(kSupported), kind) == std::end(kSupported))
    return FailedPrecondition(
        "overlap-1f1b pairs the jobs of 1f1b, eager-1f1b, "
        "interleaved-1f1b and dualpipe-v plans, not '",
        kind, "'");
  for (const Program& p : module.programs())
    for (const Op& op : p.ops()) {
      const OpDef* def = context.ops().Find(op.type);
      if (def && def->collective && op.attrs.GetString("group", "mp") == "mp" &&
          (op.stream.empty() || op.stream == "compute") && !p.info().kind.empty() &&
          p.info().kind != "optimizer")
        return FailedPrecondition(
            "overlap-1f1b hides all-reduces on the communication streams, but '", p.name(),
            "' runs one on compute: run assign-streams before it");
    }
  return OkStatus();
}

// Row splits (row_split.h) and sequence chunks (sequence_chunks.h). auto: in a variant of
// each forward program (`<name>.rows`), a matmul read only by an all-reduce is cut so that
// the all-reduce of each block runs under the next block's matmul, and sequence
// parallelism's all-gathers and reduce-scatters are cut in chunks with their matmuls, in
// the numbers of blocks the cost model finds fastest. Only forwards with no backward beside
// them run the variant (UseVariants): there nothing else hides the collectives, and they
// then show only one block; beside a backward the plain forward is hidden already and the
// cuts would only cost. Besides, each forward's last reduce-scatter and each backward's
// first all-gather in chunks, as edge variants (`.tail`, `.head`) that a B/F pair runs where
// it is shorter with them (the pair's first and last collectives have no compute of the pair
// to hide under). all: every eligible matmul of every program in two, with its all-reduce
// where it can, every eligible sequence collective of a forward and the first all-gather of
// a backward in two chunks (tests).
RowSplitCounts Overlap1F1BPass::SplitOps(Module& module, PassContext& context) {
  variants_.clear();
  edge_variants_.clear();
  RowSplitCounts counts;
  if (split_ops.value() == "off") return counts;
  if (split_ops.value() == "all") {
    for (Program& program : module.programs()) {
      // Chunks first: a row split cuts every matmul, those of the chunks' matmuls too. A
      // backward's first all-gather as its edge variant would be.
      const SequenceChunkCounts chunked = ChunkSequenceCollectives(
          module, program, /*all=*/true, context,
          program.info().kind == "forward" ? ChunkScope::kEvery : ChunkScope::kFirstGather);
      counts += SplitRowParallelMatmuls(module, program, RowSplitMode::kAll, context);
      counts.sequence_gathers += chunked.gathers;
      counts.sequence_scatters += chunked.scatters;
    }
    return counts;
  }
  std::vector<Program> variants;
  for (const Program& program : module.programs()) {
    const ProgramInfo& info = program.info();
    if (info.kind != "forward" || !info.segment_of.empty() || !info.variant_of.empty()) continue;
    Program variant = program;
    variant.set_name(program.name() + ".rows");
    if (module.FindProgram(variant.name())) continue;
    variant.info().variant_of = program.name();
    const SequenceChunkCounts chunked =
        ChunkSequenceCollectives(module, variant, /*all=*/false, context);
    const RowSplitCounts cut =
        SplitRowParallelMatmuls(module, variant, RowSplitMode::kForward, context);
    if (cut.matmuls == 0 && chunked.gathers + chunked.scatters == 0) continue;
    counts += cut;
    counts.sequence_gathers += chunked.gathers;
    counts.sequence_scatters += chunked.scatters;
    variants_[program.name()] = variant.name();
    variants.push_back(std::move(variant));
  }
  for (const Program& program : module.programs()) {
    const ProgramInfo& info = program.info();
    if (!info.segment_of.empty() || !info.variant_of.empty()) continue;
    const bool forward = info.kind == "forward";
    if (!forward && info.kind != "backward") continue;
    Program variant = program;
    variant.set_name(program.name() + (forward ? ".tail" : ".head"));
    if (module.FindProgram(variant.name())) continue;
    variant.info().variant_of = program.name();
    const SequenceChunkCounts chunked =
        ChunkSequenceCollectives(module, variant, /*all=*/false, context,
                                 forward ? ChunkScope::kLastScatter : ChunkScope::kFirstGather);
    if (chunked.gathers + chunked.scatters == 0) continue;
    edge_variants_[program.name()] = variant.name();
    variants.push_back(std::move(variant));
  }
  for (Program& p : variants) module.AddProgram(std::move(p));  // moves the programs
  return counts;
}

// Forwards alone and F/F pairs run the row-split variants; forwards beside a backward
// keep the plain program. Returns how many jobs now run a variant.
int Overlap1F1BPass::UseVariants(Plan& plan) const {
  auto variant = [&](Job& forward) {
    auto it = variants_.find(forward.program);
    if (it == variants_.end()) return 0;
    forward.program = it->second;
    return 1;
  };
  auto is_forward = [](const Job& job) { return job.kind == JobKind::kForward; };
  int n = 0;
  for (RankPlan& rank : plan.ranks)
    for (Job& job : rank.jobs) {
      if (is_forward(job)) {
        n += variant(job);
      } else if (job.kind == JobKind::kOverlapFB &&
                 std::all_of(job.sub_jobs.begin(), job.sub_jobs.end(), is_forward)) {
        for (Job& sub : job.sub_jobs) n += variant(sub);
      }
    }
  return n;
}

StatusOr<std::vector<ChainOp>> Overlap1F1BPass::Chain(const Module& module, const Part& part,
                                                      PassContext& context) {
  const cost::Estimator& estimator = *context.Find<cost::Estimator>();
  std::vector<ChainOp> chain;
  std::unordered_map<std::string, int> writer, reader;  // var -> collective that touched it
  for (const Job* run : part.runs) {
    const Program* program = module.FindProgram(run->program);
    if (!program) return NotFound("overlap-1f1b: no program named '", run->program, "'");
    auto cached = chains_.find(program->name());
    std::vector<ChainOp> ops;
    if (cached != chains_.end()) {
      ops = cached->second;
    } else {
      const int rank = PricingRank(module, *program);
      auto lookup = [&](const std::string& v) { return module.FindVar(v, program); };
      for (const Op& op : program->ops()) {
        StatusOr<cost::OpPrice> price =
            cost::PriceOp(op, module, rank, estimator, context.ops(), lookup);
        if (!price.ok())
          return price.status().WithContext(StrCat("program '", program->name(), "'"));
        ops.push_back(ChainOp{price->seconds, price->collective, -1});
      }
      chains_[program->name()] = ops;
    }
    // Which collective each op waits for: one whose result it reads, or whose input or
    // output it overwrites. A compute op that writes a var supersedes the collectives.
    for (size_t k = 0; k < ops.size(); ++k) {
      const Op& op = program->ops()[k];
      const int index = static_cast<int>(chain.size());
      int waits = -1;
      op.ForEachInput([&](const std::string& v) {
        auto w = writer.find(v);
        if (w != writer.end()) waits = std::max(waits, w->second);
      });
      op.ForEachOutput([&](const std::string& v) {
        for (auto* m : {&writer, &reader}) {
          auto it = m->find(v);
          if (it != m->end()) waits = std::max(waits, it->second);
        }
      });
      ChainOp c = ops[k];
      if (!c.collective) c.waits_for = waits;
      if (c.collective) {
        op.ForEachInput([&](const std::string& v) { reader[v] = index; });
        op.ForEachOutput([&](const std::string& v) { writer[v] = index; });
      } else {
        op.ForEachOutput([&](const std::string& v) {
          writer.erase(v);
          reader.erase(v);
        });
      }
      chain.push_back(c);
    }
  }
  return chain;
}

// Compute time of a program (its collectives left out): what a job of it occupies the
// compute stream with.
StatusOr<double> Overlap1F1BPass::ComputeSeconds(const Module& module, const std::string& name,
                                                 PassContext& context) {
  Job job;
  job.program = name;
  Part part{&job, {&job}};
  PW_ASSIGN_OR_RETURN(std::vector<ChainOp> chain, Chain(module, part, context));
  double seconds = 0;
  for (const ChainOp& op : chain) seconds += op.collective ? 0 : op.seconds;
  return seconds;
}

// F, B (or I) and W per virtual stage, as the action-level simulator takes them: the
// means, and each stage's forward against the mean forward as its scale.
StatusOr<ActionCosts> Overlap1F1BPass::StageCosts(const Module& module,
                                                  const pipeline::ModuleStages& stages,
                                                  PassContext& context) {
  const int n = stages.num_stages();
  std::vector<double> f(n, 0), b(n, 0), w(n, 0);
  for (const auto& [key, program] : stages.programs) {
    const auto& [stage, kind] = key;
    PW_ASSIGN_OR_RETURN(double seconds, ComputeSeconds(module, program, context));
    if (kind == pipeline::kForwardKind) f[stage] = seconds;
    if (kind == pipeline::kBackwardKind || kind == pipeline::kBackwardInputKind) b[stage] = seconds;
    if (kind == pipeline::kBackwardWeightKind) w[stage] = seconds;
  }
  auto mean = [&](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / std::max(1, n);
  };
  ActionCosts costs;
  const double mf = std::max(mean(f), 1e-12);
  costs.forward = 1;
  costs.backward = mean(b) / mf;
  costs.weight = mean(w) / mf;
  for (int s = 0; s < n; ++s) costs.stage_scale.push_back(f[s] > 0 ? f[s] / mf : 1.0);
  return costs;
}

// The fused job's sub-jobs for a decision: runs of whole programs name the program, other
// runs their segment.
std::vector<Job> Overlap1F1BPass::Interleaved(const Module& module, const Part& first,
                                              const Part& second, const Decision& d) const {
  std::vector<Job> jobs;
  const Part* parts[2] = {&first, &second};
  for (const SegmentRun& r : d.runs) {
    const Job& run = *parts[r.chain]->runs[r.program];
    const Program* parent = module.FindProgram(run.program);
    const bool whole = r.begin == 0 && parent && r.end == static_cast<int>(parent->ops().size());
    Job job;
    job.kind = run.kind;
    job.stage = run.stage;
    job.micro_batch = run.micro_batch;
    job.program = whole ? run.program : SegmentName({run.program, r.begin, r.end});
    jobs.push_back(std::move(job));
  }
  return jobs;
}

StatusOr<double> Overlap1F1BPass::Simulate(const Module& module, const std::vector<Job>& jobs,
                                           const std::vector<SegmentRange>& segments,
                                           PassContext& context) {
  // One pipeline rank of the mesh running just these jobs (micro-batches renumbered).
  Module mini;
  mini.name = module.name + ".pair";
  mini.mesh = module.mesh;
  mini.mesh.pp = 1;
  mini.mesh.dp = 1;
  mini.metadata = module.metadata;
  std::set<std::string> parents;
  std::map<int, int> micro_batches;
  int max_stage = 0;
  for (const Job& job : jobs) {
    micro_batches.emplace(job.micro_batch, 0);
    max_stage = std::max(max_stage, job.stage);
  }
  for (const SegmentRange& s : segments) parents.insert(s.parent);
  for (const Job& job : jobs)
    if (module.FindProgram(job.program)) parents.insert(job.program);
  for (const std::string& name : parents) mini.AddProgram(*module.FindProgram(name));
  PW_RETURN_IF_ERROR(AddSegmentPrograms(mini, segments));
  int next = 0;
  for (auto& [mb, renumbered] : micro_batches) renumbered = next++;
  mini.plan.schedule = "pair";
  mini.plan.num_micro_batches = next;
  mini.plan.num_stages = max_stage + 1;
  mini.plan.stage_to_rank.assign(max_stage + 1, 0);
  RankPlan rank{0, {}};
  for (Job job : jobs) {
    job.micro_batch = micro_batches[job.micro_batch];
    rank.jobs.push_back(std::move(job));
  }
  mini.plan.ranks = {rank};
  const cost::Simulator* simulator = context.Find<cost::Simulator>();
  cost::Simulator fallback(std::shared_ptr<const cost::Estimator>(context.Find<cost::Estimator>(),
                                                                  [](const cost::Estimator*) {}),
                           context.ops());
  PW_ASSIGN_OR_RETURN(cost::SimResult result, (simulator ? *simulator : fallback).Run(mini));
  return result.step_time;
}

StatusOr<Decision> Overlap1F1BPass::Decide(const Module& module, const Part& first,
                                           const Part& second, bool lead_must_finish_first,
                                           PassContext& context) {
  PW_ASSIGN_OR_RETURN(std::vector<ChainOp> a, Chain(module, first, context));
  PW_ASSIGN_OR_RETURN(std::vector<ChainOp> b, Chain(module, second, context));
  InterleaveOptions options;
  options.event_latency = context.Find<cost::Estimator>()->device().event_latency();
  options.same_program =
      first.runs.size() == second.runs.size() &&
      std::equal(first.runs.begin(), first.runs.end(), second.runs.begin(),
                 [](const Job* x, const Job* y) { return x->program == y->program; });
  std::vector<Job> one_then_other;
  for (const Part* part : {&first, &second})
    for (const Job* run : part->runs) one_then_other.push_back(*run);
  PW_ASSIGN_OR_RETURN(double apart_time, Simulate(module, one_then_other, {}, context));

  // Two jobs alike (warm-up F, F or cool-down B, B): the earlier leads, running whenever
  // it can, so that the job the pipeline waits for is held back least. Lead-first leaves
  // the link busy, though: the follower catches up with the lead at its first collective
  // and from then on both reach their collectives together and queue on one link (a 13B
  // stage's pair: 13.8 ms for 12.3 of compute). For warm-up forwards off the pipeline's
  // fill path (all but the pair of the step's first micro-batch; a later stage's pairs
  // exist only where the rank has slack, fused_pairs.h) the even interleaving (either job
  // runs when it can start first; 12.4 ms) is tried too and kept where the simulator finds
  // the pair shorter.
  const bool even_allowed = options.same_program && !lead_must_finish_first;
  Decision best;
  for (const bool lead_first : {true, false}) {
    if (!lead_first && !even_allowed) break;
    options.lead_first = options.same_program && lead_first;
    PW_ASSIGN_OR_RETURN(Decision cut, Cut(module, first, second, a, b, options, context));
    if (best.runs.empty() || cut.seconds < best.seconds * (1 - 1e-9)) {
      best = std::move(cut);
      best.even = options.same_program && !lead_first;
    }
  }
  best.interleave = best.seconds < apart_time * (1 - 1e-9);
  best.apart = apart_time;
  return best;
}

// One interleaving of the pair's chains as segments, with the pair's simulated time.
StatusOr<Decision> Overlap1F1BPass::Cut(const Module& module, const Part& first, const Part& second,
                                        const std::vector<ChainOp>& a,
                                        const std::vector<ChainOp>& b,
                                        const InterleaveOptions& options, PassContext& context) {
  Interleaving fused = Interleave(a, b, options);
  Decision d;

  // Runs of the merged order, split where a part moves on to its next program.
  const Part* parts[2] = {&first, &second};
  std::vector<std::vector<std::pair<int, int>>> where(2);  // chain op -> (program, op)
  for (int c = 0; c < 2; ++c)
    for (size_t p = 0; p < parts[c]->runs.size(); ++p) {
      const Program* program = module.FindProgram(parts[c]->runs[p]->program);
      for (size_t o = 0; o < program->ops().size(); ++o)
        where[c].push_back({static_cast<int>(p), static_cast<int>(o)});
    }
  for (const auto& [chain, op] : fused.order) {
    const auto [program, index] = where[chain][op];
    if (!d.runs.empty() && d.runs.back().chain == chain && d.runs.back().program == program &&
        d.runs.back().end == index) {
      ++d.runs.back().end;
    } else {
      d.runs.push_back(SegmentRun{chain, program, index, index + 1});
    }
  }
  for (const SegmentRun& r : d.runs)
    d.segments.push_back({parts[r.chain]->runs[r.program]->program, r.begin, r.end});
  std::vector<Job> together = Interleaved(module, first, second, d);
  PW_ASSIGN_OR_RETURN(d.seconds, Simulate(module, together, d.segments, context));
  return d;
}

// Forwards run earlier hold more activations: where the plan fitted the device's memory
// before and does not with the pairs, smaller shifts are tried, and the first that fits is
// kept if its step is shorter than the plan's without the pass; else the plan stays as it
// was (statistic undone-does-not-fit).
StatusOr<bool> Overlap1F1BPass::Run(Module& module, PassContext& context) {
  PW_RETURN_IF_ERROR(CheckModule(module, context));
  const int max_shift = max_forward_shift.value();
  if (max_shift < 0)
    return InvalidArgument("overlap-1f1b: max-forward-shift must be at least 0, got ", max_shift);
  const cost::DeviceSpec& device = context.Find<cost::Estimator>()->device();
  if (max_shift == 0 || device.memory_capacity() <= 0) return Pair(module, context, max_shift);
  const Module before = module;
  const auto counters = context.CurrentCounters();
  PW_ASSIGN_OR_RETURN(bool changed, Pair(module, context, max_shift));
  auto fits = [&](const Module& m) -> StatusOr<std::pair<bool, double>> {
    PW_ASSIGN_OR_RETURN(cost::SimResult result, SimulatePlan(m, context));
    return std::pair<bool, double>{cost::FitMemory(result, device).fits, result.step_time};
  };
  PW_ASSIGN_OR_RETURN(auto paired, fits(module));
  if (paired.first) return changed;
  PW_ASSIGN_OR_RETURN(auto plain, fits(before));
  if (!plain.first) return changed;  // it did not fit before either
  for (int shift = max_shift - 1; shift >= 0; --shift) {
    Module tried = before;
    context.CurrentCounters() = counters;
    PW_ASSIGN_OR_RETURN(bool tried_changed, Pair(tried, context, shift));
    PW_ASSIGN_OR_RETURN(auto result, fits(tried));
    if (!result.first) continue;
    if (result.second >= plain.second) break;  // fits, but slower than without the pass
    module = std::move(tried);
    context.AddStatistic("forward-shift-lowered-to-fit", max_shift - shift);
    return tried_changed;
  }
  module = before;
  context.CurrentCounters() = counters;
  context.AddStatistic("undone-does-not-fit");
  return false;
}

StatusOr<bool> Overlap1F1BPass::Pair(Module& module, PassContext& context, int max_shift) {
  PW_ASSIGN_OR_RETURN(pipeline::ModuleStages stages, pipeline::ReadModuleStages(module));

  // Forward and backward communication on their own streams.
  int moved = 0;
  for (Program& p : module.programs()) {
    if (p.info().kind != "forward") continue;
    for (Op& op : p.ops())
      if (op.stream == StreamTypeName(StreamType::kMpComm)) {
        op.stream = StreamTypeName(StreamType::kMpFwdComm);
        ++moved;
      }
  }
  context.AddStatistic("forward-collectives-on-mp_fwd_comm", moved);
  const RowSplitCounts split = SplitOps(module, context);
  context.AddStatistic("ops-split", split.matmuls);
  context.AddStatistic("wide-all-reduces-cut", split.wide_all_reduces);
  context.AddStatistic("sequence-gathers-chunked", split.sequence_gathers);
  context.AddStatistic("sequence-scatters-chunked", split.sequence_scatters);

  // Pairs, and the plan around them.
  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, PlanToActionSchedule(module.plan));
  schedule.skip_edges = stages.skip_edges;
  FusePairsOptions fuse_options;
  fuse_options.warmup_cooldown = warmup.value();
  fuse_options.max_shift = max_shift;
  PW_ASSIGN_OR_RETURN(fuse_options.costs, StageCosts(module, stages, context));
  StatusOr<FusedPairs> fused = FuseIndependentPairs(schedule, fuse_options);
  if (!fused.ok()) return fused.status().WithContext("overlap-1f1b");
  const std::string kind = module.plan.schedule;
  const int micro_batches = module.plan.num_micro_batches;
  module.plan = ActionScheduleToPlan(fused->schedule, kind, stages.Naming());
  module.plan.num_micro_batches = micro_batches;
  context.AddStatistic("pairs-steady", fused->steady);
  context.AddStatistic("pairs-warmup", fused->warmup);
  context.AddStatistic("pairs-warmup-later-stages", fused->late_forward_pairs);
  context.AddStatistic("pairs-cooldown", fused->cooldown);
  context.AddStatistic("pairs-dualpipe", fused->existing);
  context.AddStatistic("forwards-earlier", fused->shift);
  // Micro-batches in flight on the busiest rank: the activation memory the slack costs
  // (max-forward-shift=0 keeps it as it was, at the price of step time).
  context.AddStatistic("peak-in-flight-before", fused->peak_in_flight_before);
  context.AddStatistic("peak-in-flight-after", fused->peak_in_flight_after);
  context.AddStatistic("jobs-on-row-split-variants", UseVariants(module.plan));

  // The cuts of every kind of pair; then the jobs.
  std::vector<SegmentRange> segments;
  int interleaved = 0, apart = 0, evenly = 0, edge_jobs = 0;
  std::vector<std::tuple<Job*, Part, Part>> fused_jobs;
  for (RankPlan& rank : module.plan.ranks)
    for (Job& job : rank.jobs) {
      if (job.kind != JobKind::kOverlapFB || job.sub_jobs.size() != 2) continue;
      Part a = PartOf(job.sub_jobs[0]), b = PartOf(job.sub_jobs[1]);
      // The backward first (it holds the pipeline back); of two alike, the earlier one.
      const bool a_backward = a.job->kind != JobKind::kForward;
      const bool b_backward = b.job->kind != JobKind::kForward;
      if (b_backward && !a_backward) std::swap(a, b);
      if (a_backward == b_backward && b.job->micro_batch < a.job->micro_batch) std::swap(a, b);
      fused_jobs.push_back({&job, a, b});
    }
  // The decision for a kind of pair, made once.
  auto decision = [&](const Job& job, const Part& first,
                      const Part& second) -> StatusOr<std::pair<PairKey, const Decision*>> {
    PairKey key;
    for (const Part* part : {&first, &second}) {
      for (const Job* run : part->runs) key.push_back(run->program);
      key.push_back("|");
    }
    // Only warm-up forwards may leave lead-first: those of the step's first micro-batch
    // start the pipeline's fill, and backward pairs feed the stage before at once.
    const bool lead_must_finish_first = first.job->kind != JobKind::kForward ||
                                        second.job->kind != JobKind::kForward ||
                                        first.job->micro_batch == 0;
    if (lead_must_finish_first) key.push_back("lead");
    auto it = decisions_.find(key);
    if (it == decisions_.end()) {
      StatusOr<Decision> d = Decide(module, first, second, lead_must_finish_first, context);
      if (!d.ok()) return d.status().WithContext(StrCat("overlap-1f1b, pair ", JobName(job)));
      it = decisions_.emplace(key, std::move(d).value()).first;
    }
    return std::pair<PairKey, const Decision*>{key, &it->second};
  };
  auto pair_seconds = [](const Decision& d) { return d.interleave ? d.seconds : d.apart; };
  std::set<PairKey> used;
  std::set<std::string> edges_used;
  for (auto& [job, first, second] : fused_jobs) {
    PW_ASSIGN_OR_RETURN(auto chosen, decision(*job, first, second));
    // A B/F pair's edges: each part's program may run its edge variant (the backward's first
    // all-gather, the forward's last reduce-scatter in chunks), kept where the pair then
    // simulates shorter.
    // (The parts' runs are these sub-jobs: a program changed here is the part's.)
    for (Job& run : job->sub_jobs) {
      if (first.job->kind == second.job->kind) break;
      if (RunsSubJobs(run)) continue;
      auto edge = edge_variants_.find(run.program);
      if (edge == edge_variants_.end()) continue;
      const std::string plain = run.program;
      run.program = edge->second;
      PW_ASSIGN_OR_RETURN(auto tried, decision(*job, first, second));
      if (pair_seconds(*tried.second) < pair_seconds(*chosen.second) * (1 - 1e-9)) {
        chosen = tried;
        edges_used.insert(edge->second);
        ++edge_jobs;
      } else {
        run.program = plain;
      }
    }
    const Decision& d = *chosen.second;
    if (!d.interleave) {
      ++apart;
      continue;  // the two parts run back to back, as the fused job lists them
    }
    if (used.insert(chosen.first).second)
      segments.insert(segments.end(), d.segments.begin(), d.segments.end());
    ++interleaved;
    evenly += d.even;
    job->sub_jobs = Interleaved(module, first, second, d);
  }
  // Edge variants no pair runs are dropped.
  std::erase_if(module.programs(), [&](const Program& p) {
    for (const auto& [plain, edge] : edge_variants_)
      if (p.name() == edge) return edges_used.count(edge) == 0;
    return false;
  });
  PW_RETURN_IF_ERROR(AddSegmentPrograms(module, segments));
  context.AddStatistic("pairs-interleaved", interleaved);
  context.AddStatistic("pairs-back-to-back", apart);
  context.AddStatistic("pairs-cut-evenly", evenly);
  context.AddStatistic("paired-jobs-on-edge-variants", edge_jobs);
  int programs = 0;
  for (const Program& p : module.programs()) programs += p.info().segment_of.empty() ? 0 : 1;
  context.AddStatistic("segment-programs", programs);
  return true;
}

}  // namespace

PW_REGISTER_PASS(Overlap1F1BPass)

}  // namespace pw
