#pragma once
// The requests to stop that a server gets from outside, as one portable event:
//   POSIX:   SIGTERM -> terminate, SIGINT -> interrupt, taken by sigwait in one
//            thread while every other thread keeps them blocked;
//   Windows: the console's CTRL_BREAK and CTRL_CLOSE -> terminate, CTRL_C ->
//            interrupt (SetConsoleCtrlHandler; Windows ends the process about
//            5 s after CTRL_CLOSE whatever the handler does, so a drain
//            started by closing the console window gets those 5 s at most).
//   macOS:   as POSIX, but without sigtimedwait: a wait with a deadline polls
//            the pending signals every 10 ms.
// And a broken pipe, which must be an error return of send(), not a signal.
#include <chrono>
#include <memory>

namespace reach::platform {

enum class StopSignal { none, terminate, interrupt };

// "SIGTERM", "SIGINT" (POSIX); "CTRL_BREAK/CTRL_CLOSE", "CTRL_C" (Windows).
const char* stop_signal_name(StopSignal s);

class StopSignals {
 public:
  using Clock = std::chrono::steady_clock;
  // POSIX: blocks SIGINT and SIGTERM in the calling thread, and so in every
  // thread it starts afterwards: make it before any other thread starts.
  // Windows: installs the console control handler.  One at a time.
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The next stop signal; StopSignal::none once `deadline` has passed
  // (Clock::time_point::max(): none) or after wake().  One thread waits.
  StopSignal wait(Clock::time_point deadline = Clock::time_point::max());
  // Ends the wait in progress, or the next one, with StopSignal::none; every
  // later wait returns at once.
  void wake();

  struct State;   // the OS's side: a signal set and the waiting thread, or the handler's queue

 private:
  std::unique_ptr<State> state_;
};

// SIGPIPE ignored (POSIX); Windows has none.
void ignore_broken_pipe();

}  // namespace reach::platform
