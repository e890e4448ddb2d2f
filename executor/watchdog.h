#pragma once
// Keeps one rank from waiting forever on a rank that is gone. A thread polls the run's
// store for the abort notice (written by the launcher when a rank process dies, or by a
// rank that failed) and, with heartbeats on, publishes this rank's heartbeat and watches
// its peers' (the multi-machine case, where no launcher watches). On either, `on_abort`
// runs once on the watchdog thread; a rank process prints the reason and exits, even if
// its streams are blocked in communication.
//
// Slow is told from gone. The watchdog should have a store of its own (for Redis, its own
// connection: not queued behind rendezvous or data), so only the link itself can delay a
// heartbeat. A peer is declared
//   - dead at once when its process on this machine is gone (watch_local_pids), or when
//     its connection to the store has been closed for `gone_after` (a process that exits
//     or is killed closes its sockets; a stopped or merely slow one does not);
//   - unresponsive when its heartbeat has not changed for `dead_after` while this rank
//     itself was reaching the store: time during which this rank could not (its own link
//     congested, its thread starved) is not held against anyone. A rank never names itself.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "executor/comm/kv_store.h"

namespace pw {

struct WatchdogOptions {
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds poll{200};
  std::chrono::milliseconds heartbeat{1000};
  // A peer whose heartbeat has not changed for this long is dead; zero turns heartbeats off.
  std::chrono::milliseconds dead_after{std::chrono::seconds(20)};
  // This rank's own store round trips failing or stalling for this long make it blind:
  // peers' silence over such a gap does not count.
  std::chrono::milliseconds blind_after{std::chrono::seconds(5)};
  // A peer whose store connection (where the store can tell) is closed this long is gone.
  std::chrono::milliseconds gone_after{std::chrono::seconds(3)};
  // Also check, every poll, that peers on this machine (their "pid/RANK" entry is
  // "HOST PID") still have a process: a killed rank is named at once.
  bool watch_local_pids = false;
  std::function<void(const std::string& reason)> on_abort;
};

class Watchdog {
 public:
  // `store` must outlive the watchdog.
  Watchdog(KvStore& store, WatchdogOptions options);
  ~Watchdog();

  // This rank finished normally: peers stop expecting heartbeats from it.
  void Finish();
  // This rank gives up: publishes the abort notice unless one exists and returns the notice
  // in force; the watchdog then leaves it to the caller to report (no on_abort for it).
  std::string Abort(const std::string& reason);

  static StatusOr<std::optional<std::string>> AbortNotice(KvStore& store);
  static std::string HostName();
  static Status PublishAbort(KvStore& store, const std::string& reason);
  // The label of rank `rank`'s watchdog connection (KvStore::NameConnection).
  static std::string ConnectionName(int rank);

 private:
  void Loop();
  // Whether this rank could see: false when its own store calls failed.
  bool CheckHeartbeats();
  bool CheckConnections();
  void CheckLocalPids();
  bool Done(int peer);
  // Notes a store call's outcome; after a gap of blind_after without one that succeeded,
  // restarts the peers' clocks. Returns `ok`.
  bool Saw(bool ok);
  void Fire(const std::string& reason);
  // Publishes `reason` unless a notice exists; the notice in force.
  std::string NoticeAfter(const std::string& reason);

  KvStore& store_;
  WatchdogOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> aborted_{false};
  struct Peer {
    std::string last;
    std::chrono::steady_clock::time_point changed;
    bool seen = false;
    int pid = 0;  // > 0: on this machine; -1: elsewhere
    // Since when its store connection has been missing (where the store can tell).
    std::optional<std::chrono::steady_clock::time_point> missing_since;
  };
  std::vector<Peer> peers_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_seeing_;  // the last round this rank could see
  std::thread thread_;
};

}  // namespace pw
