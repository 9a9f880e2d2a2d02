#include "server/http_workers.hpp"

namespace reach::server {

WorkerPool::WorkerPool(size_t threads, size_t max_backlog) : max_backlog_(max_backlog) {
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

WorkerPool::~WorkerPool() { stop(); }

bool WorkerPool::try_submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || tasks_.size() >= idle_ + max_backlog_) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    tasks_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void WorkerPool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      ++idle_;
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace reach::server
