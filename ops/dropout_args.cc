#include "ops/dropout_args.h"

#include <algorithm>
#include <string>

namespace pw::ops {

StatusOr<DropoutArgs> DropoutArgsOf(const KernelContext& ctx, const Shape& shape) {
  const AttrList& attrs = ctx.attrs();
  const double p = attrs.GetFloat("p");
  if (!(p > 0.0 && p < 1.0)) return InvalidArgument(ctx.op.type, ": p must be in (0, 1), got ", p);
  DropoutArgs args;
  args.salt = static_cast<uint64_t>(attrs.GetInt("salt", 0));
  args.threshold = DropoutThreshold(p);
  args.scale = DropoutScale(p);
  args.layout.inner = std::max<int64_t>(1, NumElements(shape));
  if (NumElements(shape) == 0) return args;
  const int64_t count = attrs.GetInt("shard_count", 1);
  const int64_t blocks = attrs.GetInt("block_count", 1);
  if (count <= 1 && blocks <= 1) return args;
  const int64_t axis = attrs.GetInt("shard_axis", -1);
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return InvalidArgument(ctx.op.type, ": shard_axis ", axis, " is not an axis of ",
                           ShapeToString(shape));
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  args.layout.inner = inner;
  args.layout.axis_extent = shape[axis];
  args.layout.blocks = std::max<int64_t>(1, blocks);
  args.layout.block = attrs.GetInt("block", 0);
  if (args.layout.block < 0 || args.layout.block >= args.layout.blocks)
    return InvalidArgument(ctx.op.type, ": block ", args.layout.block, " is not one of its ",
                           args.layout.blocks, " blocks");
  if (count <= 1) return args;
  const std::string group = attrs.GetString("group", "mp");
  if (ctx.comm) {
    const int size = ctx.comm->GroupSize(group);
    if (size > 0 && size != count)
      return InvalidArgument(ctx.op.type, ": shard_count ", count, " but group '", group, "' has ",
                             size, " members: plan the module for this mesh");
  }
  args.layout.shards = count;
  args.layout.shard = ctx.GroupRank();
  if (args.layout.shard < 0 || args.layout.shard >= count)
    return InvalidArgument(ctx.op.type, ": this rank is member ", args.layout.shard, " of group '",
                           group, "', not one of its ", count, " shards");
  return args;
}

}  // namespace pw::ops
