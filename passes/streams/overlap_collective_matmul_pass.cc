// overlap-collective-matmul: sequence parallelism's all-gathers and reduce-scatters hidden
// under the matmuls they feed or are fed by (XLA's collective matmul), exactly.
//
//   c_all_gather(X) -> matmul             X's blocks arrive one c_shift at a time on the
//                                          communication stream while the matmul of the block
//                                          before runs on compute; c_member_concat joins the
//                                          products in member order.
//   matmul -> c_reduce_scatter_sum         each member's rows multiplied (c_split{offset}) and
//                                          sent straight to their owner (c_shift) while the
//                                          next member's rows multiply; the owner sums its n
//                                          partials in member order (c_member_sum).
//
// Bits: a row block of a matmul is computed as those rows of the whole one (row_split.h,
// blocks of at least kMinSplitRows GEMM rows), a shift moves bytes, and c_member_sum adds
// member 0's partial, then member 1's, ... in f32 as every transport's reduce-scatter does:
// each output element is the same sum in the same order. A ring that accumulated partials
// as they travel would add them in an order that depends on the owner, so the partials go
// to their owner directly instead. The blocks are chosen by the cost model: a collective
// stays whole where its decomposition does not finish sooner.

#include <algorithm>
#include <functional>
#include <optional>

#include "cost_model/estimator.h"
#include "cost_model/op_price.h"
#include "ir/rank_layout.h"
#include "passes/cost_inputs.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/streams/cut_pieces.h"
#include "passes/streams/row_split.h"
#include "passes/streams/row_split_choice.h"

namespace pw {
namespace {

// Whether matmul `op` multiplies rows of `x` in one block per member of `cut`.
bool MultipliesMemberBlocks(const Program& program, const Module& module, const Op& op,
                            const std::string& x, const CollectiveCut& cut) {
  return cut.members >= 2 && MultipliesRowBlocks(program, module, op, x, cut.axis, cut.members);
}

// When the decomposed collective matmul finishes, by the cost model: `members` blocks of
// `block` seconds of matmuls each (a smaller GEMM is priced as such: it may fill the device
// less well) and a shift of `shift` seconds per remote block. A gather's shifts all leave
// at once (they read X only); block k waits for the k-th. A scatter's block k (remote ones
// first) is shifted once multiplied, one shift at a time.
double DecomposedSeconds(bool gather, int members, double block, double shift) {
  double compute_end = 0, comm_end = 0;
  for (int k = 0; k < members; ++k) {
    if (gather) {
      const double arrived = k * shift;
      compute_end = std::max(compute_end, arrived) + block;
    } else {
      compute_end += block;
      if (k + 1 < members) comm_end = std::max(comm_end, compute_end) + shift;
    }
  }
  return std::max(compute_end, comm_end);
}

class OverlapCollectiveMatmulPass : public Pass {
 public:
  std::string_view name() const override { return "overlap-collective-matmul"; }
  std::string_view description() const override {
    return "hides sequence parallelism's collectives under their matmuls (collective matmul): "
           "an all-gather feeding a matmul becomes nranks-1 c_shift transfers on the "
           "communication stream, each block's matmul running while the next block arrives, "
           "joined in member order (c_member_concat); a matmul feeding a reduce-scatter "
           "multiplies each member's rows and sends them straight to their owner (c_shift), "
           "who adds its partials in member order (c_member_sum): bit-identical at any group "
           "size. Blocks of at least 64 GEMM rows; decomposes where the cost model finds it "
           "finishes sooner (needs opt --device), and a planned module keeps that only when its "
           "simulated step is shorter; decompose=all everywhere it applies (tests). "
           "Run after assign-streams, before overlap-1f1b and insert-events.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    const bool all = decompose.value() == "all";
    registry_ = &context.ops();
    const cost::Estimator* estimator = context.Find<cost::Estimator>();
    if (!all && !estimator)
      return FailedPrecondition(
          "overlap-collective-matmul decomposes where the cost model finds it pays: pass "
          "--device D to 'pipeweave opt' (or decompose=all)");
    for (const Program& p : module.programs()) {
      if (!p.info().segment_of.empty() || !p.info().variant_of.empty())
        return FailedPrecondition("overlap-collective-matmul runs before overlap-1f1b ('", p.name(),
                                  "' is one of its programs): put it right after assign-streams");
      for (const Op& op : p.ops())
        if ((op.type == "c_all_gather" || op.type == "c_reduce_scatter_sum") &&
            op.attrs.GetString("group", "mp") == "mp" && op.stream.empty())
          return FailedPrecondition(
              "overlap-collective-matmul hides the all-gathers and reduce-scatters on the "
              "communication streams, but '",
              p.name(), "' runs one on compute: run assign-streams before it");
    }
    // Each choice is local: it takes the collective as fully exposed. A planned module keeps
    // the decomposition only when the simulated step is shorter with it (a collective other
    // streams already hid gains nothing and pays for the copies and smaller GEMMs).
    std::optional<Module> before;
    double before_seconds = 0;
    if (!all && !module.plan.empty()) {
      StatusOr<double> t = SimulatedStep(module, context);
      if (t.ok()) {
        before = module;
        before_seconds = *t;
      }
    }
    int gathers = 0, scatters = 0, kept = 0;
    for (Program& program : module.programs()) {
      for (int i = 0; i < static_cast<int>(program.ops().size()); ++i) {
        const std::string type = program.ops()[i].type;
        if (type != "c_all_gather" && type != "c_reduce_scatter_sum") continue;
        if (program.ops()[i].attrs.GetString("group", "mp") != "mp") continue;
        Decision d = type == "c_all_gather" ? DecomposeGather(module, program, i, all, estimator)
                                            : DecomposeScatter(module, program, i, all, estimator);
        if (d == Decision::kDone) (type == "c_all_gather" ? gathers : scatters) += 1;
        if (d == Decision::kKept) ++kept;
      }
    }
    if (before && gathers + scatters > 0) {
      StatusOr<double> after = SimulatedStep(module, context);
      if (after.ok() && *after >= before_seconds * 0.999) {
        module = std::move(*before);
        context.AddStatistic("undone-step-not-shorter", gathers + scatters);
        kept += gathers + scatters;
        gathers = scatters = 0;
      }
    }
    context.AddStatistic("all-gathers-decomposed", gathers);
    context.AddStatistic("reduce-scatters-decomposed", scatters);
    context.AddStatistic("kept-whole-by-cost", kept);
    return gathers + scatters > 0;
  }

 private:
  enum class Decision { kNotApplicable, kKept, kDone };

  // The price of `op` on the program's pricing rank; none when it cannot be priced.
  static cost::OpPrice Price(const Module& module, const Program& program, const Op& op,
                             const cost::Estimator& estimator, const OpRegistry& registry) {
    auto lookup = [&](const std::string& v) { return module.FindVar(v, &program); };
    StatusOr<cost::OpPrice> p =
        cost::PriceOp(op, module, PricingRank(module, program), estimator, registry, lookup);
    return p.ok() ? *p : cost::OpPrice{};
  }

  // The seconds of one row block of matmul `op`: its X and Out cut in `cut.members` along
  // the cut's axis.
  static double BlockSeconds(const Module& module, const Program& program, const Op& op,
                             const CollectiveCut& cut, const cost::Estimator& estimator,
                             const OpRegistry& registry) {
    std::vector<Var> blocks;
    for (const std::string& name : {op.Input("X"), op.Output("Out")}) {
      const Var* v = program.FindVar(name);
      if (!v) return 0;
      blocks.push_back(*v);
      blocks.back().shape[cut.axis] /= cut.members;
    }
    auto lookup = [&](const std::string& v) -> const Var* {
      for (const Var& b : blocks)
        if (b.name == v) return &b;
      return module.FindVar(v, &program);
    };
    StatusOr<cost::OpPrice> p =
        cost::PriceOp(op, module, PricingRank(module, program), estimator, registry, lookup);
    return p.ok() ? p->seconds : 0;
  }

  // Whether decomposing pays: `collective` whole then `compute` seconds of matmuls, against
  // the pipelined blocks (`block` seconds each) with a shift of 1/members of `collective`'s
  // buffer each, plus the `copied_bytes` (read and written) of the splits, joins and sums.
  bool Pays(bool gather, const cost::OpPrice& collective, double compute, double block, int members,
            DataType dtype, double copied_bytes, const cost::Estimator& estimator) {
    if (!collective.collective) return false;
    const double shift =
        estimator.comm()
            .Time(cost::CommKind::kSendRecv, collective.bytes / members, 2, collective.span)
            .seconds;
    const double copies = cost::RooflineTime(estimator.device(), dtype, 0, copied_bytes);
    const double whole = collective.seconds + compute;
    return DecomposedSeconds(gather, members, block, shift) + copies < whole * 0.999;
  }

  Decision DecomposeGather(Module& module, Program& program, int at, bool all,
                           const cost::Estimator* estimator) {
    const Op gather = program.ops()[at];
    if (!gather.wait_events.empty() || !gather.record_events.empty())
      return Decision::kNotApplicable;
    const std::string x = gather.Input("X"), g = gather.Output("Out");
    const Var* gv = program.FindVar(g);
    const Var* xv = program.FindVar(x);
    if (!gv || !xv || x == g) return Decision::kNotApplicable;
    const CollectiveCut cut = CutOf(gather, *gv);
    // The readers of the gathered tensor, and which of them multiply its row blocks (their
    // matrices defined before the first reader, where the blocks' products go).
    int first_reader = -1;
    std::vector<int> matmuls;
    bool others = ExportedVar(program, g);
    std::vector<Op>& ops = program.ops();
    for (int i = at + 1; i < static_cast<int>(ops.size()); ++i) {
      if (WritesVar(ops[i], g) || WritesVar(ops[i], x)) return Decision::kNotApplicable;
      if (!ReadsVar(ops[i], g)) continue;
      if (first_reader < 0) first_reader = i;
      if (MultipliesMemberBlocks(program, module, ops[i], g, cut) &&
          !WrittenFrom(program, first_reader, ops[i].Input("Y")))
        matmuls.push_back(i);
      else
        others = true;
    }
    if (matmuls.empty()) return Decision::kNotApplicable;
    if (!all) {
      // The joins copy each product, and the gathered tensor where others read it.
      double compute = 0, block = 0, copied = others ? 2.0 * gv->num_bytes() : 0;
      for (int i : matmuls) {
        compute += Price(module, program, ops[i], *estimator, registry()).seconds;
        block += BlockSeconds(module, program, ops[i], cut, *estimator, registry());
        const Var* out = program.FindVar(ops[i].Output("Out"));
        copied += 2.0 * (out ? out->num_bytes() : 0);
      }
      const cost::OpPrice collective = Price(module, program, gather, *estimator, registry());
      if (!Pays(true, collective, compute, block, cut.members, gv->dtype, copied, *estimator))
        return Decision::kKept;
    }
    const int n = cut.members;
    const int64_t block_extent = xv->shape[cut.axis];
    // The blocks: X itself (member m's), then the one c_shift{offset k} brings (m - k's).
    std::vector<std::string> blocks = {x};
    std::vector<Op> shifts;
    for (int k = 1; k < n; ++k) {
      const Var xs = *program.FindVar(x);
      blocks.push_back(DeclarePiece(program, xs, StrCat("@SHIFT", k), cut.axis, block_extent));
      Op shift = PieceOf(gather, "c_shift");
      shift.SetInput("X", {x}).SetOutput("Out", {blocks.back()});
      shift.SetAttr("group", cut.group).SetAttr("nranks", int64_t{n}).SetAttr("offset", int64_t{k});
      shifts.push_back(std::move(shift));
    }
    // Each matmul's block products, block by block (block 0 needs no transfer), then each
    // product joined in member order; the gathered tensor itself where others read it.
    std::vector<Op> products;
    std::vector<std::vector<std::string>> outs(matmuls.size());
    for (int k = 0; k < n; ++k)
      for (size_t j = 0; j < matmuls.size(); ++j) {
        const Op& mm = program.ops()[matmuls[j]];
        const Var out = *program.FindVar(mm.Output("Out"));
        outs[j].push_back(
            DeclarePiece(program, out, StrCat("@BLOCK", k), cut.axis, out.shape[cut.axis] / n));
        Op block = mm;
        block.SetInput("X", {blocks[k]}).SetOutput("Out", {outs[j].back()});
        products.push_back(std::move(block));
      }
    for (size_t j = 0; j < matmuls.size(); ++j) {
      const Op& mm = program.ops()[matmuls[j]];
      Op concat = PieceOf(mm, "c_member_concat");
      concat.SetInput("X", outs[j]).SetOutput("Out", {mm.Output("Out")});
      concat.SetAttr("group", cut.group).SetAttr("axis", int64_t{cut.axis});
      concat.SetAttr("nranks", int64_t{n});
      products.push_back(std::move(concat));
    }
    if (others) {
      Op concat = PieceOf(program.ops()[matmuls.front()], "c_member_concat");
      concat.SetInput("X", blocks).SetOutput("Out", {g});
      concat.SetAttr("group", cut.group).SetAttr("axis", int64_t{cut.axis});
      concat.SetAttr("nranks", int64_t{n});
      products.push_back(std::move(concat));
    }
    // The shifts where the gather was, the products where its first reader is.
    Splice(ops, at, std::move(shifts), first_reader, std::move(products), matmuls);
    if (!others) program.RemoveVarsIf([&](const Var& v) { return v.name == g; });
    return Decision::kDone;
  }

  Decision DecomposeScatter(Module& module, Program& program, int at, bool all,
                            const cost::Estimator* estimator) {
    std::vector<Op>& ops = program.ops();
    const Op scatter = ops[at];
    const std::string partial = scatter.Input("X");
    if (!scatter.wait_events.empty() || !scatter.record_events.empty())
      return Decision::kNotApplicable;
    // The matmul that writes the partial sum, read by the reduce-scatter alone.
    int mm_index = -1;
    for (int i = at - 1; i >= 0 && mm_index < 0; --i)
      if (WritesVar(ops[i], partial)) mm_index = i;
    if (mm_index < 0 || ExportedVar(program, partial)) return Decision::kNotApplicable;
    for (int i = 0; i < static_cast<int>(ops.size()); ++i)
      if (i != at && ReadsVar(ops[i], partial)) return Decision::kNotApplicable;
    for (int i = mm_index + 1; i < at; ++i)
      if (WritesVar(ops[i], partial)) return Decision::kNotApplicable;
    const Op mm = ops[mm_index];
    const Var* pv = program.FindVar(partial);
    if (!pv) return Decision::kNotApplicable;
    const CollectiveCut cut = CutOf(scatter, *pv);
    const std::string a = mm.Input("X");
    if (!MultipliesMemberBlocks(program, module, mm, a, cut)) return Decision::kNotApplicable;
    for (int i = mm_index + 1; i < at; ++i)
      if (WritesVar(ops[i], a)) return Decision::kNotApplicable;
    // The rows of each member are a view of A where they lie one after another in it and
    // nothing writes A later; else a copy.
    const bool view =
        SlicesAsViews(program, *program.FindVar(a), cut.axis, static_cast<size_t>(mm_index) + 1);
    if (!all) {
      // The splits copy the rows in (unless views); the owner's sum reads its n partials and
      // writes one.
      const Var* av = program.FindVar(a);
      const double copied = (view ? 0.0 : 2.0 * (av ? av->num_bytes() : 0)) +
                            (1.0 + 1.0 / cut.members) * static_cast<double>(pv->num_bytes());
      const double compute = Price(module, program, mm, *estimator, registry()).seconds;
      const double block = BlockSeconds(module, program, mm, cut, *estimator, registry());
      const cost::OpPrice collective = Price(module, program, scatter, *estimator, registry());
      if (!Pays(false, collective, compute, block, cut.members, pv->dtype, copied, *estimator))
        return Decision::kKept;
    }
    const int n = cut.members;
    const Var av = *program.FindVar(a);
    const Var pw = *pv;
    // Member (m + k)'s rows, remote owners first, each multiplied then sent to its owner;
    // this member's own rows last, multiplied while the last shift runs.
    std::vector<Op> blocks;
    std::vector<std::string> parts(n);
    for (int step = 1; step <= n; ++step) {
      const int k = step % n;
      const std::string rows =
          DeclarePiece(program, av, StrCat("@ROWS_OF+", k), cut.axis, av.shape[cut.axis] / n);
      Op split = PieceOf(mm, "c_split");
      split.SetInput("X", {a}).SetOutput("Out", {rows});
      split.SetAttr("group", cut.group).SetAttr("axis", int64_t{cut.axis});
      split.SetAttr("nranks", int64_t{n}).SetAttr("offset", int64_t{k});
      if (view) split.SetAttr("view", true);
      blocks.push_back(std::move(split));
      const std::string product =
          DeclarePiece(program, pw, StrCat("@PARTIAL+", k), cut.axis, pw.shape[cut.axis] / n);
      Op block = mm;
      block.SetInput("X", {rows}).SetOutput("Out", {product});
      blocks.push_back(std::move(block));
      if (k == 0) {
        parts[0] = product;
        continue;
      }
      parts[k] = DeclarePiece(program, pw, StrCat("@SHIFT", k), cut.axis, pw.shape[cut.axis] / n);
      Op shift = PieceOf(scatter, "c_shift");
      shift.SetInput("X", {product}).SetOutput("Out", {parts[k]});
      shift.SetAttr("group", cut.group).SetAttr("nranks", int64_t{n}).SetAttr("offset", int64_t{k});
      blocks.push_back(std::move(shift));
    }
    Op sum = PieceOf(mm, "c_member_sum");
    sum.SetInput("X", parts).SetOutput("Out", {scatter.Output("Out")});
    sum.SetAttr("group", cut.group).SetAttr("axis", int64_t{cut.axis});
    sum.SetAttr("nranks", int64_t{n});
    sum.role = scatter.role;
    sum.weight_grad = scatter.weight_grad;
    Splice(ops, mm_index, std::move(blocks), at, {std::move(sum)}, {at});
    program.RemoveVarsIf([&](const Var& v) { return v.name == partial; });
    return Decision::kDone;
  }

  const OpRegistry& registry() const { return *registry_; }

  const OpRegistry* registry_ = nullptr;  // the context's, for PriceOp
  Option<std::string> decompose{this,
                                "decompose",
                                "auto (where the cost model finds it pays) or all (every "
                                "eligible collective, for tests)",
                                "auto",
                                {"auto", "all"}};
};

}  // namespace

PW_REGISTER_PASS(OverlapCollectiveMatmulPass)

}  // namespace pw
