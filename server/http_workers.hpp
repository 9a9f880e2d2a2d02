#pragma once
// The threads that answer requests off the I/O thread (HttpHandler::respond; for the OpenAI routes:
// parse, tokenize, submit the Job, relay its events).  The backlog of requests waiting for a thread
// is bounded: try_submit refuses beyond it, and the server answers 503.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace reach::server {

class WorkerPool {
 public:
  WorkerPool(size_t threads, size_t max_backlog);
  ~WorkerPool();  // stop()
  // false: every thread is busy and max_backlog tasks already wait.
  bool try_submit(std::function<void()> task);
  // Drops the tasks not started and joins the threads (the running tasks must end on their own).
  void stop();

 private:
  void run();
  size_t max_backlog_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  size_t idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace reach::server
