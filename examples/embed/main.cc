// A framework's view of pipeweave: build a model, plan nothing (one rank), and drive
// training through pw::Executor, feeding its own tokens each step.
//
//   embed_example [STEPS]     prints "step S loss L" and exits 0 when the loss fell

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "executor/executor.h"
#include "models/gpt.h"
#include "passes/pass_manager.h"

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 8;
  pw::models::GptConfig config;
  config.layers = 2;
  config.hidden = 32;
  config.heads = 2;
  config.seq = 8;
  config.vocab = 16;
  config.micro_batch_size = 2;
  pw::StatusOr<pw::Module> module = pw::models::BuildGpt(config);
  if (!module.ok()) {
    std::fprintf(stderr, "%s\n", module.status().ToString().c_str());
    return 1;
  }
  pw::PassManager passes;
  pw::Status added = passes.AddPipeline("append-backward{optimizer=adam,lr=0.01}");
  if (!added.ok() || !passes.Run(*module).ok()) {
    std::fprintf(stderr, "append-backward failed\n");
    return 1;
  }

  pw::ExecutorOptions options;
  options.micro_batches = 2;
  auto exec = pw::Executor::Create(std::move(*module), options);
  if (!exec.ok()) {
    std::fprintf(stderr, "%s\n", exec.status().ToString().c_str());
    return 1;
  }

  // The framework's data: a fixed pattern the model can learn (next token = token + 1).
  auto batch = [&](int mb, bool labels) {
    pw::Tensor t(pw::DataType::kInt64, {config.micro_batch_size, config.seq});
    for (int64_t i = 0; i < t.numel(); ++i) t.i64()[i] = (mb + i + (labels ? 1 : 0)) % config.vocab;
    return t;
  };
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    for (int mb = 0; mb < (*exec)->num_micro_batches(); ++mb) {
      (void)(*exec)->Feed("tokens", mb, batch(mb, false));
      (void)(*exec)->Feed("labels", mb, batch(mb, true));
    }
    pw::StatusOr<pw::StepStats> stats = (*exec)->Step();
    if (!stats.ok()) {
      std::fprintf(stderr, "%s\n", stats.status().ToString().c_str());
      return 1;
    }
    double loss = 0;
    for (double l : stats->losses) loss += l / stats->losses.size();
    std::printf("step %d loss %.4f (%.1f ms, peak %lld bytes)\n", step + 1, loss, stats->step_ms,
                static_cast<long long>(stats->peak_bytes));
    (step == 0 ? first : last) = loss;
  }
  return std::isfinite(last) && last < first ? 0 : 1;
}
