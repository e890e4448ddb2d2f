#include "ops/layout_copies.h"

#include "ir/op.h"

namespace pw::ops {
namespace {

// Along `axis` of `shape`: the bytes of one step (the inner block) and the number of outer
// blocks (the rows of every copy).
struct AxisBlocks {
  int axis = 0;
  int64_t outer = 1, inner = 0;
};

AxisBlocks BlocksOf(const KernelContext& ctx, const Tensor& whole) {
  AxisBlocks b;
  const int64_t axis = ctx.attrs().GetInt("axis");
  b.axis = static_cast<int>(axis < 0 ? axis + whole.rank() : axis);  // validated by inference
  b.inner = DataTypeSize(whole.dtype());
  const Shape& shape = whole.shape();
  for (int i = 0; i < b.axis; ++i) b.outer *= shape[i];
  for (size_t i = b.axis + 1; i < shape.size(); ++i) b.inner *= shape[i];
  return b;
}

}  // namespace

std::vector<StridedCopy> SplitCopies(const KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const AxisBlocks b = BlocksOf(ctx, x);
  const int64_t row = x.dim(b.axis) * b.inner;
  const auto* src = static_cast<const char*>(x.raw());
  std::vector<StridedCopy> copies;
  int64_t offset = 0;
  for (size_t k = 0; k < ctx.op.FindOutput("Out")->size(); ++k) {
    Tensor& out = *ctx.Out("Out", k);
    const int64_t chunk = out.dim(b.axis) * b.inner;
    copies.push_back({static_cast<char*>(out.raw()), chunk, src + offset, row, chunk, b.outer});
    offset += chunk;
  }
  return copies;
}

StatusOr<std::vector<StridedCopy>> ConcatCopies(const KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  const AxisBlocks b = BlocksOf(ctx, out);
  const int64_t row = out.dim(b.axis) * b.inner;
  auto* dst = static_cast<char*>(out.raw());
  std::vector<StridedCopy> copies;
  int64_t offset = 0;
  for (size_t k = 0; k < ctx.InCount("X"); ++k) {
    const Tensor& x = *ctx.In("X", k);
    if (x.SharesStorage(out)) return InvalidArgument("concat: Out must not alias X");
    const int64_t chunk = x.dim(b.axis) * b.inner;
    copies.push_back({dst + offset, row, static_cast<const char*>(x.raw()), chunk, chunk, b.outer});
    offset += chunk;
  }
  return copies;
}

}  // namespace pw::ops
