#pragma once
// How a module was built, read back from the metadata its builder recorded (the model's
// name and every config field), so that a tool can build the same model again with other
// parallel settings (`pipeweave tune` tries other vpp, placements and micro-batch sizes).

#include <string>

#include "ir/module.h"
#include "ir/status.h"
#include "models/gpt.h"
#include "models/llama.h"
#include "models/unet.h"

namespace pw::models {

struct ModelRecipe {
  std::string model;  // "gpt", "llama" or "unet": which config below applies
  GptConfig gpt;
  LlamaConfig llama;
  UnetConfig unet;

  int64_t micro_batch_size() const {
    return model == "gpt"     ? gpt.micro_batch_size
           : model == "llama" ? llama.micro_batch_size
                              : unet.micro_batch_size;
  }
  void set_micro_batch_size(int64_t size) {
    (model == "gpt"     ? gpt.micro_batch_size
     : model == "llama" ? llama.micro_batch_size
                        : unet.micro_batch_size) = size;
  }
};

// An error naming the first missing field when the module records no builder's config
// (a module written by hand, or by an older build-model).
StatusOr<ModelRecipe> ReadModelRecipe(const Module& module);
StatusOr<Module> BuildFromRecipe(const ModelRecipe& recipe);

}  // namespace pw::models
