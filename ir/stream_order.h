#pragma once
// Which cross-stream dependencies of a rank's sequence (ir/rank_sequence.h) its stream
// order and events already imply. A stream runs its items in order; across streams only
// events order work. Walking the items in host order with vector clocks (per item and
// stream: how many of that stream's items are known done once it has run), every
// read-after-write, write-after-read and write-after-write between items of different
// streams is either implied, or handed to a `cover` callback that says how it will be
// ordered: the executor records an event of its own, the simulator adds an edge, the
// insert-events pass adds a wait to the plan.

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "ir/rank_sequence.h"

namespace pw {

using StreamClock = std::array<int32_t, kNumStreamTypes>;

inline void JoinClock(StreamClock& into, const StreamClock& other) {
  for (int s = 0; s < kNumStreamTypes; ++s) into[s] = std::max(into[s], other[s]);
}

struct Dependency {
  int producer = -1;  // item that touched the slot first
  int consumer = -1;  // item that must run after it
  int slot = -1;
};

struct StreamOrderHooks {
  // Items, earlier in host order, whose completion `item` also waits for beyond its own
  // events (the insert-events pass's waits while it decides them). May be empty.
  std::function<void(int item, std::vector<int>& recorders)> extra_waits;
  // An uncovered dependency: returns the item after which the consumer will wait (its
  // producer, or a later item of the producer's stream), or -1 to leave it unordered, or an
  // error that stops the walk.
  std::function<StatusOr<int>(const Dependency&)> cover;
};

class StreamOrder {
 public:
  explicit StreamOrder(const RankSequence& seq) : seq_(seq) {}

  // Walks every item once. Afterwards after(i) is what is known done once item i has run.
  Status Walk(const StreamOrderHooks& hooks);

  const StreamClock& after(int item) const { return after_[item]; }
  // Position of item on its stream, from 1.
  int32_t position(int item) const { return after_[item][StreamIndex(seq_.items[item].stream)]; }
  // Whether a clock covers `item` having run.
  bool Covers(const StreamClock& clock, int item) const {
    return clock[StreamIndex(seq_.items[item].stream)] >= position(item);
  }
  // The clock of `item`'s stream predecessor (zeros for the first item of a stream).
  const StreamClock& before_on_stream(int item) const { return pred_[item]; }

 private:
  const RankSequence& seq_;
  std::vector<StreamClock> after_;
  std::vector<StreamClock> pred_;
};

// Every cross-stream dependency of the sequence, implied or not, in walk order: the
// naive set of events (one per dependency).
std::vector<Dependency> CrossStreamDependencies(const RankSequence& seq);

}  // namespace pw
