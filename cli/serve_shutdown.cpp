#include "cli/serve_shutdown.hpp"

#include <cstdio>
#include <cstdlib>

namespace reach::cli {

namespace {

// After the deadline has cut the requests left, how long their error events and [DONE] get to go out
// (the scheduler ends them after its step in progress) before the server stops at once (stop_now).
constexpr auto kCutGrace = std::chrono::seconds(5);
// Stopping at once: how long the exit may wait for the device's step in progress (a long prefill chunk
// on a slow device takes seconds) and the teardown before the process ends without them.
constexpr auto kStopWait = std::chrono::seconds(1);

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// signals_ blocks SIGINT and SIGTERM (POSIX) as it is made.
ServeShutdown::ServeShutdown() = default;

ServeShutdown::~ServeShutdown() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    served_ = finished_ = true;
  }
  cv_.notify_all();
  // The thread waits for a signal (ended by wake), or on cv_.
  signals_.wake();
  thread_.join();
}

void ServeShutdown::start(Actions actions, double drain_timeout) {
  actions_ = std::move(actions);
  drain_timeout_ = std::chrono::duration<double>(drain_timeout);
  thread_ = std::thread([this] { wait_for_signals(); });
}

void ServeShutdown::served() {
  std::lock_guard lock(mu_);
  served_ = true;
  if (state_ == State::draining)
    std::fprintf(stderr, "reach serve: drained in %.2f s\n", seconds_since(drain_start_));
  else if (state_ == State::cut)
    std::fprintf(stderr, "reach serve: stopped %.2f s after %s\n", seconds_since(drain_start_),
                 platform::stop_signal_name(platform::StopSignal::terminate));
}

void ServeShutdown::act(const std::function<void()>& f) {
  std::lock_guard lock(mu_);
  if (!served_) f();
}

bool ServeShutdown::finished() {
  std::lock_guard lock(mu_);
  return finished_;
}

void ServeShutdown::wait_for_signals() {
  const platform::StopSignal sig = signals_.wait();
  if (finished()) return;
  if (sig == platform::StopSignal::terminate && drain()) return;
  stop_now();
}

bool ServeShutdown::drain() {
  act([&] {
    drain_start_ = Clock::now();
    state_ = State::draining;
    const char* term = platform::stop_signal_name(platform::StopSignal::terminate);
    std::fprintf(stderr,
                 "reach serve: %s: draining %zu request(s) in flight, for %.3g s at most (%s again or %s: stop "
                 "at once)\n",
                 term, actions_.in_flight(), drain_timeout_.count(), term,
                 platform::stop_signal_name(platform::StopSignal::interrupt));
    actions_.drain();
  });
  Clock::time_point deadline = drain_start_ + std::chrono::duration_cast<Clock::duration>(drain_timeout_);
  for (;;) {
    const platform::StopSignal sig = signals_.wait(deadline);
    if (finished()) return true;
    if (sig != platform::StopSignal::none) return false;  // a second signal: at once
    // The deadline: first the requests left end with an error; if connections are still open a moment
    // later (a client that reads nothing, a device step that takes long), the server stops at once.
    // Once the server has returned, only a signal or the end is waited for.
    bool stuck = false;
    act([&] {
      if (state_ == State::draining) {
        state_ = State::cut;
        std::fprintf(stderr, "reach serve: the drain deadline passed: %zu request(s) end with an error\n",
                     actions_.in_flight());
        actions_.cut("the server shut down before this reply was complete (its drain deadline passed)");
        deadline = Clock::now() + kCutGrace;
      } else {
        std::fprintf(stderr, "reach serve: %zu request(s) still open %.0f s after the cut\n", actions_.in_flight(),
                     std::chrono::duration<double>(kCutGrace).count());
        stuck = true;
      }
    });
    if (stuck) return false;
    std::lock_guard lock(mu_);
    if (served_) deadline = Clock::time_point::max();
  }
}

void ServeShutdown::stop_now() {
  std::fprintf(stderr, "reach serve: stopping\n");
  // The scheduler first: requests in flight end at once with an error; then the HTTP server drops every
  // connection, whatever its client is doing, and listen() returns.
  act([&] {
    state_ = State::stopped;
    actions_.cut("the server is shutting down");
    actions_.stop();
  });
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, kStopWait, [&] { return finished_; })) {
    std::fprintf(stderr, "reach serve: exiting without waiting for the device's step in progress\n");
    std::fflush(stderr);
    std::_Exit(0);
  }
}

}  // namespace reach::cli
