#include "ir/stream_order.h"

#include <algorithm>

namespace pw {
namespace {

// Who touched a slot since it was last written.
struct Access {
  int writer = -1;
  std::array<int, kNumStreamTypes> readers;  // last reader per stream, -1: none
  Access() { readers.fill(-1); }
};

// The slots' access history over a walk: which earlier items an item depends on.
class Accesses {
 public:
  explicit Accesses(const RankSequence& seq) : seq_(seq), slots_(seq.slots.size()) {}

  // Calls fn(Dependency) for every earlier item on another stream that `item` must follow:
  // the last writer of what it reads, and the last writer and readers of what it writes.
  template <typename Fn>
  Status ForEachDependency(int item, Fn fn) const {
    const WorkItem& in = seq_.items[item];
    auto need = [&](int producer, int slot) -> Status {
      if (producer < 0 || seq_.items[producer].stream == in.stream) return OkStatus();
      return fn(Dependency{producer, item, slot});
    };
    for (int slot : in.reads) PW_RETURN_IF_ERROR(need(slots_[slot].writer, slot));
    for (int written : in.writes)
      for (int slot : {written, ParamUnder(written)}) {
        if (slot < 0) continue;
        const Access& a = slots_[slot];
        PW_RETURN_IF_ERROR(need(a.writer, slot));
        for (int r : a.readers) PW_RETURN_IF_ERROR(need(r, slot));
      }
    return OkStatus();
  }

  void Update(int item) {
    const WorkItem& in = seq_.items[item];
    for (int slot : in.reads) slots_[slot].readers[StreamIndex(in.stream)] = item;
    for (int written : in.writes)
      for (int slot : {written, ParamUnder(written)}) {
        if (slot < 0) continue;
        Access& a = slots_[slot];
        a.writer = item;
        a.readers.fill(-1);
      }
  }

 private:
  // A write through a view of a parameter (the distributed optimizer's update of its own
  // rows, in place) writes the parameter: ordered after its readers on other streams.
  int ParamUnder(int slot) const {
    const int source = seq_.slots[slot].view_of;
    return source >= 0 && seq_.slots[source].persistable ? source : -1;
  }

  const RankSequence& seq_;
  std::vector<Access> slots_;
};

}  // namespace

Status StreamOrder::Walk(const StreamOrderHooks& hooks) {
  const int n = static_cast<int>(seq_.items.size());
  after_.assign(n, StreamClock{});
  pred_.assign(n, StreamClock{});
  std::array<StreamClock, kNumStreamTypes> stream_clock{};
  std::array<int32_t, kNumStreamTypes> count{};
  Accesses accesses(seq_);
  std::vector<int> recorders;
  for (int i = 0; i < n; ++i) {
    const WorkItem& item = seq_.items[i];
    const int s = StreamIndex(item.stream);
    pred_[i] = stream_clock[s];
    StreamClock clock = stream_clock[s];
    for (int e : item.wait_events) JoinClock(clock, after_[seq_.events[e].recorded_after]);
    if (hooks.extra_waits) {
      recorders.clear();
      hooks.extra_waits(i, recorders);
      for (int r : recorders) JoinClock(clock, after_[r]);
    }
    PW_RETURN_IF_ERROR(accesses.ForEachDependency(i, [&](const Dependency& dep) -> Status {
      if (Covers(clock, dep.producer)) return OkStatus();
      if (!hooks.cover) return OkStatus();
      PW_ASSIGN_OR_RETURN(int recorder, hooks.cover(dep));
      if (recorder >= 0) JoinClock(clock, after_[recorder]);
      return OkStatus();
    }));
    clock[s] = ++count[s];
    after_[i] = clock;
    stream_clock[s] = clock;
    accesses.Update(i);
  }
  return OkStatus();
}

std::vector<Dependency> CrossStreamDependencies(const RankSequence& seq) {
  std::vector<Dependency> out;
  Accesses accesses(seq);
  for (int i = 0; i < static_cast<int>(seq.items.size()); ++i) {
    (void)accesses.ForEachDependency(i, [&](const Dependency& dep) {
      out.push_back(dep);
      return OkStatus();
    });
    accesses.Update(i);
  }
  return out;
}

}  // namespace pw
