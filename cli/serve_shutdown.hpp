#pragma once
// How `reach serve` ends.  SIGTERM (what Kubernetes and process managers send before they wait) drains:
// no new requests, the ones in flight finish (server/drain.hpp); at the deadline those left end with an
// error, and if any is still open a moment later the server stops at once.  A second SIGTERM, or SIGINT,
// stops at once: every connection closes, and if the device's step in progress holds the exit up, the
// process ends without waiting for it.  The signals go to one thread of ours; every other thread keeps them
// blocked.  On Windows the console's CTRL_BREAK / CTRL_CLOSE drain and CTRL_C stops (base/platform/signals).
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/platform/signals.hpp"

namespace reach::cli {

class ServeShutdown {
 public:
  struct Actions {
    std::function<void()> drain;                   // stop taking requests (HttpServer::drain)
    std::function<size_t()> in_flight;             // requests being answered, for the log
    std::function<void(const std::string&)> cut;   // end every request left with this error (Scheduler::stop)
    std::function<void()> stop;                    // drop every connection now (HttpServer::stop)
  };

  // Blocks SIGINT and SIGTERM in the calling thread, and so in every thread it starts afterwards: make it
  // before the server's threads start, and before the objects the actions use (it must outlive them).
  ServeShutdown();
  // After the server's objects are gone: ends the signal thread.
  ~ServeShutdown();
  ServeShutdown(const ServeShutdown&) = delete;
  ServeShutdown& operator=(const ServeShutdown&) = delete;

  // Starts the thread that waits for the signals; drain_timeout: seconds a drain waits for the requests
  // in flight before it cuts them.
  void start(Actions actions, double drain_timeout);
  // When the server has returned (drained, or stopped), before its objects go: no action runs any more.
  // Logs how the drain went.
  void served();

 private:
  using Clock = std::chrono::steady_clock;
  void wait_for_signals();
  bool drain();      // true: the process is ending on its own; false: a second signal, stop at once
  void stop_now();
  // Runs `f` unless served() came first.
  void act(const std::function<void()>& f);
  bool finished();

  platform::StopSignals signals_;
  Actions actions_;
  std::chrono::duration<double> drain_timeout_{30.0};
  Clock::time_point drain_start_;
  enum class State { serving, draining, cut, stopped };
  std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::serving;   // under mu_, like the two below
  bool served_ = false;
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace reach::cli
