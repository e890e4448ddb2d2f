#include "ops/kernels/cpu/math_module.h"

#include <cstdio>
#include <cstdlib>

#include "ops/module_loader.h"

namespace pw::ops::cpu {
namespace {

const StatusOr<const CpuMathModule*>& Loaded() {
  static const auto* loaded =
      new StatusOr<const CpuMathModule*>([]() -> StatusOr<const CpuMathModule*> {
        PW_ASSIGN_OR_RETURN(const void* table,
                            OpenPipeweaveModule("libpipeweave_cpu_math.so", "PW_CPU_MATH_MODULE",
                                                "pw_cpu_math_module"));
        return static_cast<const CpuMathModule*>(table);
      }());
  return *loaded;
}

}  // namespace

Status LoadCpuMathModule() { return Loaded().status(); }

const CpuMathModule& CpuMath() {
  static const CpuMathModule* table = [] {
    const StatusOr<const CpuMathModule*>& loaded = Loaded();
    if (!loaded.ok()) {
      std::fprintf(stderr, "pipeweave: %s\n", loaded.status().message().c_str());
      std::exit(1);
    }
    return *loaded;
  }();
  return *table;
}

}  // namespace pw::ops::cpu
