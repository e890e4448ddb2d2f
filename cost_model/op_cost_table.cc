#include "cost_model/op_cost_table.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "cost_model/comm_model.h"
#include "cost_model/device_spec.h"
#include "cost_model/proto_file.h"

namespace pw::cost {
namespace {

bool Valid(double v) { return std::isfinite(v) && v >= 0; }

Status CheckEntry(const OpCostEntry& e, int index) {
  if (e.key().empty()) return InvalidArgument("cost table entry ", index, " has no key");
  if (e.op_type().empty())
    return InvalidArgument("cost table entry '", e.key(), "' has no op_type");
  if (!Valid(e.median()) || !Valid(e.spread()) || !Valid(e.min()) || !Valid(e.max()) ||
      !Valid(e.mean()) || !Valid(e.cpu()) || !Valid(e.stale_bytes()))
    return InvalidArgument("cost table entry '", e.key(),
                           "': costs must be finite and >= 0 (median ", e.median(), ", spread ",
                           e.spread(), ")");
  if (e.median() == 0)
    return InvalidArgument("cost table entry '", e.key(), "' has no measurement (no median)");
  if (e.repeats() <= 0)
    return InvalidArgument("cost table entry '", e.key(), "' has no measurement (repeats ",
                           e.repeats(), ")");
  if (!Valid(e.flops()) || !Valid(e.bytes()))
    return InvalidArgument("cost table entry '", e.key(), "': flops and bytes must be >= 0");
  return OkStatus();
}

Status CheckComm(const CommFit& f) {
  if (f.kind() != "all_reduce" && f.kind() != "send_recv" && f.kind() != "all_gather" &&
      f.kind() != "reduce_scatter")
    return InvalidArgument("comm fit has unknown kind '", f.kind(),
                           "' (all_reduce, send_recv, all_gather, reduce_scatter)");
  if (f.busy_cores() < 0)
    return InvalidArgument("comm fit ", f.kind(), ": busy_cores must be >= 0");
  if (f.group_size() < 2)
    return InvalidArgument("comm fit ", f.kind(), ": group_size must be >= 2, got ",
                           f.group_size());
  if (!Valid(f.alpha()) || !Valid(f.beta()) || !Valid(f.residual()) || !Valid(f.compute_gap()) ||
      !Valid(f.cpu_per_op()) || !Valid(f.straggle()) || !Valid(f.comm_stream_straggle()))
    return InvalidArgument("comm fit ", f.kind(), " over ", f.group_size(),
                           " ranks: alpha, beta, residual, compute_gap, cpu_per_op, straggle and "
                           "comm_stream_straggle must be finite and >= 0");
  for (const auto& s : f.samples())
    if (!Valid(s.bytes()) || !Valid(s.median()) || !Valid(s.spread()) || !Valid(s.mean()))
      return InvalidArgument("comm fit ", f.kind(), " over ", f.group_size(),
                             " ranks: a sample has a negative or non-finite value");
  return OkStatus();
}

OpCostEntry MergeEntries(const OpCostEntry& a, const OpCostEntry& b) {
  OpCostEntry out = a;
  double wa = a.repeats(), wb = b.repeats();
  double w = wa + wb;
  out.set_median((a.median() * wa + b.median() * wb) / w);
  out.set_spread((a.spread() * wa + b.spread() * wb) / w);
  if (a.mean() > 0 && b.mean() > 0) out.set_mean((a.mean() * wa + b.mean() * wb) / w);
  out.set_cpu(a.cpu() > 0 && b.cpu() > 0 ? (a.cpu() * wa + b.cpu() * wb) / w : 0);
  out.set_min(std::min(a.min(), b.min()));
  out.set_max(std::max(a.max(), b.max()));
  out.set_repeats(a.repeats() + b.repeats());
  if (a.has_stale_bytes() && b.has_stale_bytes())
    out.set_stale_bytes((a.stale_bytes() * wa + b.stale_bytes() * wb) / w);
  else if (b.has_stale_bytes())
    out.set_stale_bytes(b.stale_bytes());
  return out;
}

CommFit MergeFits(const CommFit& a, const CommFit& b) {
  std::map<double, ::pipeweave::proto::CommSample> by_size;
  for (const auto& s : a.samples()) by_size[s.bytes()] = s;
  for (const auto& s : b.samples()) {
    auto [it, inserted] = by_size.try_emplace(s.bytes(), s);
    if (!inserted) {
      it->second.set_median((it->second.median() + s.median()) / 2);
      it->second.set_mean((it->second.mean() + s.mean()) / 2);
      it->second.set_spread(std::max(it->second.spread(), s.spread()));
    }
  }
  std::vector<CommSampleValue> samples;
  for (const auto& [bytes, s] : by_size)
    samples.push_back({s.bytes(), s.median(), s.spread(), s.mean()});
  CommFit out = FitCommSamples(a.kind(), a.group_size(), samples, a.busy_cores());
  out.set_ranks(std::max(a.ranks(), b.ranks()));
  out.set_compute_gap((a.compute_gap() + b.compute_gap()) / 2);
  out.set_cpu_per_op((a.cpu_per_op() + b.cpu_per_op()) / 2);
  // Each straggle over the tables that measured it.
  auto merge = [](bool has_a, double va, bool has_b, double vb, auto set) {
    if (has_a || has_b) set(has_a && has_b ? (va + vb) / 2 : has_a ? va : vb);
  };
  merge(a.has_straggle(), a.straggle(), b.has_straggle(), b.straggle(),
        [&](double v) { out.set_straggle(v); });
  merge(a.has_comm_stream_straggle(), a.comm_stream_straggle(), b.has_comm_stream_straggle(),
        b.comm_stream_straggle(), [&](double v) { out.set_comm_stream_straggle(v); });
  return out;
}

}  // namespace

StatusOr<OpCostTable> OpCostTable::FromProto(Proto proto) {
  for (int i = 0; i < proto.entries_size(); ++i)
    PW_RETURN_IF_ERROR(CheckEntry(proto.entries(i), i));
  for (const CommFit& f : proto.comm()) PW_RETURN_IF_ERROR(CheckComm(f));
  if (proto.stale_capacity() < 0 || (proto.has_stale_price() && !Valid(proto.stale_price())))
    return InvalidArgument("the cost table's stale_capacity and stale_price must be ",
                           "finite and >= 0");
  if (proto.has_device_spec()) {
    Status s = ValidateDeviceSpec(proto.device_spec());
    if (!s.ok()) return s.WithContext("the cost table's device_spec");
  }
  OpCostTable table;
  table.proto_ = std::move(proto);
  table.Reindex();
  return table;
}

StatusOr<OpCostTable> OpCostTable::Load(const std::string& path) {
  Proto proto;
  PW_RETURN_IF_ERROR(LoadProtoFile(path, "cost table", &proto));
  // An empty file parses as an empty table; prices from it would all be guesses.
  if (proto.ByteSizeLong() == 0)
    return InvalidArgument(path, ": the cost table is empty (write one with pipeweave profile)");
  StatusOr<OpCostTable> table = FromProto(std::move(proto));
  if (!table.ok()) return table.status().WithContext(path);
  return table;
}

Status OpCostTable::Save(const std::string& path) const { return SaveProtoFile(proto_, path); }

void OpCostTable::Reindex() {
  index_.clear();
  scheduled_.clear();
  for (int i = 0; i < proto_.entries_size(); ++i) {
    const OpCostEntry& e = proto_.entries(i);
    if (e.schedule().empty())
      index_[e.key()] = i;
    else
      scheduled_[{e.schedule(), e.key()}] = i;
  }
}

const OpCostEntry* OpCostTable::Find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &proto_.entries(it->second);
}

const OpCostEntry* OpCostTable::FindOwn(const std::string& key, const std::string& schedule) const {
  auto it = scheduled_.find({schedule, key});
  return it == scheduled_.end() ? nullptr : &proto_.entries(it->second);
}

OpCostTable OpCostTable::ForSchedule(const std::string& schedule) const {
  OpCostTable view;
  view.proto_ = proto_;
  view.proto_.clear_entries();
  for (const OpCostEntry& e : proto_.entries()) {
    if (!e.schedule().empty()) continue;
    const OpCostEntry* own = FindOwn(e.key(), schedule);
    OpCostEntry& added = *view.proto_.add_entries();
    added = own ? *own : e;
    added.clear_schedule();
  }
  view.Reindex();
  return view;
}

std::string OpCostTable::InRunSchedulesText() const {
  std::string out;
  for (const std::string& s : proto_.in_run_schedules()) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool OpCostTable::ProfiledInRunOf(const std::string& schedule) const {
  const auto& runs = proto_.in_run_schedules();
  return std::find(runs.begin(), runs.end(), schedule) != runs.end();
}

std::vector<const OpCostEntry*> OpCostTable::EntriesOf(const std::string& op_type) const {
  std::vector<const OpCostEntry*> out;
  for (const OpCostEntry& e : proto_.entries())
    if (e.op_type() == op_type && e.schedule().empty()) out.push_back(&e);
  return out;
}

const CommFit* OpCostTable::FindComm(const std::string& kind, int group_size,
                                     int busy_cores) const {
  for (const CommFit& f : proto_.comm())
    if (f.kind() == kind && f.group_size() == group_size && f.busy_cores() == busy_cores) return &f;
  return nullptr;
}

std::vector<const CommFit*> OpCostTable::CommFitsOf(const std::string& kind) const {
  std::vector<const CommFit*> out;
  for (const CommFit& f : proto_.comm())
    if (f.kind() == kind) out.push_back(&f);
  return out;
}

void OpCostTable::Add(const OpCostEntry& entry) {
  const int at = proto_.entries_size();
  int held = at;
  if (entry.schedule().empty())
    held = index_.try_emplace(entry.key(), at).first->second;
  else
    held = scheduled_.try_emplace({entry.schedule(), entry.key()}, at).first->second;
  if (held != at) {
    *proto_.mutable_entries(held) = entry;
    return;
  }
  *proto_.add_entries() = entry;
}

void OpCostTable::AddComm(const CommFit& fit) {
  for (CommFit& f : *proto_.mutable_comm()) {
    if (f.kind() == fit.kind() && f.group_size() == fit.group_size() &&
        f.busy_cores() == fit.busy_cores()) {
      f = fit;
      return;
    }
  }
  *proto_.add_comm() = fit;
}

void OpCostTable::MergeComm(const CommFit& fit) {
  const CommFit* mine = FindComm(fit.kind(), fit.group_size(), fit.busy_cores());
  AddComm(mine ? MergeFits(*mine, fit) : fit);
}

Status OpCostTable::Merge(const OpCostTable& other) {
  if (!device().empty() && !other.device().empty() && device() != other.device())
    return InvalidArgument("cannot merge a cost table of device '", other.device(),
                           "' into one of device '", device(), "'");
  if (proto_.blas_threads() && other.proto_.blas_threads() &&
      proto_.blas_threads() != other.proto_.blas_threads())
    return InvalidArgument("cannot merge cost tables measured with ", other.proto_.blas_threads(),
                           " and ", proto_.blas_threads(), " BLAS threads");
  const auto& mine = proto_.in_run_schedules();
  const auto& theirs = other.proto_.in_run_schedules();
  if (!mine.empty() && !theirs.empty() &&
      std::set<std::string>(mine.begin(), mine.end()) !=
          std::set<std::string>(theirs.begin(), theirs.end()))
    return InvalidArgument("cannot merge op costs measured in runs of ", other.InRunSchedulesText(),
                           " plans into a table of ", InRunSchedulesText(),
                           " plans: profile the plans together (pipeweave profile A.pb B.pb "
                           "--in-run), which keeps each schedule's costs apart");
  // Reads beyond different caches are different counts: the price of one does not merge
  // with the other's (different machines, which the device check above mostly catches).
  if (proto_.stale_capacity() && other.proto_.stale_capacity() &&
      proto_.stale_capacity() != other.proto_.stale_capacity())
    return InvalidArgument("cannot merge cost tables that counted reads beyond caches of ",
                           other.proto_.stale_capacity() >> 10, " and ",
                           proto_.stale_capacity() >> 10, " KiB");
  if (mine.empty()) *proto_.mutable_in_run_schedules() = theirs;
  if (device().empty()) set_device(other.device());
  if (!proto_.blas_threads()) proto_.set_blas_threads(other.proto_.blas_threads());
  if (!proto_.stale_capacity()) proto_.set_stale_capacity(other.proto_.stale_capacity());
  if (proto_.has_stale_price() && other.proto_.has_stale_price())
    proto_.set_stale_price((proto_.stale_price() + other.proto_.stale_price()) / 2);
  else if (other.proto_.has_stale_price())
    proto_.set_stale_price(other.proto_.stale_price());
  if (!proto_.has_device_spec() && other.proto_.has_device_spec())
    *proto_.mutable_device_spec() = other.proto_.device_spec();
  for (const OpCostEntry& e : other.proto_.entries()) {
    const OpCostEntry* held = e.schedule().empty() ? Find(e.key()) : FindOwn(e.key(), e.schedule());
    Add(held ? MergeEntries(*held, e) : e);
  }
  for (const CommFit& f : other.proto_.comm()) MergeComm(f);
  return OkStatus();
}

}  // namespace pw::cost
