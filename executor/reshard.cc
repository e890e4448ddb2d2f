#include "executor/reshard.h"

#include <cstring>

namespace pw {
namespace {

// A tensor as [outer, axis, inner] in bytes: rows of `outer`, each `axis` blocks of `inner`.
struct Split3 {
  int64_t outer = 1, axis = 1, inner = 1;
};

Split3 SplitAt(const Tensor& t, int axis) {
  Split3 s;
  const Shape& shape = t.shape();
  for (int i = 0; i < axis; ++i) s.outer *= shape[i];
  s.axis = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) s.inner *= shape[i];
  s.inner *= DataTypeSize(t.dtype());
  return s;
}

}  // namespace

StatusOr<Tensor> JoinShards(const std::vector<const Tensor*>& pieces, int axis) {
  if (pieces.empty()) return InvalidArgument("no pieces to join");
  const Tensor& first = *pieces[0];
  if (axis < 0 || axis >= static_cast<int>(first.shape().size()))
    return InvalidArgument("axis ", axis, " of ", ShapeToString(first.shape()));
  for (const Tensor* p : pieces)
    if (p->dtype() != first.dtype() || p->shape() != first.shape())
      return InvalidArgument("pieces of unequal dtypes or shapes: ", ShapeToString(p->shape()),
                             " beside ", ShapeToString(first.shape()));
  Shape shape = first.shape();
  shape[axis] *= static_cast<int64_t>(pieces.size());
  Tensor whole(first.dtype(), shape);
  const Split3 s = SplitAt(first, axis);
  const int64_t block = s.axis * s.inner;  // one piece's bytes per outer row
  char* dst = static_cast<char*>(whole.raw());
  for (int64_t o = 0; o < s.outer; ++o)
    for (const Tensor* p : pieces) {
      std::memcpy(dst, static_cast<const char*>(p->raw()) + o * block, block);
      dst += block;
    }
  return whole;
}

StatusOr<Tensor> CutShard(const Tensor& whole, int axis, int num, int index) {
  if (axis < 0 || axis >= static_cast<int>(whole.shape().size()))
    return InvalidArgument("axis ", axis, " of ", ShapeToString(whole.shape()));
  if (num < 1 || index < 0 || index >= num || whole.shape()[axis] % num != 0)
    return InvalidArgument("cannot cut ", ShapeToString(whole.shape()), " into ", num,
                           " equal pieces along axis ", axis);
  Shape shape = whole.shape();
  shape[axis] /= num;
  Tensor piece(whole.dtype(), shape);
  const Split3 s = SplitAt(whole, axis);
  const int64_t block = shape[axis] * s.inner;
  const char* src = static_cast<const char*>(whole.raw()) + index * block;
  char* dst = static_cast<char*>(piece.raw());
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(dst + o * block, src + o * s.axis * s.inner, block);
  return piece;
}

}  // namespace pw
