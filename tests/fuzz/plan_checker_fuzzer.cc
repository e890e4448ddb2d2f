// libFuzzer target for the plan checks: any byte string read as a module (text or binary)
// that loads and verifies has its plan converted to actions and checked under both comm
// semantics, with and without a memory limit. Every path must end in a result or a clean
// error: never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/plan_actions.h"
#include "ir/proto_io.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "passes/pipeline/schedule_checker.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the format and the check options.
  const uint8_t knobs = data[0];
  pw::ModuleFormat format = knobs & 1 ? pw::ModuleFormat::kText : pw::ModuleFormat::kBinary;
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  auto module = pw::ParseModule(bytes, format);
  if (!module.ok() || module->plan.empty()) return 0;
  if (!pw::VerifyModule(*module, pw::ops::Registry()).ok()) return 0;
  auto schedule = pw::PlanToActionSchedule(module->plan);
  if (!schedule.ok()) return 0;
  pw::pipeline::CheckOptions options;
  options.semantics = knobs & 2 ? pw::CommSemantics::kRendezvous : pw::CommSemantics::kEager;
  options.mem_limit = (knobs >> 2) & 7;  // 0: no limit
  (void)pw::pipeline::CheckStructure(*schedule);
  (void)pw::pipeline::CheckSchedule(*schedule, options);
  return 0;
}
