#include "passes/pass_instrumentation.h"

#include <cstdio>
#include <ostream>

#include "ir/proto_io.h"

namespace pw {

// ----------------------------------------------------------------------------------------
// --print-after

std::string PrintIRInstrumentation::Banner(std::string_view pass_name) {
  return StrCat("// ----- IR after ", pass_name, " ----- //");
}

void PrintIRInstrumentation::RunAfterPass(const Pass& pass, const Module& module, bool changed) {
  if (!pass_names_.count("all") && !pass_names_.count(std::string(pass.name()))) return;
  out_ << Banner(pass.name()) << "\n";
  StatusOr<std::string> text = SerializeModule(module, ModuleFormat::kText);
  out_ << (text.ok() ? *text : "<cannot print the module: " + text.status().message() + ">\n");
  out_.flush();
}

// ----------------------------------------------------------------------------------------
// --time-passes

namespace {
double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
std::string Row(double seconds, double total, const std::string& label) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "  %12.3f  %6.1f%%  ", seconds * 1e3,
                total > 0 ? 100.0 * seconds / total : 0.0);
  return buffer + label + "\n";
}
}  // namespace

void PassTimingInstrumentation::RunBeforePipeline(const Module&) {
  pipeline_start_ = Clock::now();
  pass_seconds_.clear();
  verifier_seconds_ = 0;
}
void PassTimingInstrumentation::RunBeforePass(const Pass&, const Module&) { start_ = Clock::now(); }
void PassTimingInstrumentation::StopPass(const Pass& pass) {
  pass_seconds_.emplace_back(std::string(pass.name()), SecondsSince(start_));
}
void PassTimingInstrumentation::RunAfterPass(const Pass& pass, const Module&, bool) {
  StopPass(pass);
}
void PassTimingInstrumentation::RunAfterPassFailed(const Pass& pass, const Module&) {
  StopPass(pass);
}
void PassTimingInstrumentation::RunBeforeVerifier(const Pass*) { start_ = Clock::now(); }
void PassTimingInstrumentation::RunAfterVerifier(const Pass*) {
  verifier_seconds_ += SecondsSince(start_);
}

void PassTimingInstrumentation::RunAfterPipeline(const Module&, const PassContext&) {
  double total = SecondsSince(pipeline_start_);
  out_ << "===----- Pass execution timing report -----===\n";
  char header[64];
  std::snprintf(header, sizeof(header), "  %12s  %7s  %s\n", "wall ms", "%", "pass");
  out_ << header;
  for (const auto& [name, seconds] : pass_seconds_) out_ << Row(seconds, total, name);
  if (verifier_seconds_ > 0) out_ << Row(verifier_seconds_, total, "(verifier)");
  out_ << Row(total, total, "total");
  out_.flush();
}

// ----------------------------------------------------------------------------------------
// --stats

void PassStatisticsInstrumentation::RunAfterPipeline(const Module&, const PassContext& context) {
  out_ << "===----- Pass statistics -----===\n";
  for (const PassStatistics& run : context.statistics()) {
    out_ << run.pass << (run.counters.empty() ? "  (no statistics)" : "") << "\n";
    for (const auto& [name, value] : run.counters) {
      char buffer[96];
      std::snprintf(buffer, sizeof(buffer), "  %-24s %12lld\n", name.c_str(),
                    static_cast<long long>(value));
      out_ << buffer;
    }
  }
  out_.flush();
}

}  // namespace pw
