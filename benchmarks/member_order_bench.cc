// The member-order all-reduce (executor/comm/tcp_ring.h: an all-to-all of chunks over a full
// mesh, each element summed in member order, then an all-gather) against the classic ring
// (chunk c summed starting at member c), between 2 and 4 processes of this machine over TCP
// on loopback, for 8 KiB, 1 MiB and 64 MiB of f32. Prints the median wall time per
// operation of each and their ratio, taken in one run (two members swap buffers either way).
//
//   member_order_bench [ITERATIONS (100; 64 MiB runs a tenth of them)]

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "executor/comm/kv_store.h"
#include "executor/comm/tcp_ring.h"

namespace {

using Clock = std::chrono::steady_clock;

double MedianUs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One member: both algorithms at every size; member 0 prints the medians.
int RunMember(int member, int size, const std::string& dir, int iterations) {
  auto store = pw::OpenStore(dir);
  if (!store.ok()) return 1;
  const std::vector<int64_t> counts = {2048, 262144, 16777216};  // 8 KiB, 1 MiB, 64 MiB
  const char* names[] = {"8 KiB", "1 MiB", "64 MiB"};
  std::vector<double> medians[2];
  for (int member_order = 0; member_order < 2; ++member_order) {
    pw::TcpRingOptions options;
    options.member_order = member_order == 1;
    auto ring =
        pw::TcpRing::Join(**store, member_order ? "member_order" : "ring", member, size, options);
    if (!ring.ok()) {
      std::fprintf(stderr, "%s\n", ring.status().ToString().c_str());
      return 1;
    }
    for (int64_t count : counts) {
      std::vector<float> data(static_cast<size_t>(count), 1.0f);
      const int runs = count > 1000000 ? std::max(3, iterations / 10) : iterations;
      std::vector<double> us;
      for (int i = 0; i < runs + 5; ++i) {
        auto t0 = Clock::now();
        if (!(*ring)->AllReduce(data.data(), count, pw::ReduceOp::kSum).ok()) return 1;
        if (i >= 5)
          us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
      medians[member_order].push_back(MedianUs(us));
    }
  }
  if (member == 0)
    for (size_t i = 0; i < counts.size(); ++i)
      std::printf("%d members %-7s ring %10.1f us  member order %10.1f us  ratio %.2fx\n", size,
                  names[i], medians[0][i], medians[1][i], medians[1][i] / medians[0][i]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::max(1, std::atoi(argv[1])) : 100;
  for (int size : {2, 4}) {
    const std::string dir =
        (std::filesystem::temp_directory_path() /
         ("member_order_bench." + std::to_string(getpid()) + "." + std::to_string(size)))
            .string();
    std::filesystem::create_directories(dir);
    std::fflush(stdout);
    std::vector<pid_t> children;
    for (int member = 1; member < size; ++member) {
      pid_t child = fork();
      if (child == 0) _exit(RunMember(member, size, dir, iterations));
      children.push_back(child);
    }
    int failed = RunMember(0, size, dir, iterations);
    for (pid_t child : children) {
      int status = 0;
      waitpid(child, &status, 0);
      failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    std::filesystem::remove_all(dir);
    if (failed) {
      std::fprintf(stderr, "member_order_bench: a member failed\n");
      return 1;
    }
  }
  return 0;
}
