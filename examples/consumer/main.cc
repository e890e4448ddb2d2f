// Builds a one-layer regression program with the IR builder, differentiates it with the
// installed pass pipeline, and prints what the pipeline did.
#include <cstdio>

#include "ir/builder.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"

int main() {
  pw::Module module;
  module.name = "consumer";
  pw::Program& program = module.AddProgram(pw::Program("main"));
  pw::ProgramBuilder b(program, pw::ops::Registry());
  pw::Initializer init;
  init.kind = pw::Initializer::Kind::kNormal;
  init.std = 0.1;
  std::string x = b.Input("x", pw::DataType::kFloat32, {4, 8});
  std::string w = b.Parameter("w", {8, 2}, init);
  std::string y = b.Op("matmul").In("X", x).In("Y", w).Out("Out", "y").Build();
  std::string loss = b.Op("mean").In("X", y).Out("Out", "loss").Role(pw::OpRole::kLoss).Build();
  module.metadata.Set("inputs", std::vector<std::string>{x});
  module.metadata.Set("loss", loss);
  if (!b.status().ok()) {
    std::fprintf(stderr, "build failed: %s\n", b.status().message().c_str());
    return 1;
  }

  pw::PassManager pm;
  if (pw::Status s = pm.AddPipeline("append-backward{optimizer=sgd,lr=0.1},dce"); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  auto changed = pm.Run(module);
  if (!changed.ok()) {
    std::fprintf(stderr, "%s\n", changed.status().message().c_str());
    return 1;
  }
  std::printf("consumer: %zu ops after append-backward,dce\n", program.ops().size());
  return program.ops().size() > 2 ? 0 : 1;
}
