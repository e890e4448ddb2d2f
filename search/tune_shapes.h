#pragma once
// The model shapes `pipeweave tune` tries besides the module as built, when the module
// records how it was built (models/model_recipe.h) and a global batch is given: every
// vpp that splits each stage's layers evenly (up to 8 chunks per rank), the V placement
// where vpp is 2, and every micro-batch size that divides the global batch per data
// parallel replica into at least pp micro-batches. Each comes with the build-model
// command that builds it. RankShapes builds them and ranks them by the action-level
// simulator, so that the full search (Tune) runs only on the best.

#include <memory>
#include <string>
#include <vector>

#include "cost_model/estimator.h"
#include "ir/module.h"
#include "ir/status.h"
#include "models/model_recipe.h"
#include "search/plan_search.h"

namespace pw::search {

struct ShapeChoice {
  models::ModelRecipe recipe;
  int micro_batches = 0;
  std::string label;        // e.g. "vpp 2 v, micro-batch size 2"
  std::string build_model;  // the build-model arguments that build it
};

// The shapes of `built` other than itself at `global_batch` samples per step over `dp`
// replicas.
std::vector<ShapeChoice> ShapeChoices(const models::ModelRecipe& built, int64_t global_batch,
                                      int dp);

// "gpt --layers 32 --hidden 4096 ... --vpp 2 --placement v": build-model's arguments.
std::string BuildModelArgs(const models::ModelRecipe& recipe);

// Every dp x pp x mp split of the built model's world (its ranks) other than its own, for
// the transformers: vpp 1, layers spread evenly over pp (splits whose pp does not divide
// the layers are left out, as are those the builder refuses, e.g. heads not divisible by
// mp), at the built micro-batch size, with G / (dp x B) >= pp micro-batches per replica.
// Labelled "dp 4 x pp 4 x mp 2".
std::vector<ShapeChoice> MeshSplits(const models::ModelRecipe& built, int64_t global_batch);

// A shape built, with its best schedule kind on the action-level simulator.
struct RankedShape {
  ShapeChoice choice;
  ActionLevelBest best;
  Module module;  // built from choice.recipe, over the built module's dp replicas
};

struct ShapeRanking {
  ActionLevelBest as_built;         // `built` at its own micro-batches
  std::vector<RankedShape> shapes;  // the other shapes, fastest first
};

// The shapes of `built` (made from `recipe`, running `micro_batches` per step) at
// `global_batch` samples per step, each built and ranked. Shapes the builder refuses (e.g.
// heads over mp) or no schedule kind plans are left out; an error when the module as
// built does not plan.
StatusOr<ShapeRanking> RankShapes(const models::ModelRecipe& recipe, const Module& built,
                                  int micro_batches,
                                  std::shared_ptr<const cost::Estimator> estimator,
                                  int64_t global_batch);

}  // namespace pw::search
