#include "executor/comm/gloo_module.h"

#include "ops/module_loader.h"

namespace pw {

StatusOr<const GlooModule*> LoadGlooModule() {
  static const auto* loaded = new StatusOr<const GlooModule*>([]() -> StatusOr<const GlooModule*> {
    PW_ASSIGN_OR_RETURN(const void* table, OpenPipeweaveModule("libpipeweave_gloo.so",
                                                               "PW_GLOO_MODULE", "pw_gloo_module"));
    return static_cast<const GlooModule*>(table);
  }());
  return *loaded;
}

}  // namespace pw
