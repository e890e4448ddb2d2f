// Megatron's vocabulary-parallel embedding and cross-entropy. Each rank of the `group` (mp)
// holds rows [r · V/n, (r + 1) · V/n) of the embedding table and the same columns of the
// LM head, r its index in the group (KernelContext::GroupRank), so no rank holds the full
// vocabulary:
//
//   c_embedding: the rows of the ids in this rank's range, zeros elsewhere; a
//     c_allreduce_sum over the group completes the lookup.
//   cross-entropy over logits sharded on the class axis, as three steps around the
//   collectives: reduce_max -> c_allreduce_max (the shared shift m); c_softmax_stats ->
//   c_allreduce_sum (sum of exp(logit - m), and the label's logit - m from the rank that
//   holds it); c_softmax_cross_entropy: loss = log(sum) - (logit[label] - m) and this
//   rank's columns of the softmax. Its gradient, softmax - onehot(label) on this rank's
//   columns, is the whole gradient of the loss: the shift cancels, so the statistics get
//   none.

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

std::vector<AttrDef> GroupAttrs(std::vector<AttrDef> more = {}) {
  more.push_back(DefaultAttr("group", std::string(kDefaultGroup)));
  return more;
}

Status CheckVocab(const InferContext& ctx, int64_t shard_rows) {
  int64_t vocab = ctx.attrs().GetInt("vocab_size");
  if (vocab <= 0 || shard_rows <= 0 || vocab % shard_rows != 0)
    return InvalidArgument(ctx.op().type, ": vocab_size ", vocab,
                           " must be a positive multiple of the shard's ", shard_rows, " rows");
  return OkStatus();
}

// ---- c_embedding ----

Status InferCEmbedding(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Ids", DataType::kInt64));
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "W"));
  PW_RETURN_IF_ERROR(CheckRank(ctx, "W", dtype, 2));
  PW_RETURN_IF_ERROR(CheckVocab(ctx, ctx.Input("W").shape[0]));
  Shape out = ctx.Input("Ids").shape;
  out.push_back(ctx.Input("W").shape[1]);
  ctx.SetOutput("Out", {dtype, out});
  return OkStatus();
}

Status CEmbeddingGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& w = fwd.Input("W");
  if (!ctx.NeedsGrad(w)) return OkStatus();
  const Var* wv = ctx.FindVar(w);
  if (!wv || wv->shape.size() != 2)
    return InvalidArgument("c_embedding grad: W '", w, "' is not a declared 2-D var");
  Op& op = ctx.Emit("c_embedding_grad");
  op.SetInput("Ids", {fwd.Input("Ids")})
      .SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  op.SetOutput(GradVarName("W"), {ctx.Grad(w)});
  op.SetAttr("rows", wv->shape[0]).SetAttr("vocab_size", fwd.attrs.GetInt("vocab_size"));
  op.SetAttr("group", fwd.attrs.GetString("group", kDefaultGroup));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferCEmbeddingGrad(InferContext& ctx) {
  const std::string dout = GradVarName("Out");
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Ids", DataType::kInt64));
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, dout));
  const Shape& ids = ctx.Input("Ids").shape;
  const Shape& g = ctx.Input(dout).shape;
  if (g.size() != ids.size() + 1 || !std::equal(ids.begin(), ids.end(), g.begin()))
    return Mismatch(ctx, "Ids", ids, dout, g, "Out@GRAD must be Ids' shape + [H]");
  int64_t rows = ctx.attrs().GetInt("rows");
  PW_RETURN_IF_ERROR(CheckVocab(ctx, rows));
  ctx.SetOutput(GradVarName("W"), {dtype, {rows, g.back()}});
  return OkStatus();
}

// ---- the cross-entropy ----

// Logits [..., V/n] and a per-row statistic shaped like Logits without the class axis.
Status CheckRowStat(const InferContext& ctx, std::string_view slot) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, slot, ctx.Input("Logits").dtype));
  const Shape& l = ctx.Input("Logits").shape;
  if (ctx.Input(slot).shape != Shape(l.begin(), l.end() - 1))
    return Mismatch(ctx, slot, ctx.Input(slot).shape, "Logits", l,
                    "a row statistic is Logits' shape without the last dim");
  return OkStatus();
}

Status CheckLogitsAndLabel(const InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "Logits"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "Logits", dtype, 1));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Label", DataType::kInt64));
  const Shape& l = ctx.Input("Logits").shape;
  if (ctx.Input("Label").shape != Shape(l.begin(), l.end() - 1))
    return Mismatch(ctx, "Logits", l, "Label", ctx.Input("Label").shape,
                    "Label must be Logits' shape without the last dim");
  return OkStatus();
}

Status InferReduceMax(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", dtype, 1));
  const Shape& x = ctx.Input("X").shape;
  if (x.back() == 0) return InvalidArgument(WhereVar(ctx, "X"), ": the last dim is empty");
  ctx.SetOutput("Out", {dtype, Shape(x.begin(), x.end() - 1)});
  return OkStatus();
}

Status InferSoftmaxStats(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckLogitsAndLabel(ctx));
  PW_RETURN_IF_ERROR(CheckRowStat(ctx, "Max"));
  PW_RETURN_IF_ERROR(CheckVocab(ctx, ctx.Input("Logits").shape.back()));
  TensorType row = ctx.Input("Max");
  ctx.SetOutput("SumExp", row);
  ctx.SetOutput("TargetLogit", row);
  return OkStatus();
}

Status InferCSoftmaxCrossEntropy(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckLogitsAndLabel(ctx));
  for (const char* slot : {"Max", "SumExp", "TargetLogit"})
    PW_RETURN_IF_ERROR(CheckRowStat(ctx, slot));
  ctx.SetOutput("Loss", ctx.Input("Max"));
  ctx.SetOutput("Softmax", ctx.Input("Logits"));
  return OkStatus();
}

Status CSoftmaxCrossEntropyGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& logits = fwd.Input("Logits");
  if (!ctx.NeedsGrad(logits)) return OkStatus();
  Op& op = ctx.Emit("c_softmax_cross_entropy_grad");
  op.SetInput("Softmax", {fwd.Output("Softmax")}).SetInput("Label", {fwd.Input("Label")});
  op.SetInput(GradVarName("Loss"), {ctx.Grad(fwd.Output("Loss"))});
  op.SetOutput(GradVarName("Logits"), {ctx.Grad(logits)});
  op.SetAttr("ignore_index", fwd.attrs.GetInt("ignore_index", kIgnoreIndex));
  op.SetAttr("group", fwd.attrs.GetString("group", kDefaultGroup));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferCSoftmaxCrossEntropyGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "Softmax"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "Softmax", dtype, 1));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Label", DataType::kInt64));
  const std::string dloss = GradVarName("Loss");
  PW_RETURN_IF_ERROR(CheckDtype(ctx, dloss, dtype));
  const Shape& p = ctx.Input("Softmax").shape;
  const Shape rows(p.begin(), p.end() - 1);
  if (ctx.Input("Label").shape != rows || ctx.Input(dloss).shape != rows)
    return Mismatch(ctx, "Softmax", p, dloss, ctx.Input(dloss).shape,
                    "Label and Loss@GRAD must be Softmax's shape without the last dim");
  ctx.SetOutput(GradVarName("Logits"), ctx.Input("Softmax"));
  return OkStatus();
}

OpCost PerLogit(const InferContext& ctx, double flops) {
  return OpCost{flops * double(NumElements(ctx.Input(ctx.op().inputs[0].name).shape)),
                IoBytes(ctx)};
}

}  // namespace

void RegisterVocabParallelOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "c_embedding",
      .summary = "Out[..., H] = W[Ids - r·R] for ids in this rank's rows [r·R, (r+1)·R) of "
                 "a vocab_size-row table sharded over group (R = W's rows), zeros elsewhere",
      .inputs = {{"Ids"}, {"W"}},
      .outputs = {{"Out"}},
      .attrs = GroupAttrs({RequiredAttr("vocab_size", AttrType::kInt)}),
      .infer = InferCEmbedding,
      .cost =
          [](const InferContext& ctx) {
            // Only the gathered rows of W are read, as for embedding.
            double ids = double(NumElements(ctx.Input("Ids").shape)) * 8;
            double out = double(NumElements(ctx.Output("Out").shape)) *
                         double(DataTypeSize(ctx.Input("W").dtype));
            return OpCost{0, ids + 2 * out};
          },
      .grad = CEmbeddingGrad,
  });
  registry.Register(OpDef{
      .type = "c_embedding_grad",
      .summary = "W@GRAD [rows, H]: rows of Out@GRAD summed at the ids in this rank's rows",
      .inputs = {{"Ids"}, {GradVarName("Out")}},
      .outputs = {{GradVarName("W")}},
      .attrs = GroupAttrs(
          {RequiredAttr("rows", AttrType::kInt), RequiredAttr("vocab_size", AttrType::kInt)}),
      .infer = InferCEmbeddingGrad,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{double(NumElements(ctx.Input(GradVarName("Out")).shape)), IoBytes(ctx)};
          },
  });
  registry.Register(OpDef{
      .type = "reduce_max",
      .summary = "Out[...] = max of X over its last axis",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .amp = AmpPolicy::kF32,
      .infer = InferReduceMax,
      .cost = [](const InferContext& ctx) { return PerLogit(ctx, 1); },
  });
  registry.Register(OpDef{
      .type = "c_softmax_stats",
      .summary = "per row, over this rank's columns of vocabulary-parallel Logits: SumExp = "
                 "sum(exp(Logits - Max)), TargetLogit = Logits[Label - r·V/n] - Max where this "
                 "rank holds Label, else 0",
      .inputs = {{"Logits"}, {"Max"}, {"Label"}},
      .outputs = {{"SumExp"}, {"TargetLogit"}},
      .attrs = GroupAttrs(
          {RequiredAttr("vocab_size", AttrType::kInt), DefaultAttr("ignore_index", kIgnoreIndex)}),
      .amp = AmpPolicy::kF32,
      .infer = InferSoftmaxStats,
      .cost = [](const InferContext& ctx) { return PerLogit(ctx, 3); },
  });
  registry.Register(OpDef{
      .type = "c_softmax_cross_entropy",
      .summary = "per-token Loss = log(SumExp) - TargetLogit (0 for ignore_index) from the "
                 "group-wide statistics; Softmax = this rank's columns of the softmax",
      .inputs = {{"Logits"}, {"Max"}, {"SumExp"}, {"TargetLogit"}, {"Label"}},
      .outputs = {{"Loss"}, {"Softmax"}},
      .attrs = GroupAttrs({DefaultAttr("ignore_index", kIgnoreIndex)}),
      .amp = AmpPolicy::kF32,
      .infer = InferCSoftmaxCrossEntropy,
      .cost = [](const InferContext& ctx) { return PerLogit(ctx, 3); },
      .grad = CSoftmaxCrossEntropyGrad,
  });
  registry.Register(OpDef{
      .type = "c_softmax_cross_entropy_grad",
      .summary = "Logits@GRAD = (Softmax - onehot(Label) on this rank's columns) · Loss@GRAD",
      .inputs = {{"Softmax"}, {"Label"}, {GradVarName("Loss")}},
      .outputs = {{GradVarName("Logits")}},
      .attrs = GroupAttrs({DefaultAttr("ignore_index", kIgnoreIndex)}),
      .amp = AmpPolicy::kF32,
      .infer = InferCSoftmaxCrossEntropyGrad,
      .cost = [](const InferContext& ctx) { return PerLogit(ctx, 2); },
  });
}

}  // namespace pw::ops
