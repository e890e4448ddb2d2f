// Gradient buckets (overlap-grad-reduce{bucket-mb}) on the transport the CPU executor uses:
// the parameter gradients of the medium GPT (8 layers, hidden 512, ffn 2048, vocab 1024:
// 101 tensors, 100.5 MiB of f32) all-reduced over 2 processes of this machine (TCP on loopback,
// member-order sums), each tensor alone against buckets of 1, 4 and 25 MiB, each bucket as
// c_allreduce_coalesced runs it: packed (copied into one buffer, one all-reduce, copied
// back) and in place (the bucket's sums end to end in one allocation, as the executor lays
// them out). Prints the median wall time of one step's reduction, the number of
// collectives, and the ratio to each-alone, all taken in one run.
//
//   grad_bucket_bench [STEPS (20)]

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "executor/comm/kv_store.h"
#include "executor/comm/tcp_ring.h"
#include "models/gpt.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kMiB = int64_t{1} << 20;

// Element counts of the model's parameters, last declared first (the backward finishes
// the last layers' gradients first).
std::vector<int64_t> GradientCounts() {
  pw::models::GptConfig c;
  c.layers = 8;
  c.hidden = 512;
  c.heads = 8;
  c.ffn = 2048;
  c.seq = 128;
  c.vocab = 1024;
  c.micro_batch_size = 4;
  auto module = pw::models::BuildGpt(c);
  std::vector<int64_t> counts;
  if (!module.ok()) return counts;
  for (const pw::Program& program : module->programs())
    for (const pw::Var& v : program.vars())
      if (v.is_parameter) counts.push_back(v.num_elements());
  std::reverse(counts.begin(), counts.end());
  return counts;
}

// The tensors grouped as the rank sequence groups them: a bucket closes once it holds
// `bytes` (0: every tensor alone) or the last tensor is in.
std::vector<std::vector<int>> Buckets(const std::vector<int64_t>& counts, int64_t bytes) {
  std::vector<std::vector<int>> buckets(1);
  int64_t fill = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    buckets.back().push_back(static_cast<int>(i));
    fill += counts[i] * static_cast<int64_t>(sizeof(float));
    if (fill >= bytes && i + 1 < counts.size()) buckets.emplace_back(), fill = 0;
  }
  return buckets;
}

int RunMember(int member, int size, const std::string& dir, int steps) {
  auto store = pw::OpenStore(dir);
  if (!store.ok()) return 1;
  auto ring = pw::TcpRing::Join(**store, "buckets", member, size, pw::TcpRingOptions{});
  if (!ring.ok()) {
    std::fprintf(stderr, "%s\n", ring.status().ToString().c_str());
    return 1;
  }
  const std::vector<int64_t> counts = GradientCounts();
  if (counts.empty()) return 1;
  std::vector<std::vector<float>> grads;
  for (int64_t n : counts) grads.emplace_back(static_cast<size_t>(n), 1.0f);
  const int64_t sizes_mib[] = {0, 1, 4, 25};
  // Per size: packed (copied into one buffer and back) and in place (the sums of a bucket
  // already end to end in one allocation, as the executor lays them out).
  std::vector<double> medians[2];
  std::vector<size_t> collectives;
  for (int64_t mib : sizes_mib) {
    const std::vector<std::vector<int>> buckets = Buckets(counts, mib * kMiB);
    collectives.push_back(buckets.size());
    std::vector<std::vector<float>> end_to_end;
    for (const std::vector<int>& bucket : buckets) {
      size_t total = 0;
      for (int i : bucket) total += grads[i].size();
      end_to_end.emplace_back(total, 1.0f);
    }
    for (int in_place = 0; in_place < 2; ++in_place) {
      std::vector<double> ms;
      std::vector<float> packed;
      for (int step = 0; step < steps + 2; ++step) {
        const auto t0 = Clock::now();
        for (size_t b = 0; b < buckets.size(); ++b) {
          const std::vector<int>& bucket = buckets[b];
          if (in_place || bucket.size() == 1) {
            std::vector<float>& g = in_place ? end_to_end[b] : grads[bucket.front()];
            if (!(*ring)
                     ->AllReduce(g.data(), static_cast<int64_t>(g.size()), pw::ReduceOp::kSum)
                     .ok())
              return 1;
            continue;
          }
          packed.resize(end_to_end[b].size());
          size_t at = 0;
          for (int i : bucket) {
            std::memcpy(packed.data() + at, grads[i].data(), grads[i].size() * sizeof(float));
            at += grads[i].size();
          }
          if (!(*ring)
                   ->AllReduce(packed.data(), static_cast<int64_t>(packed.size()),
                               pw::ReduceOp::kSum)
                   .ok())
            return 1;
          at = 0;
          for (int i : bucket) {
            std::memcpy(grads[i].data(), packed.data() + at, grads[i].size() * sizeof(float));
            at += grads[i].size();
          }
        }
        if (step >= 2)  // two warm-up steps
          ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      medians[in_place].push_back(ms[ms.size() / 2]);
    }
  }
  if (member == 0) {
    int64_t total = 0;
    for (int64_t n : counts) total += n;
    std::printf("%d members, %zu gradients, %.1f MiB of f32, median of %d steps\n", size,
                counts.size(), static_cast<double>(total * 4) / kMiB, steps);
    std::printf("  bucket           all-reduces   packed ms  in place ms  (x each-alone)\n");
    for (size_t i = 0; i < collectives.size(); ++i)
      std::printf("  %2lld MiB%s  %4zu   %9.2f   %9.2f    (%.3fx  %.3fx)\n",
                  static_cast<long long>(sizes_mib[i]), i == 0 ? " (alone)" : "        ",
                  collectives[i], medians[0][i], medians[1][i], medians[0][i] / medians[0][0],
                  medians[1][i] / medians[0][0]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  const int size = 2;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("grad_bucket_bench." + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0) _exit(RunMember(1, size, dir, steps));
  int failed = RunMember(0, size, dir, steps);
  int status = 0;
  waitpid(child, &status, 0);
  failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  std::filesystem::remove_all(dir);
  if (failed) std::fprintf(stderr, "grad_bucket_bench: a member failed\n");
  return failed ? 1 : 0;
}
