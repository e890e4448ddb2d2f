// `pipeweave sim FILE`: predicts a planned module's step on a device with the empirical
// cost model and the op-level multi-stream simulator.

#include <cstdio>

#include "cost_model/cache_state.h"
#include "executor/sequential_plan.h"
#include "ir/file_util.h"
#include "ir/limits.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "simulator/simulator.h"
#include "simulator/stale_bytes.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "tools/module_validation.h"
#include "tools/output_files.h"
#include "tools/profiled_threads.h"
#include "viz/sim_report.h"
#include "viz/sim_svg.h"
#include "viz/sim_trace.h"

namespace pw::tools {
namespace {

constexpr const char* kUsage =
    "pipeweave sim FILE [--device cpu|h100|a100|SPEC_FILE (cpu)] [--costs COSTS]\n"
    "           [--format table|json] [--trace OUT.json] [--svg OUT.svg] [--coverage]\n"
    "           [--pipeline PASSES] [--micro-batches M (1)] [--p2p eager|rendezvous]\n"
    "           [--runtime executor|reference] [--mem-limit GIB] [--threads N]\n"
    "           [--collectives member-order|nccl] [--steps K (1)]\n"
    "Simulates one training step of the module's plan on every rank: streams, events,\n"
    "send/recv, collectives, compute slowed beside communication, and ranks sharing the\n"
    "cores of a CPU node. Op times come from COSTS (pipeweave profile) where measured,\n"
    "interpolated from the op type's measured points, else from the device's roofline.\n"
    "Prints the step time, the bubble rate, and per rank the busy time of each stream, the\n"
    "peak bytes and the exposed communication (run while none of the rank's compute runs)\n"
    "by kind: mp_forward, mp_backward (tensor-parallel, by the role of the job), pp_send,\n"
    "pp_recv, dp, sp_forward, sp_backward (sequence parallelism's all-gathers and\n"
    "reduce-scatters). --format json prints one object with step_time_ms, bubble_rate,\n"
    "exposed_comm_ms {mp_forward, mp_backward, pp_send, pp_recv, dp, sp_forward, sp_backward,\n"
    "total},\n"
    "busy_ms_by_stream {compute, mp_comm, ..., mp_fwd_comm} (each key the worst\n"
    "rank's), coverage, and ranks with the same keys per rank. --coverage adds the share of\n"
    "estimated time from each estimate path and, on the CPU, what each rank's compute reads,\n"
    "and writes into memory gone cold, beyond a cache a step (LRU distance in distinct bytes;\n"
    "where a schedule's order makes a CPU's ops dearer: fthenb's backwards read what the\n"
    "forwards wrote long before): the cost table's cache where it priced one, else a core's L2.\n"
    "--trace writes a Chrome trace (one track per\n"
    "rank and stream), --svg a timeline with one lane per stream of every pipeline rank (its\n"
    "first mp/dp replica): compute coloured by job kind, communication by kind, so overlap\n"
    "shows. An unplanned pp=1 module is simulated as the sequential reference (M\n"
    "micro-batches, then the optimizer); --pipeline runs passes first (e.g.\n"
    "\"append-backward,split-program,schedule{kind=1f1b,micro-batches=8},insert-p2p\").\n"
    "--runtime reference prices ops with the sequential reference runner's per-op overhead\n"
    "(pipeweave run --reference) instead of the executor's, and its sums of the gradients (an\n"
    "add per gradient and micro-batch, where the executor's weight-gradient GEMMs add into\n"
    "the sums).\n"
    "Memory: every rank's peak (parameters, gradients, optimizer state, activations, received\n"
    "buffers; plus the device's memory_reserved for the runtime) is held against the device's\n"
    "memory (--mem-limit GIB instead): one line says which ranks do not fit and by how much;\n"
    "the JSON has \"fits\" at the top and per rank. The ranks of a CPU node share its memory."
    "\n--threads N: the kernel threads each process of the run uses (default: what 'pipeweave\n"
    "run' picks); a CPU cost table profiled at another count is refused.\n"
    "--collectives: how a GPU spec prices collectives: member-order (default), the\n"
    "deterministic ones pipeweave's transports run (across nodes each member's chunks cross\n"
    "on its own NIC), or nccl, NCCL's own ring and tree (what frameworks without\n"
    "deterministic sums run; across nodes a ring per member of a node, on its own NIC).\n"
    "--steps K (up to 64; > 1): also simulates K steps back to back, as 'pipeweave run'\n"
    "runs them: each rank issues its next step when its own streams have finished the last,\n"
    "with no barrier between the ranks, so a rank that ends a step early (the last stage of\n"
    "a zero-bubble schedule) starts the next one early unless the plan waits (fp16's\n"
    "overflow all-reduce does). Prints the steady step, (end of step K - end of step 1) /\n"
    "(K - 1) (json: steady_step_time_ms); what a run measures for plans whose ranks end\n"
    "apart.";

// Per rank, what its compute finds beyond a cache a step (simulator/stale_bytes.h): where a
// schedule's order makes a CPU's ops dearer. The cache is the one the table priced, else a
// core's L2.
std::string StaleBytesText(const cost::SimGraph& graph, const cost::OpCostTable& table) {
  const bool priced = cost::HasStalePrice(table);
  const int64_t capacity = priced ? table.proto().stale_capacity() : cost::ReadCacheSizes().l2;
  const cost::StaleBytes stale = cost::CountStaleBytes(graph, capacity);
  char head[160];
  if (priced)
    std::snprintf(head, sizeof head,
                  "\nmemory beyond a %lld KiB cache a step (the cost table's: %.3f ns a byte more "
                  "than its runs found):\n",
                  static_cast<long long>(capacity >> 10), table.proto().stale_price() * 1e9);
  else
    std::snprintf(head, sizeof head, "\nmemory beyond a core's L2 (%lld KiB) a step:\n",
                  static_cast<long long>(capacity >> 10));
  std::string out = head;
  // What the price moved each rank's compute by, against the profiled runs' means.
  const std::vector<double> added = cost::StaleSeconds(table, graph, stale);
  for (size_t rank = 0; rank < graph.rank_order.size(); ++rank) {
    int64_t reads = 0, writes = 0, touched = 0;
    double seconds = 0;
    for (int i : graph.rank_order[rank]) {
      const cost::SimInstr& instr = graph.instrs[i];
      if (instr.kind != cost::InstrKind::kCompute) continue;
      reads += stale.reads[i];
      writes += stale.writes[i];
      for (int slot : instr.uses) touched += graph.slots[slot].bytes;
      if (!added.empty()) seconds += added[i];
    }
    if (touched == 0) continue;  // a folded graph's stand-in covers this rank
    const double mib = 1048576.0 * graph.steps;
    char line[200];
    std::snprintf(line, sizeof line,
                  "  rank %zu: reads %.2f MiB, writes into cold memory %.2f MiB, of %.2f MiB its "
                  "compute touches (%.1f %%)\n",
                  rank, reads / mib, writes / mib, touched / mib,
                  100.0 * static_cast<double>(reads + writes) / static_cast<double>(touched));
    out += line;
    if (!added.empty()) {
      std::snprintf(line, sizeof line,
                    "    the price moves its compute by %+.3f ms a step (what it finds there "
                    "against the profiled runs' mean)\n",
                    seconds / graph.steps * 1e3);
      out += line;
    }
  }
  return out;
}

StatusOr<int> RunSim(const std::vector<std::string>& args) {
  Flags flags;
  for (const char* name : {"device", "costs", "format", "trace", "svg", "pipeline", "micro-batches",
                           "p2p", "runtime", "mem-limit", "threads", "collectives", "steps"})
    flags.Value(name);
  flags.Switch("coverage");
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.positional().size() != 1)
    return InvalidArgument("expected one module file, got ", flags.positional().size(),
                           " positional arguments");
  const std::string format = flags.Get("format", "table");
  if (format != "table" && format != "json")
    return InvalidArgument("flag --format: unknown format '", format, "' (table, json)");
  const std::string p2p = flags.Get("p2p", "eager");
  if (p2p != "eager" && p2p != "rendezvous")
    return InvalidArgument("flag --p2p: unknown mode '", p2p, "' (eager, rendezvous)");
  const std::string runtime = flags.Get("runtime", "executor");
  if (runtime != "executor" && runtime != "reference")
    return InvalidArgument("flag --runtime: unknown runtime '", runtime, "' (executor, reference)");
  PW_ASSIGN_OR_RETURN(int64_t micro_batches, flags.GetInt("micro-batches", 1, 1, kMaxMicroBatches));
  PW_ASSIGN_OR_RETURN(int64_t mem_limit, flags.GetGibAsBytes("mem-limit"));
  PW_ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0, 1, 4096));
  PW_ASSIGN_OR_RETURN(int64_t steps, flags.GetInt("steps", 1, 1, 64));
  StatusOr<cost::CollectiveAlgorithm> collectives =
      cost::ParseCollectiveAlgorithm(flags.Get("collectives", "member-order"));
  if (!collectives.ok()) return collectives.status().WithContext("flag --collectives");

  // The device and the table are checked before the module is loaded (and passes run).
  const std::string path = flags.positional()[0];
  std::vector<std::string> inputs{path};
  if (flags.Has("costs")) inputs.push_back(flags.Get("costs"));
  if (flags.Has("device")) inputs.push_back(flags.Get("device"));
  OutputFiles outputs(inputs);
  for (const char* flag : {"trace", "svg"})
    if (flags.Has(flag)) PW_RETURN_IF_ERROR(outputs.Declare(StrCat("--", flag), flags.Get(flag)));
  PW_ASSIGN_OR_RETURN(std::shared_ptr<cost::Estimator> estimator,
                      MakeEstimator(flags.Get("device", "cpu"), flags.Get("costs")));
  estimator->set_collective_algorithm(*collectives);
  PW_ASSIGN_OR_RETURN(Module module, LoadTrainingModule(path, flags.Get("pipeline"), estimator));
  PW_RETURN_IF_ERROR(ValidateModule(module).WithContext(path));
  // A CPU table must be profiled at the kernel threads the run uses: a planned module runs
  // one process per rank, an unplanned one (or --runtime reference) the reference runner.
  const int processes =
      module.plan.empty() || runtime == "reference" ? 1 : module.mesh.world_size();
  PW_RETURN_IF_ERROR(CheckProfiledThreads(estimator->table(), processes, static_cast<int>(threads))
                         .WithContext(flags.Get("costs")));
  if (module.plan.empty()) {
    StatusOr<Module> sequential = WithSequentialPlan(module, static_cast<int>(micro_batches));
    if (!sequential.ok()) return sequential.status().WithContext(path);
    module = std::move(sequential).value();
  }
  cost::SimOptions options;
  options.rendezvous_p2p = p2p == "rendezvous";
  options.record_timeline = flags.Has("trace") || flags.Has("svg");
  if (runtime == "reference") {
    options.op_overhead = estimator->device().reference_op_overhead();
    options.fuse_grad_accumulation = false;  // it adds each micro-batch's gradients itself
  }
  options.steps = static_cast<int>(steps);
  // A table profiled in runs of several schedules prices the plan with its schedule's own.
  const std::shared_ptr<const cost::Estimator> scheduled =
      cost::Estimator::ForSchedule(estimator, module.plan.schedule);
  cost::Simulator simulator(scheduled, ops::Registry(), options);
  if (flags.Has("costs"))
    if (std::string note = OtherScheduleNote(estimator->table(), module.plan.schedule);
        !note.empty())
      std::fprintf(stderr, "%s: %s\n", flags.Get("costs").c_str(), note.c_str());
  cost::SimGraph graph;
  StatusOr<cost::SimResult> result = simulator.Run(module, &graph);
  if (!result.ok()) return result.status().WithContext(path);

  if (flags.Has("trace"))
    PW_RETURN_IF_ERROR(outputs.Write(flags.Get("trace"), cost::SimTraceJson(graph, *result)));
  if (flags.Has("svg")) {
    std::string title =
        StrCat(module.name, ": ", module.plan.schedule, ", ", module.plan.num_micro_batches,
               " micro-batches on ", estimator->device().name(), " (op-level simulation)");
    PW_ASSIGN_OR_RETURN(std::string svg, cost::SimScheduleSvg(module, graph, *result, title));
    PW_RETURN_IF_ERROR(outputs.Write(flags.Get("svg"), svg));
  }
  PW_RETURN_IF_ERROR(outputs.Commit());
  const cost::MemoryFit fit = cost::FitMemory(*result, estimator->device(), mem_limit);
  if (format == "json") {
    std::fputs(cost::SimResultToJson(*result, graph, &fit).c_str(), stdout);
  } else {
    std::printf("%s: %s plan, %d micro-batches, %d ranks, device %s\n", path.c_str(),
                module.plan.schedule.c_str(), module.plan.num_micro_batches, graph.world_size,
                estimator->device().name().c_str());
    std::fputs(cost::SimResultToTable(*result, graph, &fit).c_str(), stdout);
    if (flags.Has("coverage")) {
      std::fputs(("\n" + cost::CoverageTable(*result)).c_str(), stdout);
      if (estimator->device().name() == "cpu")
        std::fputs(StaleBytesText(graph, scheduled->table()).c_str(), stdout);
    }
  }
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(sim, "sim", "simulate a planned module's step with the cost model", kUsage,
                    RunSim);

}  // namespace pw::tools
