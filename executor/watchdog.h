#pragma once
// Keeps one rank from waiting forever on a rank that is gone. A thread polls the run's
// store for the abort notice (written by the launcher when a rank process dies, or by a
// rank that failed) and, with heartbeats on, publishes this rank's heartbeat and declares a
// peer dead when its heartbeat stops (the multi-machine case, where no launcher watches).
// On either, `on_abort` runs once on the watchdog thread; a rank process prints the
// reason and exits, even if its streams are blocked in communication.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "executor/comm/kv_store.h"

namespace pw {

struct WatchdogOptions {
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds poll{200};
  std::chrono::milliseconds heartbeat{1000};
  // A peer whose heartbeat has not changed for this long is dead; zero turns heartbeats off.
  std::chrono::milliseconds dead_after{std::chrono::seconds(20)};
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
  // Publishes the abort notice unless one exists; returns the notice in force.
  std::string Abort(const std::string& reason);

  static StatusOr<std::optional<std::string>> AbortNotice(KvStore& store);
  static std::string HostName();
  static Status PublishAbort(KvStore& store, const std::string& reason);

 private:
  void Loop();
  void CheckHeartbeats(std::chrono::steady_clock::time_point now);
  void CheckLocalPids();
  void Fire(const std::string& reason);

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
  };
  std::vector<Peer> peers_;
  std::chrono::steady_clock::time_point started_;
  std::thread thread_;
};

}  // namespace pw
