#include "tools/transfer_cpu.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "cost_model/wake_latency.h"
#include "executor/comm/kv_store.h"
#include "executor/comm/tcp_link.h"
#include "executor/cpu/cpu_event.h"
#include "ir/thread_cpu_clock.h"

namespace pw::tools {
namespace {

using Clock = std::chrono::steady_clock;

// ~160 us here (~4 ns an iteration): about what an op of the small GPT takes.
constexpr int kUnitIterations = 40000;
// The first busy thread records an event every this many units (~300 us between
// transfers, as a pipeline stage's forwards send theirs).
constexpr int kUnitsPerTransfer = 2;

// A round counts where the rates of the quiet phases around it differ by at most this (on an
// otherwise idle 2-core VM: within 3 %), and the busy threads had this share of their cores.
constexpr double kMaxDrift = 0.04;
constexpr double kMinShare = 0.95;
constexpr int kMinRounds = 3;

struct Phase {
  double seconds = 0;
  long units = 0;
  int transfers = 0;
  double cpu = 0;  // the busy threads' CPU seconds
  // Their CPU over their wall time: below 1 where other work took their cores.
  double share(size_t threads) const { return cpu / (seconds * static_cast<double>(threads)); }
};

class Probe {
 public:
  Probe(std::vector<int> cpus, std::unique_ptr<TcpLink> tx, std::unique_ptr<TcpLink> rx, int bytes)
      : cpus_(std::move(cpus)), tx_(std::move(tx)), rx_(std::move(rx)), out_(bytes), in_(bytes) {}

  // Busy threads for `seconds`, with transfers or without.
  StatusOr<Phase> Run(double seconds, bool transfers) {
    const int most = transfers ? static_cast<int>(seconds / 100e-6) + 1 : 0;
    std::deque<cpu::CpuEvent> to_send(most + 1), received(most + 1);
    std::atomic<bool> stop{false};
    std::atomic<int> recorded{0};
    std::vector<long> units(cpus_.size(), 0);
    std::vector<double> cpu(cpus_.size(), 0);
    Status send_status, recv_status;
    int sent = 0;
    std::atomic<int> final_tag{-1};
    std::thread sender, receiver;
    if (transfers) {
      // Stream-like threads: unpinned, the scheduler puts them where it wakes them.
      sender = std::thread([&] {
        auto send = [&](int tag) {
          StatusOr<bool> all_out = tx_->Send(tag, out_.data(), out_.size());
          if (!all_out.ok()) return all_out.status();
          return *all_out ? OkStatus() : tx_->Flush();
        };
        for (; sent < most && send_status.ok(); ++sent) {
          to_send[sent].Wait(cpu::SpinPolicy::kBlockAtOnce);
          if (stop.load(std::memory_order_acquire) && sent >= recorded.load()) break;
          send_status = send(sent);
        }
        // The last message tells the receiver to stop.
        final_tag.store(sent, std::memory_order_release);
        if (send_status.ok()) send_status = send(sent);
      });
      receiver = std::thread([&] {
        for (int tag = 0;; ++tag) {
          recv_status = rx_->Recv(tag, in_.data(), in_.size());
          if (!recv_status.ok() || tag == final_tag.load(std::memory_order_acquire)) break;
          received[tag].Record();
        }
      });
    }
    std::vector<std::thread> busy;
    const Clock::time_point begin = Clock::now();
    const Clock::time_point until =
        begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    for (size_t w = 0; w < cpus_.size(); ++w)
      busy.emplace_back([&, w] {
        if (cpus_[w] >= 0) cost::PinThisThread(cpus_[w]);  // -1: affinity unknown
        const double cpu_begin = ThreadCpuSeconds();
        long n = 0;
        while (Clock::now() < until) {
          cost::BurnCpu(kUnitIterations);
          ++n;
          if (w == 0 && transfers && n % kUnitsPerTransfer == 0) {
            const int k = recorded.load(std::memory_order_relaxed);
            if (k < most) {
              recorded.store(k + 1, std::memory_order_release);
              to_send[k].Record();
            }
          }
        }
        units[w] = n;
        cpu[w] = ThreadCpuSeconds() - cpu_begin;
      });
    for (std::thread& t : busy) t.join();
    Phase phase;
    phase.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    for (long n : units) phase.units += n;
    for (double c : cpu) phase.cpu += c;
    if (transfers) {
      // The sender stops after the last recorded event; the receiver after its message.
      stop.store(true, std::memory_order_release);
      const int last = recorded.load();
      if (last < most) to_send[last].Record();  // wakes a sender waiting past the last
      sender.join();
      receiver.join();
      PW_RETURN_IF_ERROR(send_status);
      PW_RETURN_IF_ERROR(recv_status);
      phase.transfers = last;
    }
    return phase;
  }

 private:
  std::vector<int> cpus_;
  std::unique_ptr<TcpLink> tx_, rx_;
  std::vector<char> out_, in_;
};

StatusOr<std::unique_ptr<Probe>> OpenProbe(const std::vector<int>& cpus, int bytes,
                                           const std::string& dir) {
  PW_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> send_store, OpenStore(dir));
  PW_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> recv_store, OpenStore(dir));
  TcpLinkOptions options;
  options.timeout = std::chrono::seconds(30);
  StatusOr<std::unique_ptr<TcpLink>> rx = Unavailable("the receiving end did not join");
  std::thread join_rx(
      [&] { rx = TcpLink::Join(*recv_store, "transfer-cpu", /*sender=*/false, options); });
  StatusOr<std::unique_ptr<TcpLink>> tx =
      TcpLink::Join(*send_store, "transfer-cpu", /*sender=*/true, options);
  join_rx.join();
  PW_RETURN_IF_ERROR(tx.status());
  PW_RETURN_IF_ERROR(rx.status());
  return std::make_unique<Probe>(cpus, std::move(*tx), std::move(*rx), bytes);
}

}  // namespace

StatusOr<TransferCpu> MeasureTransferCpu(int cores, int bytes, int rounds, double phase_seconds) {
  if (cores < 1 || bytes < 1 || rounds < 1 || !(phase_seconds > 0))
    return InvalidArgument("a transfer CPU probe needs cores, bytes, rounds and a phase > 0");
  std::vector<int> cpus = cost::AllowedCpus();
  if (cpus.empty()) cpus.push_back(-1);
  if (static_cast<int>(cpus.size()) > cores) cpus.resize(cores);
  char pattern[] = "/tmp/pw-transfer-cpu-XXXXXX";
  if (!mkdtemp(pattern)) return Unavailable("cannot create a temporary directory for the probe");
  const std::string dir = pattern;
  StatusOr<std::unique_ptr<Probe>> probe = OpenProbe(cpus, bytes, dir);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  PW_RETURN_IF_ERROR(probe.status());

  // The machine's speed drifts over seconds: each phase with transfers is compared with the
  // mean rate of the phases just before and after it. A round counts where those two agree
  // and the busy threads had their cores; other work on the machine makes the difference
  // of rates meaningless (rounds of -250 to +300 us beside a second profile).
  std::vector<double> lost;
  TransferCpu out;
  PW_ASSIGN_OR_RETURN(Phase before, (*probe)->Run(phase_seconds, false));
  for (int attempt = 0; attempt < 2 * rounds && static_cast<int>(lost.size()) < rounds; ++attempt) {
    PW_ASSIGN_OR_RETURN(Phase with, (*probe)->Run(phase_seconds, true));
    PW_ASSIGN_OR_RETURN(Phase after, (*probe)->Run(phase_seconds, false));
    const double before_rate = before.units / before.seconds;
    const double after_rate = after.units / after.seconds;
    const double drift = std::abs(after_rate / before_rate - 1);
    out.worst_drift = std::max(out.worst_drift, drift);
    out.lowest_share =
        std::min({out.lowest_share, before.share(cpus.size()), after.share(cpus.size())});
    const bool steady = drift <= kMaxDrift && before.share(cpus.size()) >= kMinShare &&
                        after.share(cpus.size()) >= kMinShare;
    if (steady && with.transfers > 0) {
      const double quiet_rate = (before.units + after.units) / (before.seconds + after.seconds);
      // Core-seconds a unit takes when the busy threads have the cores.
      const double unit = static_cast<double>(cpus.size()) / quiet_rate;
      const double missing = quiet_rate * with.seconds - static_cast<double>(with.units);
      lost.push_back(missing * unit / with.transfers);
      out.transfers += with.transfers;
    }
    before = after;
  }
  if (static_cast<int>(lost.size()) < kMinRounds) return out;  // not measured: rounds 0
  out.rounds = static_cast<int>(lost.size());
  std::sort(lost.begin(), lost.end());
  out.seconds = std::max(0.0, lost[lost.size() / 2]);
  out.low = lost.front();
  out.high = lost.back();
  return out;
}

}  // namespace pw::tools
