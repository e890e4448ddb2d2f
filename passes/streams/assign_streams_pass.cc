// assign-streams: every collective on the stream type of its group, so that
// communication can run beside compute. It only moves ops between streams: the order
// within every stream is unchanged, and the executor (or insert-events) orders the
// streams with events.

#include "ir/post_validation.h"
#include "ir/stream_type.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

class AssignStreamsPass : public Pass {
 public:
  std::string_view name() const override { return "assign-streams"; }
  std::string_view description() const override {
    return "Puts every collective op on the stream type of its group: all-reduces over mp on "
           "mp_comm, over dp on dp_comm (send/recv jobs always run on pp_send and pp_recv). "
           "mp=compute or dp=compute keeps that group's collectives on the compute stream. "
           "Adds no events: run insert-events after the passes that move or reorder ops (the "
           "executor covers what no event orders, and --strict-events refuses it).";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    bool changed = false;
    for (Program& program : module.programs())
      for (Op& op : program.ops()) {
        const OpDef* def = context.ops().Find(op.type);
        // A reduction issued at the step's start keeps the stream it was given.
        if (!def || !def->collective || op.attrs.GetBool(kAtStepStartAttr, false)) continue;
        const std::string group = op.attrs.GetString("group", "mp");
        StreamType stream = StreamType::kCompute;
        if (group == "mp" && mp.value() == "comm") stream = StreamType::kMpComm;
        if (group == "dp" && dp.value() == "comm") stream = StreamType::kDpComm;
        const std::string name = stream == StreamType::kCompute ? "" : StreamTypeName(stream);
        if (op.stream == name) continue;
        op.stream = name;
        changed = true;
        context.AddStatistic(StrCat(group, "-collectives-on-", StreamTypeName(stream)));
      }
    return changed;
  }

 private:
  Option<std::string> mp{this,
                         "mp",
                         "stream of mp collectives: comm (mp_comm) or compute",
                         "comm",
                         {"comm", "compute"}};
  Option<std::string> dp{this,
                         "dp",
                         "stream of dp collectives: comm (dp_comm) or compute",
                         "comm",
                         {"comm", "compute"}};
};

}  // namespace

PW_REGISTER_PASS(AssignStreamsPass)

}  // namespace pw
