#include "models/model_config.h"

namespace pw::models {

StatusOr<ChunkPlacement> ParseChunkPlacement(std::string_view name) {
  if (name == "loop") return ChunkPlacement::kLoop;
  if (name == "v") return ChunkPlacement::kV;
  return InvalidArgument("unknown placement '", name, "' (use loop or v)");
}

const char* ChunkPlacementName(ChunkPlacement placement) {
  return placement == ChunkPlacement::kV ? "v" : "loop";
}

}  // namespace pw::models
