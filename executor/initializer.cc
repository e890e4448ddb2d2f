#include "executor/initializer.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "ops/low_precision.h"

namespace pw {

namespace {

// splitmix64's finaliser: a bijective 64-bit mix with good avalanche.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t HashString(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// The RNG stream of one full tensor: every element draws from Mix(base, index, lane).
uint64_t StreamBase(const Initializer& init, const std::string& name) {
  return Mix(init.seed ^ Mix(HashString(init.key.empty() ? name : init.key)));
}

// A uniform double in (0, 1]: never 0, so log() in Box-Muller is finite.
double Uniform(uint64_t base, int64_t index, uint64_t lane) {
  uint64_t bits = Mix(base ^ Mix(static_cast<uint64_t>(index) * 2 + lane));
  return static_cast<double>((bits >> 11) + 1) * 0x1.0p-53;
}

double ValueAt(const Initializer& init, uint64_t base, int64_t index) {
  switch (init.kind) {
    case Initializer::Kind::kNone:
    case Initializer::Kind::kZeros:
      return 0.0;
    case Initializer::Kind::kConstant:
      return init.value;
    case Initializer::Kind::kUniform:
      return init.low + (init.high - init.low) * Uniform(base, index, 0);
    case Initializer::Kind::kNormal: {
      double u1 = Uniform(base, index, 0), u2 = Uniform(base, index, 1);
      double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
      return init.mean + init.std * z;
    }
  }
  return 0.0;
}

// Maps each element of a shard to its index in the full tensor: the shard is the block
// [shard_index * len, (shard_index + 1) * len) along shard_axis.
struct ShardLayout {
  int64_t outer = 1, full_axis = 1, shard_axis_len = 1, inner = 1, offset = 0;
};

StatusOr<ShardLayout> LayoutOf(const Var& var) {
  const Initializer& init = var.init;
  ShardLayout layout;
  if (init.full_shape.empty()) {  // not sharded: the var is the full tensor
    layout.inner = var.num_elements();
    return layout;
  }
  const Shape& full = init.full_shape;
  int axis = init.shard_axis;
  if (axis < 0 || axis >= static_cast<int>(full.size()) || full.size() != var.shape.size())
    return InvalidArgument("var '", var.name, "': shard_axis ", axis, " does not fit full_shape ",
                           ShapeToString(full), " and shape ", ShapeToString(var.shape));
  if (init.num_shards < 1 || init.shard_index < 0 || init.shard_index >= init.num_shards)
    return InvalidArgument("var '", var.name, "': shard_index ", init.shard_index,
                           " out of range for num_shards ", init.num_shards);
  for (size_t d = 0; d < full.size(); ++d) {
    int64_t expected = static_cast<int>(d) == axis ? full[d] / init.num_shards : full[d];
    if (var.shape[d] != expected || (static_cast<int>(d) == axis && full[d] % init.num_shards))
      return InvalidArgument("var '", var.name, "': shape ", ShapeToString(var.shape),
                             " is not a 1/", init.num_shards, " shard of ", ShapeToString(full),
                             " along axis ", axis);
  }
  for (int d = 0; d < axis; ++d) layout.outer *= full[d];
  for (size_t d = axis + 1; d < full.size(); ++d) layout.inner *= full[d];
  layout.full_axis = full[axis];
  layout.shard_axis_len = var.shape[axis];
  layout.offset = init.shard_index * layout.shard_axis_len;
  return layout;
}

template <typename T>
void Fill(const Var& var, const ShardLayout& layout, T* out) {
  uint64_t base = StreamBase(var.init, var.name);
  int64_t i = 0;
  for (int64_t o = 0; o < layout.outer; ++o) {
    for (int64_t a = 0; a < layout.shard_axis_len; ++a) {
      int64_t row = (o * layout.full_axis + layout.offset + a) * layout.inner;
      for (int64_t k = 0; k < layout.inner; ++k)
        out[i++] = static_cast<T>(ValueAt(var.init, base, row + k));
    }
  }
}

}  // namespace

double InitialValue(const Initializer& init, const std::string& name, int64_t full_index) {
  return ValueAt(init, StreamBase(init, name), full_index);
}

StatusOr<Tensor> MaterializeVar(const Var& var) {
  Tensor tensor(var.dtype, var.shape);
  Initializer::Kind kind = var.init.kind;
  if (kind == Initializer::Kind::kNone || kind == Initializer::Kind::kZeros)
    return tensor;  // storage is zero-filled
  PW_ASSIGN_OR_RETURN(ShardLayout layout, LayoutOf(var));
  switch (var.dtype) {
    case DataType::kFloat32:
      Fill(var, layout, tensor.f32());
      return tensor;
    case DataType::kInt64:
      if (kind != Initializer::Kind::kConstant) break;
      Fill(var, layout, tensor.i64());
      return tensor;
    case DataType::kBFloat16:
    case DataType::kFloat16: {
      // The f32 values rounded once: exactly what casting the f32 var gives.
      Tensor wide(DataType::kFloat32, var.shape);
      Fill(var, layout, wide.f32());
      ops::StoreFromF32(wide, tensor);
      return tensor;
    }
    default:
      break;
  }
  return Unimplemented("var '", var.name, "': cannot initialise a ", DataTypeName(var.dtype),
                       " var with this initializer kind");
}

Initializer WithShardIndex(Initializer init, int shard_index) {
  if (!init.full_shape.empty()) init.shard_index = shard_index;
  return init;
}

Var ShardForRank(Var var, int mp_rank) {
  var.init = WithShardIndex(std::move(var.init), mp_rank);
  return var;
}

}  // namespace pw
