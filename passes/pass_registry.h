#pragma once
// The static registry of passes: name -> factory, description and options.
//
// Registering a pass in passes/ (or passes/pipeline/):
//
//   1. Write the pass class (default-constructible, deriving from Pass) in its own .cc
//      under passes/ or passes/pipeline/. The class itself may sit in an anonymous
//      namespace.
//   2. At the bottom of that .cc, on a line of its own, write
//        PW_REGISTER_PASS(SchedulePass)
//      with the class's unqualified name, in a named namespace where the class is
//      visible (e.g. after the anonymous namespace closes, inside `namespace pw`), not
//      inside an anonymous namespace. Class names must be unique across the library.
//   That is all: no list to edit, nothing to add to CMake. The pass is then in
//   `pipeweave opt --list-passes`, usable in pipeline text, and covered by the
//   PassManager's verification and instrumentation.
//
// Why it survives static linking: passes live in the static library pipeweave_passes, and
// a linker drops object files nothing references, taking self-registering static
// initializers with them. So nothing here relies on static initializers. At build time
// passes/CMakeLists.txt scans the pass sources for `PW_REGISTER_PASS(Name)` lines and
// generates builtin_passes.inc; RegisterBuiltinPasses() (pass_registry.cc) calls every
// listed registration function, and PassRegistry::Global() calls it on first use. The
// call references each pass's object file, so every pass is linked into every binary
// that uses the registry, static or shared, inside this project or through
// find_package(pipeweave).
//
// Passes defined outside the passes library (tests, other projects) register
// explicitly: `PassRegistry::Global().Register<MyPass>();`, or build their own
// PassRegistry and hand it to the pipeline parser.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "passes/pass.h"

namespace pw {

struct PassInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Pass>()> create;
};

class PassRegistry {
 public:
  // The process-wide registry, holding every built-in pass.
  static PassRegistry& Global();

  // Registers pass class T (default-constructible). Registering a name twice is a
  // programming error and aborts with a message naming the pass.
  template <typename T>
  void Register() {
    Register([] { return std::unique_ptr<Pass>(new T()); });
  }
  void Register(std::function<std::unique_ptr<Pass>()> create);

  const PassInfo* Find(std::string_view name) const;
  // A fresh instance with default options, or nullptr for an unknown name.
  std::unique_ptr<Pass> Create(std::string_view name) const;
  // Every pass, sorted by name.
  std::vector<const PassInfo*> passes() const;
  // Registered names close to `name` (typos, prefixes), best first.
  std::vector<std::string> SimilarNames(std::string_view name) const;

 private:
  std::map<std::string, PassInfo, std::less<>> passes_;
};

// Registers every pass of the passes library into `registry`; Global() calls it once.
void RegisterBuiltinPasses(PassRegistry& registry);

}  // namespace pw

// Defines the registration function of pass class `ClassName` that RegisterBuiltinPasses
// calls. C linkage gives the function the same name whatever namespace the macro is used
// in, so the generated list can declare it at global scope.
#define PW_REGISTER_PASS(ClassName)                                          \
  extern "C" void PwRegisterPass_##ClassName(::pw::PassRegistry& registry) { \
    registry.Register<ClassName>();                                          \
  }
