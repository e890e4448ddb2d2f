#pragma once
// The empirical cost table: measured op signatures (median, spread, repeats) and
// communication fits, for one device. Read and written as text or binary protobuf; tables
// from several runs merge (weighted by their repeats).

#include <map>
#include <string>
#include <vector>

#include "ir/status.h"
#include "proto/cost_model.pb.h"

namespace pw::cost {

using OpCostEntry = ::pipeweave::proto::OpCostEntry;
using CommFit = ::pipeweave::proto::CommFit;

class OpCostTable {
 public:
  using Proto = ::pipeweave::proto::OpCostTable;

  OpCostTable() = default;
  // Rejects negative, non-finite or missing costs and entries without a key, naming them.
  static StatusOr<OpCostTable> FromProto(Proto proto);
  static StatusOr<OpCostTable> Load(const std::string& path);
  Status Save(const std::string& path) const;

  const Proto& proto() const { return proto_; }
  const std::string& device() const { return proto_.device(); }
  void set_device(const std::string& device) { proto_.set_device(device); }
  Proto& mutable_proto() { return proto_; }  // call Reindex() after changing entries

  // The entry every plan is priced with (not one of a schedule's own).
  const OpCostEntry* Find(const std::string& key) const;
  // The entry measured in runs of `schedule`'s plans (not the default one), if any.
  const OpCostEntry* FindOwn(const std::string& key, const std::string& schedule) const;
  // The table a plan of `schedule` is priced with: the entries measured in runs of that
  // schedule in place of the default ones, the other schedules' entries left out.
  OpCostTable ForSchedule(const std::string& schedule) const;
  // Whether runs of plans of `schedule` measured the in-run entries (profile --in-run).
  bool ProfiledInRunOf(const std::string& schedule) const;
  std::string InRunSchedulesText() const;  // "1f1b, fthenb"
  // Every default entry of an op type, in table order.
  std::vector<const OpCostEntry*> EntriesOf(const std::string& op_type) const;
  const CommFit* FindComm(const std::string& kind, int group_size, int busy_cores = 0) const;
  std::vector<const CommFit*> CommFitsOf(const std::string& kind) const;
  size_t size() const { return static_cast<size_t>(proto_.entries_size()); }

  // Adds or replaces the entry with the same key and schedule.
  void Add(const OpCostEntry& entry);
  // Replaces the fit of the same kind, group size and busy cores.
  void AddComm(const CommFit& fit);
  // Adds `fit`, merged with the fit already held for its kind, group size and load (their
  // samples pooled, their figures averaged): measurements of several runs priced together.
  void MergeComm(const CommFit& fit);

  // Folds `other` in: an entry both have becomes their repeat-weighted mean (min of mins,
  // max of maxes); comm fits are refit over the union of their samples. Tables of
  // different devices, or measured in runs of different schedules, do not merge.
  Status Merge(const OpCostTable& other);

  void Reindex();

 private:
  Proto proto_;
  std::map<std::string, int> index_;  // key -> position of the default entry
  std::map<std::pair<std::string, std::string>, int> scheduled_;  // (schedule, key) -> position
};

}  // namespace pw::cost
