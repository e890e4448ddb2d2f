// `pipeweave schedule`: builds the plan of a synthetic S-stage pipeline (no model needed)
// or reads a PyTorch schedule CSV, checks it, simulates it and prints it as a table, JSON,
// CSV, an SVG picture or a Chrome trace.

#include <algorithm>
#include <array>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "cost_model/stage_flops.h"
#include "ir/file_util.h"
#include "ir/limits.h"
#include "ir/proto_io.h"
#include "ir/schedule_csv.h"
#include "ops/registry.h"
#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_checker.h"
#include "passes/pipeline/schedule_generators.h"
#include "simulator/action_simulator.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "tools/module_validation.h"
#include "tools/output_files.h"
#include "viz/chrome_trace.h"
#include "viz/schedule_svg.h"

namespace pw::tools {
namespace {

using pipeline::ScheduleKind;

// "F=1,B=2,W=1,comm=0.5" (w-mem too); unnamed costs keep their defaults.
Status ParseCosts(const std::string& text, ActionCosts& costs) {
  std::istringstream items(text);
  std::string item;
  std::vector<std::string> seen;
  while (std::getline(items, item, ',')) {
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    double* field = key == "F"       ? &costs.forward
                    : key == "B"     ? &costs.backward
                    : key == "W"     ? &costs.weight
                    : key == "comm"  ? &costs.comm
                    : key == "w-mem" ? &costs.w_mem
                                     : nullptr;
    StatusOr<double> value = eq == std::string::npos
                                 ? InvalidArgument("no value")
                                 : ParseReal(std::string_view(item).substr(eq + 1), 0);
    if (!field || !value.ok())
      return InvalidArgument("bad --costs entry '", item,
                             "' (expected F=, B=, W=, comm= or w-mem= with a finite number >= 0, "
                             "e.g. F=1,B=2,W=1,comm=0.1)");
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return InvalidArgument("bad --costs entry '", item, "': ", key, " is given twice");
    seen.push_back(key);
    *field = *value;
  }
  return OkStatus();
}

struct Request {
  pipeline::ScheduleSpec spec;
  bool with_comms = false;
  pipeline::P2POrder order = pipeline::P2POrder::kNaive;
  bool merge_backward = false;  // order torch: PyTorch's _merge_bw before _add_send_recv
  CommSemantics semantics = CommSemantics::kEager;
  bool unit_steps = false;
  bool arrows = false;
  std::string format = "table";
  std::string output;
};

// F, B and W (in GFLOP) of the busiest stage of a model module: the stage that sets a
// pipeline's steady-state pace.
StatusOr<ActionCosts> CostsFromModel(const std::string& path) {
  PW_ASSIGN_OR_RETURN(Module module, LoadValidModule(path));
  auto stages = StageFlopsOf(module, ops::Registry());
  if (!stages.ok()) return stages.status().WithContext(path);
  ActionCosts costs;
  costs.forward = costs.backward = costs.weight = 0;
  for (const StageFlops& s : *stages) {
    if (s.forward + s.backward_input + s.backward_weight <
        costs.forward + costs.backward + costs.weight)
      continue;
    costs.forward = s.forward / 1e9;
    costs.backward = s.backward_input / 1e9;
    costs.weight = s.backward_weight / 1e9;
  }
  return costs;
}

StatusOr<Request> ParseRequest(const Flags& flags) {
  Request req;
  pipeline::ScheduleSpec& spec = req.spec;
  PW_ASSIGN_OR_RETURN(std::string kind, flags.Require("kind"));
  PW_ASSIGN_OR_RETURN(spec.kind, pipeline::ParseScheduleKind(kind));
  if (flags.Has("model")) {
    PW_ASSIGN_OR_RETURN(spec.costs, CostsFromModel(flags.Get("model")));
  }
  PW_RETURN_IF_ERROR(ParseCosts(flags.Get("costs"), spec.costs));
  PW_ASSIGN_OR_RETURN(spec.mem_limit, flags.GetDouble("mem-limit", 0));
  PW_ASSIGN_OR_RETURN(spec.costs.w_mem, flags.GetDouble("w-mem", spec.costs.w_mem, 0, 1));
  if (spec.kind == ScheduleKind::kCsv) {
    PW_ASSIGN_OR_RETURN(spec.csv_file, flags.Require("file"));
    for (const char* shape : {"chunks", "model"})
      if (flags.Has(shape))
        return InvalidArgument("--", shape, " does not apply to --kind csv (the file has the ",
                               "schedule)");
  } else {
    PW_ASSIGN_OR_RETURN(int64_t stages, flags.RequireInt("stages"));
    PW_ASSIGN_OR_RETURN(int64_t mbs, flags.RequireInt("micro-batches", 1, kMaxMicroBatches));
    PW_ASSIGN_OR_RETURN(int64_t chunks, flags.GetInt("chunks", 0));
    int64_t default_ranks = chunks > 0 && stages % chunks == 0 ? stages / chunks : stages;
    PW_ASSIGN_OR_RETURN(int64_t ranks, flags.GetInt("ranks", default_ranks));
    if (stages < 1 || mbs < 1 || ranks < 1 || stages > 32767)
      return InvalidArgument("--stages, --ranks and --micro-batches must be positive (stages at ",
                             "most 32767)");
    if (chunks > 0 && stages != ranks * chunks)
      return InvalidArgument("--stages ", stages, " is not --ranks ", ranks, " x --chunks ",
                             chunks);
    spec.num_stages = static_cast<int>(stages);
    spec.num_ranks = static_cast<int>(ranks);
    spec.num_micro_batches = static_cast<int>(mbs);
    spec.placement = pipeline::DefaultPlacement(spec.kind);
    if (flags.Has("placement")) {
      PW_ASSIGN_OR_RETURN(spec.placement, ParseStagePlacement(flags.Get("placement")));
    }
  }
  req.with_comms = flags.Has("with-comms") || flags.Has("order");
  if (flags.Has("order")) {
    PW_ASSIGN_OR_RETURN(req.order, pipeline::ParseP2POrder(flags.Get("order")));
  }
  if (flags.Has("merge-bw")) {
    const std::string merge = flags.Get("merge-bw");
    if (merge != "on" && merge != "off")
      return InvalidArgument("--merge-bw takes on or off, got '", merge, "'");
    if (req.order != pipeline::P2POrder::kTorch)
      return InvalidArgument("--merge-bw applies to --order torch only");
    req.merge_backward = merge == "on";
  }
  req.semantics = pipeline::DesignedSemantics(req.order);
  if (flags.Has("comm")) {
    PW_ASSIGN_OR_RETURN(req.semantics, ParseCommSemantics(flags.Get("comm")));
  }
  req.unit_steps = flags.Has("unit-steps");
  req.arrows = flags.Has("arrows");
  req.format = flags.Get("format", "table");
  if (req.format != "table" && req.format != "json" && req.format != "csv" && req.format != "svg" &&
      req.format != "trace")
    return InvalidArgument("unknown --format '", req.format,
                           "' (known: table, json, csv, svg, trace)");
  req.output = flags.Get("output");
  return req;
}

// One rank's summary, whichever simulation ran.
struct Summary {
  double makespan = 0, cost = 0, bubble_rate = 0;
  int steps = -1;  // unit-step mode only
  std::vector<RankStats> ranks;
  std::vector<std::vector<ActionTime>> timeline;
  // What the timeline indexes with unit steps: the unit-step grid (timed, the schedule
  // itself, which is not copied).
  ActionSchedule drawn;
};

// Checks the schedule and simulates it. The timed replay is itself the deadlock check, so
// one replay does both; unit steps are a different replay and run after the check.
StatusOr<Summary> CheckAndSimulate(const Request& req, const pipeline::CheckOptions& check,
                                   const ActionSchedule& schedule) {
  Summary out;
  const double w_mem = req.spec.costs.w_mem;
  if (!req.unit_steps) {
    SimulationOptions options;
    options.costs = req.spec.costs;
    options.record_timeline = req.format == "svg" || req.format == "trace";
    PW_ASSIGN_OR_RETURN(TimedResult r, pipeline::CheckAndSimulate(schedule, check, options));
    out.makespan = r.makespan;
    out.cost = r.cost;
    out.bubble_rate = r.bubble_rate;
    out.ranks = std::move(r.ranks);
    out.timeline = std::move(r.timeline);
    return out;
  }
  PW_RETURN_IF_ERROR(pipeline::CheckSchedule(schedule, check));
  PW_ASSIGN_OR_RETURN(UnitStepResult steps, SimulateUnitSteps(schedule));
  out.steps = steps.num_steps;
  out.makespan = out.cost = steps.num_steps;
  std::vector<double> peaks = PeakActivations(schedule, w_mem);
  double busy_total = 0;
  out.drawn = schedule;
  out.drawn.ranks = steps.steps;
  out.timeline.resize(steps.steps.size());
  for (size_t r = 0; r < steps.steps.size(); ++r) {
    RankStats st;
    st.peak_activations = peaks[r];
    for (size_t i = 0; i < steps.steps[r].size(); ++i) {
      const Action& a = steps.steps[r][i];
      out.timeline[r].push_back({static_cast<double>(i), static_cast<double>(i + 1)});
      if (a.type == ActionType::kIdle) continue;
      st.busy += 1;
      if (st.busy == 1) st.first_start = i;
      st.last_end = i + 1;
    }
    st.idle = out.makespan - st.busy;
    busy_total += st.busy;
    out.ranks.push_back(st);
  }
  double ideal = out.ranks.empty() ? 0 : busy_total / out.ranks.size();
  out.bubble_rate = out.cost > 0 ? (out.cost - ideal) / out.cost : 0;
  return out;
}

std::string Fixed(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string Title(const Request& req, const ActionSchedule& s, const Summary& sum) {
  std::string title =
      StrCat(pipeline::ScheduleKindName(req.spec.kind), ": ", s.num_ranks(), " ranks, ",
             s.num_stages, " stages, ", s.num_micro_batches, " micro-batches");
  if (sum.steps >= 0) return title + StrCat(", ", sum.steps, " unit steps");
  return title + StrCat(", makespan ", Fixed(sum.makespan), ", bubble ",
                        Fixed(100 * sum.bubble_rate, 1), "%");
}

// Counts of each action type, with fused actions counted once and by their parts.
std::map<std::string, size_t> CountActions(const ActionSchedule& s) {
  // Counted by type first: a name lookup per action was a third of a large schedule's time.
  constexpr int kTypes = static_cast<int>(ActionType::kBatchP2P) + 1;
  std::array<size_t, kTypes> by_type{};
  size_t total = 0;
  for (const auto& rank : s.ranks) {
    total += rank.size();
    for (const Action& a : rank) {
      ++by_type[static_cast<int>(a.type)];
      if (!IsFused(a.type)) continue;
      for (const Action& p : s.Parts(a)) ++by_type[static_cast<int>(p.type)];
    }
  }
  total -= by_type[static_cast<int>(ActionType::kIdle)];  // fused actions count once
  by_type[static_cast<int>(ActionType::kIdle)] = 0;
  std::map<std::string, size_t> counts;
  if (total > 0) counts["total"] = total;
  for (int t = 0; t < kTypes; ++t)
    if (by_type[t] > 0) counts[ActionTypeToken(static_cast<ActionType>(t))] += by_type[t];
  return counts;
}

std::string ToJson(const Request& req, const ActionSchedule& s, const Summary& sum) {
  std::string j = "{\"kind\":";
  AppendJsonString(j, pipeline::ScheduleKindName(req.spec.kind));
  j += StrCat(",\"num_ranks\":", s.num_ranks(), ",\"num_stages\":", s.num_stages,
              ",\"micro_batches\":", s.num_micro_batches);
  j += ",\"mode\":";
  AppendJsonString(j, sum.steps >= 0 ? "unit-steps" : "timed");
  if (sum.steps >= 0) j += StrCat(",\"steps\":", sum.steps);
  j += ",\"makespan\":";
  AppendJsonNumber(j, sum.makespan);
  j += ",\"cost\":";
  AppendJsonNumber(j, sum.cost);
  j += ",\"bubble_rate\":";
  AppendJsonNumber(j, sum.bubble_rate);
  j += ",\"costs\":{\"F\":";
  AppendJsonNumber(j, req.spec.costs.forward);
  j += ",\"B\":";
  AppendJsonNumber(j, req.spec.costs.backward);
  j += ",\"W\":";
  AppendJsonNumber(j, req.spec.costs.weight);
  j += ",\"comm\":";
  AppendJsonNumber(j, req.spec.costs.comm);
  j += "},\"ranks\":[";
  for (size_t r = 0; r < sum.ranks.size(); ++r) {
    const RankStats& st = sum.ranks[r];
    if (r) j += ',';
    j += StrCat("{\"rank\":", r, ",\"busy\":");
    AppendJsonNumber(j, st.busy);
    j += ",\"idle\":";
    AppendJsonNumber(j, st.idle);
    j += ",\"span\":";
    AppendJsonNumber(j, st.span());
    j += ",\"peak_activations\":";
    AppendJsonNumber(j, st.peak_activations);
    j += '}';
  }
  j += "],\"actions\":{";
  bool first = true;
  for (const auto& [name, count] : CountActions(s)) {
    if (!first) j += ',';
    first = false;
    AppendJsonString(j, name);
    j += StrCat(":", count);
  }
  j += "}}\n";
  return j;
}

std::string ToTable(const Request& req, const ActionSchedule& s, const Summary& sum,
                    const UnitStepResult* steps) {
  std::string out = Title(req, s, sum) + "\n";
  if (steps) out += FormatStepTable(*steps, s);
  out += StrCat("makespan ", Fixed(sum.makespan), "  cost ", Fixed(sum.cost), "  bubble ",
                Fixed(100 * sum.bubble_rate, 2), "%\n");
  char line[128];
  std::snprintf(line, sizeof(line), "%6s %12s %12s %12s %16s\n", "rank", "busy", "idle", "span",
                "peak_activations");
  out += line;
  for (size_t r = 0; r < sum.ranks.size(); ++r) {
    const RankStats& st = sum.ranks[r];
    std::snprintf(line, sizeof(line), "%6zu %12s %12s %12s %16s\n", r, Fixed(st.busy).c_str(),
                  Fixed(st.idle).c_str(), Fixed(st.span()).c_str(),
                  Fixed(st.peak_activations).c_str());
    out += line;
  }
  return out;
}

std::string ToTrace(const ActionSchedule& drawn, const Summary& sum) {
  ChromeTraceWriter trace;
  for (int r = 0; r < drawn.num_ranks(); ++r) {
    trace.SetProcessName(r, StrCat("rank ", r));
    trace.SetThreadName(r, 0, "compute");
    trace.SetThreadName(r, 1, "p2p");
  }
  // Time units become milliseconds in the viewer (ts and dur are microseconds).
  constexpr double kScale = 1000;
  for (int r = 0; r < drawn.num_ranks(); ++r)
    for (size_t i = 0; i < drawn.ranks[r].size(); ++i) {
      const Action& a = drawn.ranks[r][i];
      if (a.type == ActionType::kIdle) continue;
      const ActionTime& t = sum.timeline[r][i];
      bool comm = IsComm(a.type) || a.type == ActionType::kBatchP2P;
      const Action& first = drawn.Parts(a)[0];
      std::string args =
          StrCat("{\"stage\":", first.stage, ",\"micro_batch\":", first.micro_batch, "}");
      trace.AddComplete(ActionToString(a, drawn), comm ? "p2p" : ActionTypeToken(first.type), r,
                        comm ? 1 : 0, t.start * kScale, (t.end - t.start) * kScale, args);
    }
  return trace.Finish();
}

// --kind csv takes the shape from the file; --stages, --ranks, --micro-batches and
// --placement, when given, must agree with it.
Status CheckCsvShape(const Flags& flags, const ActionSchedule& s) {
  auto check = [&](const char* name, int64_t in_file) -> Status {
    if (!flags.Has(name)) return OkStatus();
    PW_ASSIGN_OR_RETURN(int64_t given, flags.RequireInt(name));
    if (given != in_file)
      return InvalidArgument("--", name, " ", given, " does not match the file's ", in_file);
    return OkStatus();
  };
  PW_RETURN_IF_ERROR(check("stages", s.num_stages));
  PW_RETURN_IF_ERROR(check("ranks", s.num_ranks()));
  PW_RETURN_IF_ERROR(check("micro-batches", s.num_micro_batches));
  if (flags.Has("placement")) {
    PW_ASSIGN_OR_RETURN(StagePlacement placement, ParseStagePlacement(flags.Get("placement")));
    if (PlaceStages(placement, s.num_stages, s.num_ranks()) != s.stage_to_rank)
      return InvalidArgument("--placement ", flags.Get("placement"),
                             " does not match the file's stage placement");
  }
  return OkStatus();
}

StatusOr<int> RunSchedule(const std::vector<std::string>& args) {
  Flags flags;
  flags.Value("kind").Value("stages").Value("micro-batches").Value("ranks").Value("placement");
  flags.Value("chunks").Value("costs").Value("mem-limit").Value("w-mem").Value("order");
  flags.Value("comm").Value("format").Value("output").Alias("o", "output").Value("file");
  flags.Value("model").Value("merge-bw");
  flags.Switch("with-comms").Switch("unit-steps").Switch("arrows");
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (!flags.positional().empty())
    return InvalidArgument("unexpected argument '", flags.positional()[0], "'");
  PW_ASSIGN_OR_RETURN(Request req, ParseRequest(flags));
  if (!req.output.empty() && req.output.back() == '/')
    return InvalidArgument("-o must name a file, got '", req.output, "'");
  // -o may be neither the schedule file nor the model read for costs.
  std::vector<std::string> inputs;
  for (const char* input : {"file", "model"})
    if (flags.Has(input)) inputs.push_back(flags.Get(input));
  OutputFiles outputs(inputs);
  if (!req.output.empty()) PW_RETURN_IF_ERROR(outputs.Declare("-o", req.output));

  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, pipeline::GenerateSchedule(req.spec));
  if (req.spec.kind == ScheduleKind::kCsv) {
    PW_RETURN_IF_ERROR(CheckCsvShape(flags, schedule));
  }
  if (req.with_comms) {
    PW_ASSIGN_OR_RETURN(schedule, pipeline::InsertP2P(schedule, {req.order, req.merge_backward}));
  }
  pipeline::CheckOptions check;
  check.semantics = req.semantics;
  check.mem_limit = req.spec.kind == ScheduleKind::kZbAuto ? 0 : req.spec.mem_limit;
  check.w_mem = req.spec.costs.w_mem;
  PW_ASSIGN_OR_RETURN(Summary sum, CheckAndSimulate(req, check, schedule));

  const ActionSchedule& drawn = req.unit_steps ? sum.drawn : schedule;
  std::string text;
  if (req.format == "json") {
    text = ToJson(req, schedule, sum);
  } else if (req.format == "csv") {
    text = ScheduleToCsv(schedule);
  } else if (req.format == "svg") {
    SvgOptions svg;
    svg.title = Title(req, schedule, sum);
    svg.comm_arrows = req.arrows;
    text = ScheduleToSvg(drawn, sum.timeline, svg);
  } else if (req.format == "trace") {
    text = ToTrace(drawn, sum);
  } else {
    std::optional<UnitStepResult> steps;
    if (req.unit_steps) {
      steps.emplace();
      steps->num_steps = sum.steps;
      steps->steps = sum.drawn.ranks;
    }
    text = ToTable(req, schedule, sum, steps ? &*steps : nullptr);
  }
  if (req.output.empty()) {
    std::cout << text;
  } else {
    PW_RETURN_IF_ERROR(outputs.Write(req.output, text));
    PW_RETURN_IF_ERROR(outputs.Commit());
  }
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(
    schedule, "schedule", "build, check and simulate a pipeline schedule",
    "pipeweave schedule --kind K --stages S --micro-batches M [--ranks R] [--placement loop|v]\n"
    "         [--chunks V] [--costs F=1,B=1,W=1,comm=0] [--model FILE] [--mem-limit X]\n"
    "         [--w-mem Y] [--with-comms] [--order naive|parity|batched|megatron|torch]\n"
    "         [--merge-bw on|off]\n"
    "         [--comm eager|rendezvous] [--unit-steps] [--format table|json|csv|svg|trace] "
    "[--arrows]\n"
    "         [-o FILE]\n"
    "       pipeweave schedule --kind csv --file SCHEDULE.csv [...]\n"
    "  K: fthenb, 1f1b, eager-1f1b, interleaved-1f1b, zb-h1, zb-h2, zb-v, dualpipe-v, zb-auto,\n"
    "  csv. S stages run on R ranks (default S, or S/V with --chunks V); several stages per\n"
    "  rank are placed `loop` (stage s on rank s mod R) or `v` (0..R-1, R-1..0). Costs are\n"
    "  per stage: B is the input-gradient part of the backward, W the weight-gradient part;\n"
    "  comm is the latency of every cross-rank edge. --mem-limit is in M_B (one micro-batch's\n"
    "  activations on one stage). --unit-steps simulates PyTorch-style unit steps. --model\n"
    "  prices F, B and W as the GFLOPs of the busiest stage of a model module (explicit\n"
    "  --costs entries override them). --kind csv takes stages, ranks, micro-batches and\n"
    "  placement from the file (given ones must match it). --order torch equals PyTorch's\n"
    "  _add_send_recv on the per-rank lists as they are, idle cells included (as its\n"
    "  test_send_recv calls it; its runtime lowering does not merge either); --merge-bw on\n"
    "  equals _add_send_recv(_merge_bw(...)) (as its test_csv_compare lowers a compute CSV).",
    RunSchedule);

}  // namespace pw::tools
