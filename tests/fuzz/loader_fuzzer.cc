// libFuzzer target for the module loader and verifier: any byte string, read as text or
// binary, must give a module or a clean error — never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "ir/proto_io.h"
#include "ir/verifier.h"
#include "ops/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the format so one corpus exercises both parsers.
  pw::ModuleFormat format = data[0] & 1 ? pw::ModuleFormat::kText : pw::ModuleFormat::kBinary;
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  auto module = pw::ParseModule(bytes, format);
  if (!module.ok()) return 0;
  if (!pw::VerifyModule(*module, pw::ops::Registry()).ok()) return 0;
  for (const pw::Program& p : module->programs()) {
    pw::DepGraph graph = pw::BuildDependencyGraph(p);
    (void)pw::TopologicalOrder(graph);
  }
  (void)pw::SerializeModule(*module, pw::ModuleFormat::kBinary);
  return 0;
}
