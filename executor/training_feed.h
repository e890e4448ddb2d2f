#pragma once
// What a training run feeds every micro-batch: the module's inputs (metadata "inputs",
// default tokens and labels) drawn from TrainingData for the global micro-batch, so that
// any dp × pp × mp layout trains on exactly the tokens the single-rank reference sees.
// Data-parallel replica d takes global micro-batches [d·M, (d+1)·M) of each step.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/data.h"
#include "executor/interpreter.h"
#include "ir/module.h"

namespace pw {

struct TrainingFeedOptions {
  uint64_t data_seed = 1;
  std::string data_file;  // empty: synthetic tokens
};

class TrainingFeed {
 public:
  // `micro_batches` is M, the micro-batches one replica runs per step.
  static StatusOr<std::unique_ptr<TrainingFeed>> Open(const Module& module, int dp_index,
                                                      int micro_batches,
                                                      const TrainingFeedOptions& options);
  void set_step(int64_t step) { step_ = step; }
  // The FeedFn of the current step.
  Interpreter::FeedFn fn();

 private:
  TrainingFeed(TrainingData data, int dp_index, int micro_batches)
      : data_(std::move(data)), dp_index_(dp_index), micro_batches_(micro_batches) {}

  TrainingData data_;
  int dp_index_;
  int micro_batches_;
  int64_t step_ = 0;
};

}  // namespace pw
