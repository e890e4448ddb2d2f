#include "ab/ab_report.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "viz/chrome_trace.h"

namespace pw::ab {
namespace {

constexpr cost::CommClass kClasses[] = {cost::CommClass::kMpForward, cost::CommClass::kMpBackward,
                                        cost::CommClass::kPpSend,    cost::CommClass::kPpRecv,
                                        cost::CommClass::kDp,        cost::CommClass::kSpForward,
                                        cost::CommClass::kSpBackward};

int Index(cost::CommClass c) { return static_cast<int>(c); }

double MiB(double bytes) { return bytes / (1024.0 * 1024.0); }

// ---- JSON ---------------------------------------------------------------------------

// Appends `"key": ` after a comma unless it opens its object.
void Key(std::string& out, const char* key) {
  if (out.back() != '{' && out.back() != '[') out += ", ";
  AppendJsonString(out, key);
  out += ": ";
}

void Number(std::string& out, const char* key, double value) {
  Key(out, key);
  AppendJsonNumber(out, value);
}

void Bool(std::string& out, const char* key, bool value) {
  Key(out, key);
  out += value ? "true" : "false";
}

void String(std::string& out, const char* key, const std::string& value) {
  Key(out, key);
  AppendJsonString(out, value);
}

template <typename T>
void Array(std::string& out, const std::vector<T>& values) {
  out += "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    AppendJsonNumber(out, static_cast<double>(values[i]));
  }
  out += "]";
}

// `"exposed_comm_ms": {["total": ..., ]<each class>: ...}`, each class's value from `of`.
template <typename Of>
void ExposedJson(std::string& out, std::optional<double> total, Of of) {
  Key(out, "exposed_comm_ms");
  out += "{";
  if (total) Number(out, "total", *total);
  for (cost::CommClass c : kClasses) Number(out, cost::CommClassName(c), of(Index(c)));
  out += "}";
}

// `"busy_ms_by_stream": {<each stream type>: ...}`, each value from `of`.
template <typename Of>
void BusyJson(std::string& out, Of of) {
  Key(out, "busy_ms_by_stream");
  out += "{";
  for (StreamType s : kAllStreamTypes) Number(out, StreamTypeName(s), of(StreamIndex(s)));
  out += "}";
}

// The figures of one plan, or (with `ratio_of`) B/A of each against it.
void SimJson(std::string& out, const SimFigures& f, const SimFigures* ratio_of) {
  auto value = [&](double b, double a) { return ratio_of ? Ratio(a, b) : b; };
  const SimFigures& a = ratio_of ? *ratio_of : f;
  out += "{";
  Number(out, "step_time_ms", value(f.step_ms, a.step_ms));
  Number(out, "bubble_rate", value(f.bubble_rate, a.bubble_rate));
  ExposedJson(out, value(f.exposed_comm_ms, a.exposed_comm_ms),
              [&](int c) { return value(f.exposed_ms_by_class[c], a.exposed_ms_by_class[c]); });
  BusyJson(out, [&](int s) { return value(f.busy_ms_by_stream[s], a.busy_ms_by_stream[s]); });
  Key(out, "peak_bytes");
  std::vector<double> peaks;
  for (size_t k = 0; k < f.peak_bytes.size(); ++k)
    peaks.push_back(value(f.peak_bytes[k], k < a.peak_bytes.size() ? a.peak_bytes[k] : 0));
  Array(out, peaks);
  Number(out, "max_peak_bytes", value(f.max_peak_bytes, a.max_peak_bytes));
  if (f.cpu_ms > 0) Number(out, "cpu_ms_per_step", value(f.cpu_ms, a.cpu_ms));
  if (!ratio_of) {
    Bool(out, "fits", f.fits);
    // Per rank, in rank order: exposed_comm_ms by class and busy_ms_by_stream.
    Key(out, "ranks");
    out += "[";
    for (size_t r = 0; r < f.rank_exposed_ms.size(); ++r) {
      out += r ? ", {" : "{";
      ExposedJson(out, std::nullopt, [&](int c) { return f.rank_exposed_ms[r][c]; });
      BusyJson(out, [&](int s) { return f.rank_busy_ms[r][s]; });
      out += "}";
    }
    out += "]";
  }
  out += "}";
}

// `"key": [[round 1's values], [round 2's], ...]`.
void PerRound(std::string& out, const char* key, const MeasuredPlan& p,
              std::vector<double> MeasuredRound::*values) {
  Key(out, key);
  out += "[";
  for (const MeasuredRound& r : p.rounds) {
    if (out.back() != '[') out += ", ";
    Array(out, r.*values);
  }
  out += "]";
}

void RunPlanJson(std::string& out, const MeasuredPlan& p) {
  out += "{";
  Number(out, "median_step_ms", p.median_step_ms);
  PerRound(out, "step_ms", p, &MeasuredRound::step_ms);
  Number(out, "median_step_cpu_ms", p.median_step_cpu_ms);
  PerRound(out, "step_cpu_ms", p, &MeasuredRound::step_cpu_ms);
  PerRound(out, "losses", p, &MeasuredRound::losses);
  Key(out, "peak_bytes");
  Array(out, p.peak_bytes);
  Number(out, "max_peak_bytes", static_cast<double>(p.max_peak_bytes));
  out += "}";
}

void RunJson(std::string& out, const AbReport::Run& run) {
  const MeasuredAB& m = run.measured;
  out += "{";
  Number(out, "nproc", run.nproc);
  Number(out, "rounds", run.rounds);
  Number(out, "steps_per_round", static_cast<double>(run.steps));
  Number(out, "warmup_steps_per_round", 1);
  Key(out, "a");
  RunPlanJson(out, m.a);
  Key(out, "b");
  RunPlanJson(out, m.b);
  Key(out, "ratio");
  out += "{";
  Number(out, "median_step_ms", m.step_ratio.ratio);
  Key(out, "ci95");
  Array(out, std::vector<double>{m.step_ratio.low, m.step_ratio.high});
  Number(out, "median_step_cpu_ms", m.cpu_ratio.ratio);
  Key(out, "cpu_ci95");
  Array(out, std::vector<double>{m.cpu_ratio.low, m.cpu_ratio.high});
  Number(out, "max_peak_bytes",
         Ratio(static_cast<double>(m.a.max_peak_bytes), static_cast<double>(m.b.max_peak_bytes)));
  String(out, "verdict", Verdict(m.step_ratio));
  out += "}";
  Key(out, "losses");
  out += "{";
  Bool(out, "bit_identical", m.losses.bit_identical);
  Number(out, "max_rel_diff", m.losses.max_rel_diff);
  Number(out, "tolerance", run.loss_tolerance);
  Number(out, "compared", m.losses.compared);
  out += "}";
  Key(out, "params");
  out += "{";
  Bool(out, "bit_identical", m.params.bit_identical);
  Number(out, "max_rel_diff", m.params.max_rel_diff);
  Number(out, "tensors", m.params.tensors);
  String(out, "mismatch", m.params.mismatch);
  out += "}}";
}

// ---- table --------------------------------------------------------------------------

std::string Format(const char* fmt, double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// "label   A   B   B/A[   extra]"
std::string Row(const std::string& label, const std::string& a, const std::string& b,
                const std::string& ratio, const std::string& extra = "") {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-28s %12s %12s %9s%s%s\n", label.c_str(), a.c_str(), b.c_str(),
                ratio.c_str(), extra.empty() ? "" : "   ", extra.c_str());
  return buf;
}

std::string NumberRow(const std::string& label, const char* fmt, double a, double b) {
  return Row(label, Format(fmt, a), Format(fmt, b), Format("%.3f", Ratio(a, b)));
}

std::string Interval(const RatioInterval& r) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "[%.3f, %.3f]", r.low, r.high);
  return buf;
}

std::string SimTable(const AbReport::Sim& sim) {
  const SimFigures &a = sim.a, &b = sim.b;
  std::string out = Row("simulated on " + sim.device, "A", "B", "B/A");
  out += NumberRow("step time ms", "%.3f", a.step_ms, b.step_ms);
  if (a.cpu_ms > 0 && b.cpu_ms > 0)
    out += NumberRow("CPU ms a step (all ranks)", "%.3f", a.cpu_ms, b.cpu_ms);
  out += NumberRow("bubble rate %", "%.1f", 100 * a.bubble_rate, 100 * b.bubble_rate);
  out += NumberRow("exposed comm ms (worst)", "%.3f", a.exposed_comm_ms, b.exposed_comm_ms);
  for (cost::CommClass c : kClasses)
    out += NumberRow(StrCat("  ", cost::CommClassName(c)), "%.3f", a.exposed_ms_by_class[Index(c)],
                     b.exposed_ms_by_class[Index(c)]);
  for (StreamType s : kAllStreamTypes) {
    double x = a.busy_ms_by_stream[StreamIndex(s)], y = b.busy_ms_by_stream[StreamIndex(s)];
    if (x == 0 && y == 0) continue;  // a stream neither plan uses
    out += NumberRow(StrCat("busy ", StreamTypeName(s), " ms (worst)"), "%.3f", x, y);
  }
  for (size_t k = 0; k < a.peak_bytes.size() && k < b.peak_bytes.size(); ++k)
    out +=
        NumberRow(StrCat("peak MiB rank ", k), "%.2f", MiB(a.peak_bytes[k]), MiB(b.peak_bytes[k]));
  out += Row("fits " + sim.device + " memory", a.fits ? "yes" : "NO", b.fits ? "yes" : "NO", "");
  for (const auto& [name, f] : {std::pair<const char*, const SimFigures*>{"A", &a}, {"B", &b}})
    if (!f->fits) out += StrCat(name, " ", f->memory_summary, "\n");
  return out;
}

std::string LossLine(const AbReport::Run& run) {
  const LossComparison& l = run.measured.losses;
  if (l.bit_identical) return StrCat("losses: bit-identical (", l.compared, " steps compared)\n");
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "losses: not bit-identical; largest relative difference %.3g (round %d step %d: "
                "A %.9g, B %.9g), within --loss-tolerance %g\n",
                l.max_rel_diff, l.worst_round + 1, l.worst_step + 1, l.worst_a, l.worst_b,
                run.loss_tolerance);
  return buf;
}

std::string ParamLine(const ParamComparison& p) {
  if (p.bit_identical)
    return StrCat("parameters: bit-identical (", p.tensors,
                  " tensors over all ranks and rounds)\n");
  if (!p.mismatch.empty()) return StrCat("parameters: not comparable: ", p.mismatch, "\n");
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "parameters: not bit-identical; largest relative difference %.3g (%s)\n",
                p.max_rel_diff, p.worst.c_str());
  return buf;
}

std::string RunTable(const AbReport::Run& run) {
  const MeasuredAB& m = run.measured;
  std::string out = StrCat("measured on ", run.nproc, " rank processes (", run.backend, "), ",
                           run.rounds, " rounds x ", run.steps,
                           " steps per plan, interleaved A, B, A, B, ...\n"
                           "(the first step of each round is dropped as warm-up: ",
                           m.a.timed_steps_ms.size(), " timed steps per plan)\n");
  out += Row("measured", "A", "B", "B/A", "95% CI");
  out +=
      Row("median step ms", Format("%.3f", m.a.median_step_ms), Format("%.3f", m.b.median_step_ms),
          Format("%.3f", m.step_ratio.ratio), Interval(m.step_ratio));
  if (std::isfinite(m.cpu_ratio.ratio))
    out += Row("median CPU ms a step", Format("%.3f", m.a.median_step_cpu_ms),
               Format("%.3f", m.b.median_step_cpu_ms), Format("%.3f", m.cpu_ratio.ratio),
               Interval(m.cpu_ratio));
  out += NumberRow("peak MiB (largest rank)", "%.2f", MiB(m.a.max_peak_bytes),
                   MiB(m.b.max_peak_bytes));
  out += "verdict: " + Verdict(m.step_ratio) + "\n";
  out += LossLine(run);
  out += ParamLine(m.params);
  return out;
}

std::string SideBySide(const AbReport::Sim& sim, const AbReport::Run& run) {
  const MeasuredAB& m = run.measured;
  char buf[256];
  std::string out;
  std::snprintf(buf, sizeof(buf), "%-28s %12s %12s\n", "B/A", "simulated", "measured");
  out += buf;
  // "label   simulated B/A   measured B/A   [interval]"
  auto ratio_row = [&](const char* label, double sim_a, double sim_b, const RatioInterval& r) {
    std::snprintf(buf, sizeof(buf), "%-28s %12s %12s   %s\n", label,
                  Format("%.3f", Ratio(sim_a, sim_b)).c_str(), Format("%.3f", r.ratio).c_str(),
                  Interval(r).c_str());
    out += buf;
  };
  ratio_row("step time", sim.a.step_ms, sim.b.step_ms, m.step_ratio);
  if (sim.a.cpu_ms > 0 && sim.b.cpu_ms > 0 && std::isfinite(m.cpu_ratio.ratio))
    ratio_row("CPU a step (all ranks)", sim.a.cpu_ms, sim.b.cpu_ms, m.cpu_ratio);
  std::snprintf(buf, sizeof(buf), "%-28s %12s %12s\n", "peak memory (largest rank)",
                Format("%.3f", Ratio(sim.a.max_peak_bytes, sim.b.max_peak_bytes)).c_str(),
                Format("%.3f", Ratio(m.a.max_peak_bytes, m.b.max_peak_bytes)).c_str());
  out += buf;
  return out;
}

}  // namespace

double Ratio(double a, double b) {
  if (a == 0) return b == 0 ? 1 : NAN;
  return b / a;
}

std::string AbReportJson(const AbReport& report) {
  std::string out = "{";
  String(out, "module", report.module_path);
  Key(out, "pipelines");
  out += "{";
  String(out, "a", report.pipeline_a);
  String(out, "b", report.pipeline_b);
  out += "}";
  if (report.sim) {
    Key(out, "sim");
    out += "{";
    String(out, "device", report.sim->device);
    Key(out, "a");
    SimJson(out, report.sim->a, nullptr);
    Key(out, "b");
    SimJson(out, report.sim->b, nullptr);
    Key(out, "ratio");
    SimJson(out, report.sim->b, &report.sim->a);
    out += "}";
  }
  if (report.run) {
    Key(out, "run");
    RunJson(out, *report.run);
  }
  out += "}\n";
  return out;
}

std::string AbReportTable(const AbReport& report) {
  std::string out =
      StrCat(report.module_path, "\nA: ", report.pipeline_a, "\nB: ", report.pipeline_b, "\n");
  if (report.sim) out += "\n" + SimTable(*report.sim);
  if (report.run) out += "\n" + RunTable(*report.run);
  if (report.sim && report.run) out += "\n" + SideBySide(*report.sim, *report.run);
  return out;
}

}  // namespace pw::ab
