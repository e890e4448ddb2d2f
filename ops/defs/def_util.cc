#include "ops/defs/def_util.h"

#include <algorithm>

#include "ops/defs/defaults.h"

namespace pw::ops {

std::string Where(const InferContext& ctx, std::string_view slot) {
  return StrCat(ctx.op().type, ": ", slot);
}

std::string WhereVar(const InferContext& ctx, std::string_view slot, size_t i) {
  const std::vector<std::string>* vars = ctx.op().FindInput(slot);
  if (!vars || i >= vars->size()) return Where(ctx, slot);
  return StrCat(Where(ctx, slot), " ('", (*vars)[i], "')");
}

Status CheckDtype(const InferContext& ctx, std::string_view slot, DataType dtype, size_t i) {
  if (ctx.InputCount(slot) <= i) return InvalidArgument(Where(ctx, slot), " is missing");
  const TensorType& t = ctx.Input(slot, i);
  if (t.dtype != dtype) {
    return InvalidArgument(WhereVar(ctx, slot, i), " ", ShapeToString(t.shape), " has dtype ",
                           DataTypeName(t.dtype), ", expected ", DataTypeName(dtype));
  }
  return OkStatus();
}

StatusOr<DataType> FloatDtype(const InferContext& ctx, std::string_view slot, size_t i) {
  if (ctx.InputCount(slot) <= i) return InvalidArgument(Where(ctx, slot), " is missing");
  const TensorType& t = ctx.Input(slot, i);
  if (!IsFloatingType(t.dtype)) {
    return InvalidArgument(WhereVar(ctx, slot, i), " ", ShapeToString(t.shape), " has dtype ",
                           DataTypeName(t.dtype), ", expected f32, bf16 or f16");
  }
  return t.dtype;
}

Status CheckOneElement(const InferContext& ctx, std::string_view slot, DataType dtype) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, slot, dtype));
  if (NumElements(ctx.Input(slot).shape) != 1)
    return InvalidArgument(WhereVar(ctx, slot), " ", ShapeToString(ctx.Input(slot).shape),
                           " must hold one element");
  return OkStatus();
}

Status CheckRankAtLeast(const InferContext& ctx, std::string_view slot, DataType dtype,
                        int min_rank) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, slot, dtype));
  const Shape& s = ctx.Input(slot).shape;
  if (static_cast<int>(s.size()) < min_rank) {
    return InvalidArgument(Where(ctx, slot), " ", ShapeToString(s), " has rank ", s.size(),
                           ", expected at least ", min_rank);
  }
  return OkStatus();
}

Status CheckRank(const InferContext& ctx, std::string_view slot, DataType dtype, int rank) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, slot, dtype));
  const Shape& s = ctx.Input(slot).shape;
  if (static_cast<int>(s.size()) != rank) {
    return InvalidArgument(Where(ctx, slot), " ", ShapeToString(s), " has rank ", s.size(),
                           ", expected ", rank);
  }
  return OkStatus();
}

Status CheckSameType(const InferContext& ctx, std::string_view a, std::string_view b, size_t ia,
                     size_t ib) {
  const TensorType& ta = ctx.Input(a, ia);
  const TensorType& tb = ctx.Input(b, ib);
  if (ta.dtype != tb.dtype) {
    std::string b_var = WhereVar(ctx, b, ib).substr(ctx.op().type.size() + 2);
    return InvalidArgument(WhereVar(ctx, a, ia), " has dtype ", DataTypeName(ta.dtype), " but ",
                           b_var, " has dtype ", DataTypeName(tb.dtype));
  }
  if (ta.shape != tb.shape) return Mismatch(ctx, a, ta.shape, b, tb.shape, "shapes differ");
  return OkStatus();
}

Status Mismatch(const InferContext& ctx, std::string_view a, const Shape& sa, std::string_view b,
                const Shape& sb, std::string_view why) {
  return InvalidArgument(ctx.op().type, ": ", a, " ", ShapeToString(sa), " and ", b, " ",
                         ShapeToString(sb), ": ", why);
}

Status CheckBias(const InferContext& ctx, std::string_view x, std::string_view bias) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, x));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, x, dtype, 1));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, bias, dtype, 1));
  const Shape& xs = ctx.Input(x).shape;
  const Shape& bs = ctx.Input(bias).shape;
  if (bs.size() > xs.size() || !std::equal(bs.rbegin(), bs.rend(), xs.rbegin()))
    return Mismatch(ctx, x, xs, bias, bs, StrCat(bias, " must equal ", x, "'s trailing dims"));
  return OkStatus();
}

double BytesOf(const TensorType& t) {
  return static_cast<double>(NumElements(t.shape)) * DataTypeSize(t.dtype);
}

double IoBytes(const InferContext& ctx) {
  double bytes = 0;
  for (const Slot& s : ctx.op().inputs)
    for (size_t j = 0; j < s.vars.size(); ++j) bytes += BytesOf(ctx.Input(s.name, j));
  for (const auto& slot : ctx.outputs())
    for (const TensorType& t : slot) bytes += BytesOf(t);
  return bytes;
}

OpCost ElementwiseCost(const InferContext& ctx, double flops_per_element, std::string_view slot) {
  OpCost cost;
  cost.flops = flops_per_element * static_cast<double>(NumElements(ctx.Output(slot).shape));
  cost.bytes = IoBytes(ctx);
  return cost;
}

void MarkWeightGrad(const GradContext& ctx, Op& op) {
  bool any = false;
  bool all = true;
  op.ForEachOutput([&](const std::string& name) {
    const Var* v = ctx.FindVar(ForwardVarName(name));
    any = true;
    all = all && IsGradVarName(name) && v && v->is_parameter;
  });
  op.weight_grad = any && all;
}

bool NormalizeAxis(int64_t axis, int rank, int* out) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  *out = static_cast<int>(axis);
  return true;
}

std::vector<AttrDef> SeqParallelAttrs() {
  return {DefaultAttr(kSeqParallelGroup, std::string(kDefaultGroup)),
          DefaultAttr(kSeqParallelAxis, int64_t{1}), DefaultAttr(kSeqParallelNranks, int64_t{1})};
}

bool SeqParallel(const Op& forward) { return forward.attrs.GetInt(kSeqParallelNranks, 1) > 1; }

std::vector<AttrDef> WithSeqParallel(std::vector<AttrDef> attrs) {
  for (AttrDef& a : SeqParallelAttrs()) attrs.push_back(std::move(a));
  return attrs;
}

namespace {

// c_all_gather of sequence-sharded `in` (of `type`) along the forward op's sequence axis;
// `type` becomes the gathered tensor's.
std::string GatherAlongSequence(GradContext& ctx, const std::string& in, TensorType& type) {
  const Op& fwd = ctx.forward();
  const int64_t nranks = fwd.attrs.GetInt(kSeqParallelNranks, 1);
  const int64_t axis = fwd.attrs.GetInt(kSeqParallelAxis, 1);
  int norm_axis = 0;
  NormalizeAxis(axis, static_cast<int>(type.shape.size()), &norm_axis);
  type.shape[norm_axis] *= nranks;
  std::string out = ctx.NewTemp(in + ".gathered", type);
  // A backward op (not kCommunication): split-program places it with the gradient it
  // serves, and it is never the first op of a stage's backward to be placed by the
  // kind of the op before it.
  Op& op = ctx.Emit("c_all_gather");
  op.SetInput("X", {in}).SetOutput("Out", {out});
  op.SetAttr("group", fwd.attrs.GetString(kSeqParallelGroup, kDefaultGroup));
  op.SetAttr("axis", axis).SetAttr("nranks", nranks);
  return out;
}

}  // namespace

StatusOr<std::string> GatherSequence(GradContext& ctx, const std::string& var,
                                     const std::string& like, bool per_row) {
  const Op& fwd = ctx.forward();
  const Var* v = ctx.FindVar(like);
  if (!v || v->shape.empty()) return NotFound(fwd.type, " grad: var '", like, "' is not declared");
  if (!per_row) {
    TensorType type{v->dtype, v->shape};
    return GatherAlongSequence(ctx, var, type);
  }
  const Shape rows(v->shape.begin(), v->shape.end() - 1);
  auto reshape = [&](const std::string& in, const Shape& shape, const std::string& hint) {
    std::string out = ctx.NewTemp(hint, {DataType::kFloat32, shape});
    Op& op = ctx.Emit("reshape");
    op.SetInput("X", {in}).SetOutput("Out", {out});
    op.SetAttr("shape", shape);
    return out;
  };
  std::string shaped = reshape(var, rows, var + ".rows");
  TensorType whole{DataType::kFloat32, rows};
  std::string gathered = GatherAlongSequence(ctx, shaped, whole);
  return reshape(gathered, {NumElements(whole.shape)}, var + ".whole");
}

int64_t ShardPartialGroups(const GradContext& ctx, const std::string& x) {
  const Op& fwd = ctx.forward();
  const int64_t nranks = fwd.attrs.GetInt(kSeqParallelNranks, 1);
  const Var* v = ctx.FindVar(x);
  if (nranks <= 1 || !v || v->shape.size() < 2) return 0;
  const int rank = static_cast<int>(v->shape.size());
  int axis = 0;
  if (!NormalizeAxis(fwd.attrs.GetInt(kSeqParallelAxis, 1), rank, &axis) || axis != rank - 2)
    return 0;
  const int64_t groups = DefaultGroupsPerLead(v->shape[axis] * nranks);
  return groups % nranks == 0 ? groups / nranks : 0;
}

void EmitShardPartials(GradContext& ctx, Op& op, const std::string& x, int64_t per_lead,
                       const std::vector<std::pair<std::string, std::string>>& outputs) {
  const Shape& x_shape = ctx.FindVar(x)->shape;
  Shape shape(x_shape.begin(), x_shape.end() - 2);
  shape.push_back(per_lead);
  shape.push_back(x_shape.back());
  const TensorType partial_type{DataType::kFloat32, shape};
  std::vector<std::string> partials;
  for (const auto& [slot, grad] : outputs) {
    partials.push_back(ctx.NewTemp(grad + ".partials", partial_type));
    op.SetOutput(slot, {partials.back()});
  }
  op.SetAttr(kPartialGroupsAttr, per_lead);
  op.weight_grad = true;
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorType gathered_type = partial_type;
    std::string gathered = GatherAlongSequence(ctx, partials[i], gathered_type);
    ctx.emitted().back().weight_grad = true;
    // Param gives the output its dtype (under amp, the low-precision copy's: the sum is
    // rounded once, as the unsharded kernel rounds it).
    const std::string& grad = outputs[i].second;
    Op& sum = ctx.Emit("sum_row_partials");
    sum.SetInput("X", {gathered}).SetInput("Param", {ForwardVarName(grad)});
    sum.SetOutput("Out", {grad});
    MarkWeightGrad(ctx, sum);
  }
}

AttrDef PartialGroupsAttr() { return DefaultAttr(kPartialGroupsAttr, int64_t{0}); }

StatusOr<TensorType> RowSumType(const InferContext& ctx, const Shape& rows, const Shape& cols,
                                DataType dtype) {
  const int64_t per_lead = ctx.attrs().GetInt(kPartialGroupsAttr, 0);
  if (per_lead == 0) return TensorType{dtype, cols};
  if (per_lead < 0 || rows.empty() || rows.back() % per_lead != 0)
    return InvalidArgument(ctx.op().type, ": partial_groups ", per_lead,
                           " must be positive and divide the last row axis (rows ",
                           ShapeToString(rows), ")");
  Shape shape(rows.begin(), rows.end() - 1);
  shape.push_back(per_lead);
  shape.insert(shape.end(), cols.begin(), cols.end());
  return TensorType{DataType::kFloat32, std::move(shape)};
}

StatusOr<TensorType> BiasGradType(const InferContext& ctx, std::string_view dout) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, dout));
  const Shape& g = ctx.Input(dout).shape;
  Shape b = ctx.attrs().GetInts("bias_shape");
  if (b.empty() || b.size() > g.size() || !std::equal(b.rbegin(), b.rend(), g.rbegin()))
    return Mismatch(ctx, dout, g, "bias_shape", b,
                    StrCat("bias_shape must equal ", dout, "'s trailing dims"));
  return RowSumType(ctx, Shape(g.begin(), g.end() - b.size()), b, dtype);
}

}  // namespace pw::ops
