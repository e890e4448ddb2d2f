#include "executor/watchdog.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace pw {
namespace {
constexpr const char* kAbortKey = "abort";
std::string HeartbeatKey(int rank) { return StrCat("heartbeat/", rank); }
std::string DoneKey(int rank) { return StrCat("done/", rank); }
// A peer never heard from is given this long to start (rendezvous fails sooner anyway).
constexpr std::chrono::seconds kStartupGrace{120};
}  // namespace

Watchdog::Watchdog(KvStore& store, WatchdogOptions options)
    : store_(store), options_(std::move(options)) {
  peers_.resize(options_.world_size);
  started_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { Loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::Finish() {
  (void)store_.Set(DoneKey(options_.rank), "1");
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_all();
}

StatusOr<std::optional<std::string>> Watchdog::AbortNotice(KvStore& store) {
  return store.TryGet(kAbortKey);
}

Status Watchdog::PublishAbort(KvStore& store, const std::string& reason) {
  // The first notice stands, so that every rank prints the same one.
  return store.SetIfAbsent(kAbortKey, reason).status();
}

std::string Watchdog::NoticeAfter(const std::string& reason) {
  (void)PublishAbort(store_, reason);
  auto notice = AbortNotice(store_);
  return notice.ok() && *notice ? **notice : reason;
}

std::string Watchdog::Abort(const std::string& reason) {
  aborted_ = true;  // the caller reports it: the loop must not act on the notice too
  return NoticeAfter(reason);
}

namespace {
// A zombie (killed, not yet reaped by its parent) counts as dead.
bool Alive(int pid) {
  if (kill(pid, 0) != 0) return errno != ESRCH;
  std::ifstream stat(StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}
}  // namespace

std::string Watchdog::HostName() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

void Watchdog::Fire(const std::string& reason) {
  std::string notice = NoticeAfter(reason);
  if (!aborted_.exchange(true) && options_.on_abort) options_.on_abort(notice);
}

void Watchdog::CheckLocalPids() {
  static const std::string host = HostName();
  for (int p = 0; p < options_.world_size; ++p) {
    Peer& peer = peers_[p];
    if (p == options_.rank || peer.pid < 0) continue;
    if (peer.pid == 0) {
      auto value = store_.TryGet(StrCat("pid/", p));
      if (!value.ok() || !*value) continue;
      size_t space = (*value)->rfind(' ');
      bool local = space != std::string::npos && (*value)->substr(0, space) == host;
      peer.pid = local ? static_cast<int>(std::stol((*value)->substr(space + 1))) : -1;
      if (peer.pid <= 0) continue;
    }
    if (Alive(peer.pid)) continue;
    auto done = store_.TryGet(DoneKey(p));
    if (done.ok() && *done) {
      peer.pid = -1;  // finished normally
      continue;
    }
    Fire(StrCat("rank ", p, " died (process ", peer.pid, " is gone)"));
    return;
  }
}

bool Watchdog::Done(int peer) {
  auto done = store_.TryGet(DoneKey(peer));
  return done.ok() && *done;
}

bool Watchdog::CheckHeartbeats() {
  for (int p = 0; p < options_.world_size; ++p) {
    if (p == options_.rank) continue;
    auto done = store_.TryGet(DoneKey(p));
    if (!Saw(done.ok())) return false;
    if (*done) continue;
    auto beat = store_.TryGet(HeartbeatKey(p));
    if (!Saw(beat.ok())) return false;
    const auto now = std::chrono::steady_clock::now();  // the read may have waited
    Peer& peer = peers_[p];
    if (*beat && (!peer.seen || **beat != peer.last)) {
      peer.last = **beat;
      peer.seen = true;
      peer.changed = now;
      continue;
    }
    bool silent =
        peer.seen ? now - peer.changed > options_.dead_after : now - started_ > kStartupGrace;
    if (!silent) continue;
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
        peer.seen ? options_.dead_after : std::chrono::milliseconds(kStartupGrace));
    Fire(peer.seen ? StrCat("rank ", p, " stopped responding (no heartbeat for ", seconds.count(),
                            " s, noticed by rank ", options_.rank, ")")
                   : StrCat("rank ", p, " never started (no heartbeat for ", seconds.count(),
                            " s, noticed by rank ", options_.rank, ")"));
    return true;
  }
  return true;
}

bool Watchdog::CheckConnections() {
  auto names = store_.ConnectedNames();
  if (!Saw(names.ok())) return false;
  if (!*names) return true;  // the store cannot tell
  const auto now = std::chrono::steady_clock::now();
  for (int p = 0; p < options_.world_size; ++p) {
    Peer& peer = peers_[p];
    // Only a peer whose heartbeat was seen has named its connection.
    if (p == options_.rank || !peer.seen) continue;
    if ((*names)->count(ConnectionName(p))) {
      peer.missing_since.reset();
      continue;
    }
    if (!peer.missing_since) peer.missing_since = now;
    if (now - *peer.missing_since < options_.gone_after || Done(p)) continue;
    Fire(StrCat("rank ", p, " died (its connection to the store closed, noticed by rank ",
                options_.rank, ")"));
    return true;
  }
  return true;
}

bool Watchdog::Saw(bool ok) {
  if (!ok) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_seeing_ > options_.blind_after) {
    // This rank could not reach the store for a while (its own link, a starved thread):
    // restart every peer's clock rather than blame a peer for this rank's own gap.
    for (Peer& peer : peers_) {
      if (peer.seen) peer.changed = now;
      peer.missing_since.reset();
    }
  }
  last_seeing_ = now;
  return true;
}

std::string Watchdog::ConnectionName(int rank) { return StrCat("watchdog/", rank); }

void Watchdog::Loop() {
  uint64_t beats = 0;
  auto next_beat = std::chrono::steady_clock::now();
  last_seeing_ = next_beat;
  if (options_.dead_after.count() > 0) (void)store_.NameConnection(ConnectionName(options_.rank));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    auto notice = AbortNotice(store_);
    if (notice.ok() && *notice) {
      if (!aborted_.exchange(true) && options_.on_abort) options_.on_abort(**notice);
      lock.lock();
      break;
    }
    Saw(notice.ok());
    if (options_.watch_local_pids) CheckLocalPids();
    if (options_.dead_after.count() > 0 && std::chrono::steady_clock::now() >= next_beat) {
      (void)(Saw(store_.Set(HeartbeatKey(options_.rank), std::to_string(++beats)).ok()) &&
             CheckHeartbeats() && CheckConnections());
      next_beat = std::chrono::steady_clock::now() + options_.heartbeat;
    }
    lock.lock();
    cv_.wait_for(lock, options_.poll, [this] { return stop_; });
  }
}

}  // namespace pw
