#include "runtime/serve/request.hpp"

#include <chrono>

namespace reach::serve {

void Job::push(JobEvent e) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_one();
}

std::optional<JobEvent> Job::pop(int timeout_ms) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !events_.empty(); }))
    return std::nullopt;
  JobEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

}  // namespace reach::serve
