#include "executor/cpu/stream_worker.h"

#include <pthread.h>

#include "executor/cpu/spin_wait.h"

namespace pw::cpu {

StreamWorker::StreamWorker(std::string name, RunFn run, SpinPolicy spin)
    : name_(std::move(name)), run_(std::move(run)), spin_(spin) {
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), name_.substr(0, 15).c_str());
}

StreamWorker::~StreamWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  thread_.join();
}

void StreamWorker::Push(const Instr* instr) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(instr);
    pushed_.fetch_add(1, std::memory_order_release);
    wake = sleeping_;
  }
  if (wake) work_cv_.notify_one();
}

void StreamWorker::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return completed_ == pushed_.load(std::memory_order_relaxed); });
}

bool StreamWorker::WaitForWork() {
  if (SpinUntil([this] { return pushed_.load(std::memory_order_acquire) != taken_; }, spin_))
    return true;
  std::unique_lock<std::mutex> lock(mu_);
  sleeping_ = true;
  work_cv_.wait(lock, [this] { return !queue_.empty() || stop_; });
  sleeping_ = false;
  return !queue_.empty();
}

void StreamWorker::Loop() {
  std::vector<const Instr*> batch;
  while (WaitForWork()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(queue_);
    }
    taken_ += batch.size();
    for (const Instr* instr : batch) run_(instr);
    bool idle;
    {
      std::lock_guard<std::mutex> lock(mu_);
      completed_ += batch.size();
      idle = completed_ == pushed_.load(std::memory_order_relaxed);
    }
    if (idle) idle_cv_.notify_all();
    batch.clear();
  }
}

}  // namespace pw::cpu
