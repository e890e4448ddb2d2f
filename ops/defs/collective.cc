// Megatron's f and g: c_identity (identity forward, all-reduce backward) and
// c_allreduce_sum (all-reduce forward, identity backward); c_allreduce_max, the shared
// shift of a vocabulary-parallel softmax and the overflow flag of loss scaling; and the
// halves of an all-reduce that sequence parallelism (and sharded optimizer state) use in
// its place: c_all_gather and c_reduce_scatter_sum, each the other's gradient; c_split,
// a replicated tensor's slice (sequence-parallel position embeddings); c_sync_shards, the
// all-gather of a tensor whose members each updated their own slice of it in place; and
// c_allreduce_coalesced and c_reduce_scatter_coalesced, data-parallel buckets. And the pieces of a
// collective matmul (overlap-collective-matmul): c_shift, a transfer between the members of
// a group at a fixed distance, and c_member_concat and c_member_sum, which put the blocks
// the shifts brought in member order.

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferCollective(InferContext& ctx) {
  PW_RETURN_IF_ERROR(FloatDtype(ctx, "X").status());
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  if (group.empty()) return InvalidArgument(ctx.op().type, ": group must not be empty");
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

// A bucket's tensors: as many Out as X (at least one), all of one dtype (the X travel as
// one buffer). Returns how many.
StatusOr<size_t> BucketOf(InferContext& ctx) {
  const size_t n = ctx.InputCount("X");
  const std::vector<std::string>* out = ctx.op().FindOutput("Out");
  const size_t outs = out ? out->size() : 0;
  if (n == 0 || n != outs)
    return InvalidArgument(ctx.op().type, ": needs as many Out as X (at least one), got ", n,
                           " X and ", outs, " Out");
  const DataType dtype = ctx.Input("X", 0).dtype;
  for (size_t i = 0; i < n; ++i)
    if (ctx.Input("X", i).dtype != dtype)
      return InvalidArgument(ctx.op().type, ": X[", i, "] is ",
                             DataTypeName(ctx.Input("X", i).dtype), ", X[0] ", DataTypeName(dtype),
                             ": a bucket holds one dtype");
  return n;
}

Status InferCoalesced(InferContext& ctx) {
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  if (group.empty()) return InvalidArgument(ctx.op().type, ": group must not be empty");
  PW_ASSIGN_OR_RETURN(const size_t n, BucketOf(ctx));
  for (size_t i = 0; i < n; ++i) ctx.SetOutput("Out", ctx.Input("X", i), i);
  return FloatDtype(ctx, "X").status();
}

Status CIdentityGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  Op& op = ctx.Emit("c_allreduce_sum");
  op.role = OpRole::kCommunication;
  op.SetInput("X", {ctx.Grad(fwd.Output("Out"))}).SetOutput("Out", {ctx.Grad(x)});
  op.SetAttr("group", fwd.attrs.GetString("group", kDefaultGroup));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status AllReduceGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  if (ctx.NeedsGrad(fwd.Input("X"))) ctx.Alias(fwd.Input("X"), fwd.Output("Out"));
  return OkStatus();
}

// The axis and group size of a gather or scatter, checked against X. `whole` is the
// extent X has along axis when it is the unscattered tensor (reduce-scatter's input).
struct Cut {
  int axis = 0;
  int64_t members = 1;
};
StatusOr<Cut> CutOf(InferContext& ctx, bool x_is_whole) {
  PW_RETURN_IF_ERROR(FloatDtype(ctx, "X").status());
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  if (group.empty()) return InvalidArgument(ctx.op().type, ": group must not be empty");
  const Shape& x = ctx.Input("X").shape;
  Cut cut;
  cut.members = ctx.attrs().GetInt("nranks");
  if (cut.members < 1)
    return InvalidArgument(ctx.op().type, ": nranks must be at least 1 (the size of group '", group,
                           "'), got ", cut.members);
  const int64_t axis = ctx.attrs().GetInt("axis", 0);
  if (!NormalizeAxis(axis, static_cast<int>(x.size()), &cut.axis))
    return InvalidArgument(WhereVar(ctx, "X"), ": axis ", axis, " is outside its ", x.size(),
                           " dims");
  if (x_is_whole && x[cut.axis] % cut.members != 0)
    return InvalidArgument(WhereVar(ctx, "X"), ": extent ", x[cut.axis], " along axis ", axis,
                           " is not a multiple of the ", cut.members, " members of group '", group,
                           "'");
  return cut;
}

Status InferAllGather(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(Cut cut, CutOf(ctx, /*x_is_whole=*/false));
  TensorType out = ctx.Input("X");
  out.shape[cut.axis] *= cut.members;
  ctx.SetOutput("Out", out);
  return OkStatus();
}

Status InferReduceScatterCoalesced(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(const size_t n, BucketOf(ctx));
  PW_ASSIGN_OR_RETURN(Cut cut, CutOf(ctx, /*x_is_whole=*/false));
  for (size_t i = 0; i < n; ++i) {
    TensorType x = ctx.Input("X", i);
    if (cut.axis >= static_cast<int>(x.shape.size()) || x.shape[cut.axis] % cut.members != 0)
      return InvalidArgument(ctx.op().type, ": X[", i, "] ", ShapeToString(x.shape),
                             " does not cut in ", cut.members, " slices along axis ", cut.axis);
    x.shape[cut.axis] /= cut.members;
    ctx.SetOutput("Out", x, i);
  }
  return OkStatus();
}

Status InferSyncShards(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CutOf(ctx, /*x_is_whole=*/true).status());
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

Status InferReduceScatter(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(Cut cut, CutOf(ctx, /*x_is_whole=*/true));
  TensorType out = ctx.Input("X");
  out.shape[cut.axis] /= cut.members;
  ctx.SetOutput("Out", out);
  return OkStatus();
}

// c_split: reduce-scatter's shapes; a view's slices must lie one after another in X.
Status InferSplitSlice(InferContext& ctx) {
  PW_RETURN_IF_ERROR(InferReduceScatter(ctx));
  if (!ctx.attrs().GetBool("view", false)) return OkStatus();
  const Shape& x = ctx.Input("X").shape;
  int axis = 0;
  NormalizeAxis(ctx.attrs().GetInt("axis", 0), static_cast<int>(x.size()), &axis);
  for (int d = 0; d < axis; ++d)
    if (x[d] != 1)
      return InvalidArgument(WhereVar(ctx, "X"), " ", ShapeToString(x),
                             ": c_split{view} needs slices that are contiguous in X, so every dim "
                             "before axis ",
                             axis, " must be 1 (drop view to copy)");
  return OkStatus();
}

// Each one's gradient is the other, over the same group and axis.
Status GatherScatterGrad(GradContext& ctx, const char* type) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  // A backward op, not kCommunication: it may be the first op of a stage's backward
  // (a reduce-scatter's gradient, where the all-reduce's was an alias), which split-program
  // would otherwise place with the forward before it.
  Op& op = ctx.Emit(type);
  op.role = OpRole::kBackward;
  op.SetInput("X", {ctx.Grad(fwd.Output("Out"))}).SetOutput("Out", {ctx.Grad(x)});
  op.SetAttr("group", fwd.attrs.GetString("group", kDefaultGroup));
  op.SetAttr("axis", fwd.attrs.GetInt("axis", 0));
  op.SetAttr("nranks", fwd.attrs.GetInt("nranks"));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

// nranks and offset of a c_shift; Out is X's type.
Status InferShift(InferContext& ctx) {
  PW_RETURN_IF_ERROR(InferCollective(ctx));
  const int64_t members = ctx.attrs().GetInt("nranks");
  if (members < 1)
    return InvalidArgument(ctx.op().type, ": nranks must be at least 1, got ", members);
  return OkStatus();
}

// The nranks blocks of a c_member_concat or c_member_sum: as many as the group's members,
// all of one shape and dtype.
StatusOr<int> MemberBlocks(InferContext& ctx, int64_t* axis_out) {
  PW_RETURN_IF_ERROR(FloatDtype(ctx, "X").status());
  const int64_t members = ctx.attrs().GetInt("nranks");
  if (members < 1 || static_cast<int64_t>(ctx.InputCount("X")) != members)
    return InvalidArgument(ctx.op().type, ": needs one block per member (nranks ", members,
                           "), got ", ctx.InputCount("X"));
  const TensorType& first = ctx.Input("X", 0);
  int axis = 0;
  const int64_t attr_axis = ctx.attrs().GetInt("axis", 0);
  if (!NormalizeAxis(attr_axis, static_cast<int>(first.shape.size()), &axis))
    return InvalidArgument(WhereVar(ctx, "X"), ": axis ", attr_axis, " is outside its ",
                           first.shape.size(), " dims");
  for (size_t i = 1; i < ctx.InputCount("X"); ++i) {
    const TensorType& t = ctx.Input("X", i);
    if (t.dtype != first.dtype || t.shape != first.shape)
      return InvalidArgument(ctx.op().type, ": block ", i, " is ", ShapeToString(t.shape),
                             ", block 0 ", ShapeToString(first.shape),
                             " (every member's block has one shape and dtype)");
  }
  if (axis_out) *axis_out = axis;
  return static_cast<int>(members);
}

Status InferMemberConcat(InferContext& ctx) {
  int64_t axis = 0;
  PW_ASSIGN_OR_RETURN(int members, MemberBlocks(ctx, &axis));
  TensorType out = ctx.Input("X", 0);
  out.shape[axis] *= members;
  ctx.SetOutput("Out", out);
  return OkStatus();
}

Status InferMemberSum(InferContext& ctx) {
  PW_RETURN_IF_ERROR(MemberBlocks(ctx, nullptr).status());
  ctx.SetOutput("Out", ctx.Input("X", 0));
  return OkStatus();
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& registry) {
  std::vector<AttrDef> attrs = {DefaultAttr("group", std::string(kDefaultGroup))};
  registry.Register(OpDef{
      .type = "c_identity",
      .summary = "Out = X; its gradient is all-reduced over group (Megatron's f)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = attrs,
      .is_communication = true,
      .amp = AmpPolicy::kAsIs,  // communicates in its input's dtype
      .infer = InferCollective,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
      .grad = CIdentityGrad,
  });
  registry.Register(OpDef{
      .type = "c_allreduce_sum",
      .summary = "Out = sum of X over the ranks of group; identity backward (Megatron's g)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,  // sums in its input's dtype: bf16 activations, f32 statistics
      .infer = InferCollective,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 1); },
      .grad = AllReduceGrad,
  });
  registry.Register(OpDef{
      .type = "c_allreduce_coalesced",
      .summary = "Out[i] = sum of X[i] over the ranks of group, for every i, as one collective "
                 "on the X laid end to end (a data-parallel gradient bucket: in place when the "
                 "X are one allocation, else packed and unpacked); each element summed in "
                 "member order, the bits of c_allreduce_sum on each X[i] alone",
      .inputs = {{"X", /*duplicable=*/true}},
      .outputs = {{"Out", /*duplicable=*/true}},
      .attrs = attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,
      .infer = InferCoalesced,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 1); },
  });
  std::vector<AttrDef> max_attrs = attrs;
  max_attrs.push_back(DefaultAttr("at_step_start", false));
  registry.Register(OpDef{
      .type = "c_allreduce_max",
      .summary = "Out = element-wise max of X over the ranks of group (not differentiated: "
                 "its users' gradients do not depend on it); at_step_start: an optimizer op "
                 "issued first in the step, on its own stream (post-validated loss scaling's "
                 "reduction of the last step's overflow flags)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = max_attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,
      .infer = InferCollective,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 1); },
  });

  std::vector<AttrDef> cut_attrs = {DefaultAttr("group", std::string(kDefaultGroup)),
                                    DefaultAttr("axis", int64_t{0}),
                                    RequiredAttr("nranks", AttrType::kInt)};
  registry.Register(OpDef{
      .type = "c_all_gather",
      .summary = "Out = the members' X concatenated along axis in member order (nranks: the "
                 "group's size); its gradient is c_reduce_scatter_sum",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = cut_attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,
      .infer = InferAllGather,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
      .grad = [](GradContext& ctx) { return GatherScatterGrad(ctx, "c_reduce_scatter_sum"); },
  });
  registry.Register(OpDef{
      .type = "c_reduce_scatter_sum",
      .summary = "Out = this member's slice along axis of the sum of X over the group, summed "
                 "in member order (the bits of that slice of c_allreduce_sum); its gradient "
                 "is c_all_gather",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = cut_attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,
      .infer = InferReduceScatter,
      // Each element of Out adds nranks contributions.
      .cost =
          [](const InferContext& ctx) {
            const double members = static_cast<double>(ctx.attrs().GetInt("nranks", 1));
            return ElementwiseCost(ctx, members > 1 ? members - 1 : 0);
          },
      .grad = [](GradContext& ctx) { return GatherScatterGrad(ctx, "c_all_gather"); },
  });
  registry.Register(OpDef{
      .type = "c_sync_shards",
      .summary = "Out = X with each member's slice along axis (member m: slice m of nranks) "
                 "taken from that member: the all-gather of a tensor each member updated only "
                 "its own slice of (the distributed optimizer's parameter all-gather, deferred "
                 "to the next step's start by overlap-param-gather); the bits of c_all_gather "
                 "of the slices",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = cut_attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,
      .infer = InferSyncShards,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
  });
  registry.Register(OpDef{
      .type = "c_reduce_scatter_coalesced",
      .summary = "Out[i] = this member's slice along axis of the sum of X[i] over the group, "
                 "for every i, as one collective (a distributed optimizer's gradient bucket: "
                 "the X packed member by member, then one reduce-scatter); the bits of "
                 "c_reduce_scatter_sum on each X[i] alone",
      .inputs = {{"X", /*duplicable=*/true}},
      .outputs = {{"Out", /*duplicable=*/true}},
      .attrs = cut_attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,
      .infer = InferReduceScatterCoalesced,
      // The local part: X packed into the transfer's layout, this member's slices copied out.
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, 2 * IoBytes(ctx)};
          },
  });
  std::vector<AttrDef> split_attrs = cut_attrs;
  split_attrs.push_back(DefaultAttr("offset", int64_t{0}));
  split_attrs.push_back(DefaultAttr("view", false));
  registry.Register(OpDef{
      .type = "c_split",
      .summary = "Out = this member's slice along axis of X, which every member holds whole "
                 "(no transfer); its gradient is c_all_gather. offset k takes member "
                 "(m + k) mod nranks's slice instead (a collective matmul's blocks); view: "
                 "the slice is X's bytes (every dim before axis 1), no copy",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = split_attrs,
      // Reads a parameter's low-precision copy under amp, as the op it feeds would.
      .amp = AmpPolicy::kLow,
      .infer = InferSplitSlice,
      .cost =
          [](const InferContext& ctx) {
            return ctx.attrs().GetBool("view", false) ? OpCost{0, 0} : OpCost{0, IoBytes(ctx)};
          },
      .grad = [](GradContext& ctx) { return GatherScatterGrad(ctx, "c_all_gather"); },
  });

  // A collective matmul's blocks: the member at distance `offset` ahead of this one.
  std::vector<AttrDef> shift_attrs = {DefaultAttr("group", std::string(kDefaultGroup)),
                                      RequiredAttr("nranks", AttrType::kInt),
                                      RequiredAttr("offset", AttrType::kInt)};
  registry.Register(OpDef{
      .type = "c_shift",
      .summary = "Out = X of the member `offset` places before this one in group (member "
                 "(m - offset) mod nranks); this member's X goes to member (m + offset) mod "
                 "nranks. A collective matmul's transfer",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = shift_attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,
      .infer = InferShift,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
  });
  std::vector<AttrDef> member_attrs = {DefaultAttr("group", std::string(kDefaultGroup)),
                                       DefaultAttr("axis", int64_t{0}),
                                       RequiredAttr("nranks", AttrType::kInt)};
  registry.Register(OpDef{
      .type = "c_member_concat",
      .summary = "Out = the blocks X[0..nranks) joined along axis in member order, where X[k] "
                 "is member (m - k) mod nranks's block (what c_shift{offset=k} brought to "
                 "member m): the bits of c_all_gather of those blocks",
      .inputs = {{"X", /*duplicable=*/true}},
      .outputs = {{"Out"}},
      .attrs = member_attrs,
      .amp = AmpPolicy::kAsIs,
      .infer = InferMemberConcat,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
  });
  registry.Register(OpDef{
      .type = "c_member_sum",
      .summary = "Out = X[0..nranks) summed in member order, where X[k] is member (m - k) mod "
                 "nranks's partial (c_shift{offset=k}); low precision summed in f32 and rounded "
                 "once: the bits of this member's slice of c_reduce_scatter_sum",
      .inputs = {{"X", /*duplicable=*/true}},
      .outputs = {{"Out"}},
      .attrs = member_attrs,
      .amp = AmpPolicy::kAsIs,
      .infer = InferMemberSum,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 1); },
  });
}

}  // namespace pw::ops
