// c_split: this member's piece of a tensor the whole group holds alike, with no
// communication (Megatron's split to the group's rank). The distributed optimizer cuts a
// replicated parameter into the rows its dp rank updates; c_all_gather puts them back.

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferCSplit(InferContext& ctx) {
  PW_RETURN_IF_ERROR(FloatDtype(ctx, "X").status());
  const std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  if (group.empty()) return InvalidArgument(ctx.op().type, ": group must not be empty");
  const int64_t members = ctx.attrs().GetInt("nranks");
  if (members < 1)
    return InvalidArgument(ctx.op().type, ": nranks must be at least 1 (the size of group '", group,
                           "'), got ", members);
  const Shape& x = ctx.Input("X").shape;
  int axis = 0;
  if (!NormalizeAxis(ctx.attrs().GetInt("axis", 0), static_cast<int>(x.size()), &axis))
    return InvalidArgument(WhereVar(ctx, "X"), ": axis ", ctx.attrs().GetInt("axis", 0),
                           " is outside its ", x.size(), " dims");
  if (x[axis] % members != 0)
    return InvalidArgument(WhereVar(ctx, "X"), ": extent ", x[axis], " along axis ", axis,
                           " is not a multiple of the ", members, " members of group '", group,
                           "'");
  TensorType out = ctx.Input("X");
  out.shape[axis] /= members;
  ctx.SetOutput("Out", out);
  return OkStatus();
}

}  // namespace

void RegisterShardOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "c_split",
      .summary = "Out = this member's piece of X cut into nranks equal pieces along axis, in "
                 "member order (X the same on every member; no communication)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = {DefaultAttr("group", std::string(kDefaultGroup)), DefaultAttr("axis", int64_t{0}),
                RequiredAttr("nranks", AttrType::kInt)},
      .amp = AmpPolicy::kAsIs,
      .infer = InferCSplit,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
  });
}

}  // namespace pw::ops
