#pragma once
// The model shapes `pipeweave tune` tries besides the module as built, when the module
// records how it was built (models/model_recipe.h) and a global batch is given: every
// vpp that splits each stage's layers evenly (up to 8 chunks per rank), the V placement
// where vpp is 2, and every micro-batch size that divides the global batch per data
// parallel replica into at least pp micro-batches. Each comes with the build-model
// command that builds it.

#include <string>
#include <vector>

#include "ir/status.h"
#include "models/model_recipe.h"

namespace pw::tools {

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

// Every dp x pp x mp split of the built model's world (its ranks) other than its own, for
// the transformers: vpp 1, layers spread evenly over pp (splits whose pp does not divide
// the layers are left out, as are those the builder refuses, e.g. heads not divisible by
// mp), at the built micro-batch size, with G / (dp x B) >= pp micro-batches per replica.
// Labelled "dp 4 x pp 4 x mp 2".
std::vector<ShapeChoice> MeshSplits(const models::ModelRecipe& built, int64_t global_batch);

// "gpt --layers 32 --hidden 4096 ... --vpp 2 --placement v": build-model's arguments.
std::string BuildModelArgs(const models::ModelRecipe& recipe);

}  // namespace pw::tools
