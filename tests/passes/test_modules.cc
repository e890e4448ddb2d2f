#include "tests/passes/test_modules.h"

#include <cstdio>
#include <cstdlib>

#include "ir/builder.h"
#include "ops/registry.h"

namespace pw::testing {
namespace {

Initializer Normal(uint64_t seed) {
  Initializer init;
  init.kind = Initializer::Kind::kNormal;
  init.std = 0.5;
  init.seed = seed;
  return init;
}

// Test modules are fixed; a builder error is a bug in this file.
void CheckBuilt(const ProgramBuilder& b) {
  if (b.status().ok()) return;
  std::fprintf(stderr, "test module does not build: %s\n", b.status().message().c_str());
  std::abort();
}

Module NewModule(const std::string& name) {
  Module module;
  module.name = name;
  module.AddProgram(Program("main"));
  module.metadata.Set("inputs", std::vector<std::string>{"x"});
  return module;
}

}  // namespace

Module TinyModule() {
  Module module = NewModule("tiny");
  ProgramBuilder b(module.main_program(), ops::Registry());
  b.Input("x", DataType::kFloat32, {2, 4});
  b.Parameter("w", {4, 3}, Normal(1));
  b.Op("matmul").In("X", "x").In("Y", "w").Out("Out", "y").Build();
  b.Op("scale").In("X", "y").Out("Out", "z").Attr("scale", 2.0).Build();
  b.Op("mean").In("X", "z").Out("Out", "loss").Role(OpRole::kLoss).Build();
  CheckBuilt(b);
  return module;
}

Module MlpModule() {
  Module module = NewModule("mlp");
  ProgramBuilder b(module.main_program(), ops::Registry());
  b.Input("x", DataType::kFloat32, {4, 8});
  b.Parameter("w1", {8, 6}, Normal(1));
  b.Parameter("b1", {6}, Normal(2));
  b.Parameter("w2", {6, 6}, Normal(3));
  b.Op("matmul").In("X", "x").In("Y", "w1").Out("Out", "fc1").Build();
  b.Op("bias_add").In("X", "fc1").In("Bias", "b1").Out("Out", "fc1_b").Build();
  b.Op("gelu").In("X", "fc1_b").Out("Out", "h").Build();
  b.Op("matmul").In("X", "h").In("Y", "w2").Out("Out", "y").Build();
  b.Op("add").In("X", "y").In("Y", "h").Out("Out", "r").Build();
  b.Op("mean").In("X", "r").Out("Out", "loss").Role(OpRole::kLoss).Build();
  CheckBuilt(b);
  return module;
}

Module TiedWeightModule() {
  Module module = NewModule("tied");
  ProgramBuilder b(module.main_program(), ops::Registry());
  b.Input("x", DataType::kFloat32, {3, 5});
  b.Parameter("w", {5, 5}, Normal(1));
  b.Op("matmul").In("X", "x").In("Y", "w").Out("Out", "y1").Build();
  b.Op("matmul").In("X", "y1").In("Y", "w").Out("Out", "y2").Build();
  b.Op("mean").In("X", "y2").Out("Out", "loss").Role(OpRole::kLoss).Build();
  module.metadata.Set("loss", std::string("loss"));
  CheckBuilt(b);
  return module;
}

}  // namespace pw::testing
