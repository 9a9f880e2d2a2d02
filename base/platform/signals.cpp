#include "base/platform/signals.hpp"

#ifdef _WIN32
#include <windows.h>
#else
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cmath>
#include <ctime>
#endif

#include <condition_variable>
#include <deque>
#include <mutex>

namespace reach::platform {

#ifdef _WIN32

struct StopSignals::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<StopSignal> pending;   // under mu, like woken
  bool woken = false;
};

namespace {

std::mutex g_mu;
StopSignals::State* g_state = nullptr;   // the one StopSignals, for the handler

BOOL WINAPI on_console_event(DWORD event) {
  StopSignal s = StopSignal::none;
  if (event == CTRL_C_EVENT) s = StopSignal::interrupt;
  else if (event == CTRL_BREAK_EVENT || event == CTRL_CLOSE_EVENT) s = StopSignal::terminate;
  else return FALSE;   // logoff, shutdown: the default handling
  {
    std::lock_guard lock(g_mu);
    if (!g_state) return FALSE;
    {
      std::lock_guard state_lock(g_state->mu);
      g_state->pending.push_back(s);
    }
    g_state->cv.notify_all();
  }
  // Windows ends the process as soon as the handler of CTRL_CLOSE returns: hold it (on the handler's own
  // thread) so that the drain has the ~5 s the system grants before it ends the process anyway.
  if (event == CTRL_CLOSE_EVENT) Sleep(INFINITE);
  return TRUE;
}

}  // namespace

const char* stop_signal_name(StopSignal s) {
  return s == StopSignal::terminate ? "CTRL_BREAK/CTRL_CLOSE" : s == StopSignal::interrupt ? "CTRL_C" : "none";
}

StopSignals::StopSignals() : state_(std::make_unique<State>()) {
  {
    std::lock_guard lock(g_mu);
    g_state = state_.get();
  }
  SetConsoleCtrlHandler(on_console_event, TRUE);
}

StopSignals::~StopSignals() {
  SetConsoleCtrlHandler(on_console_event, FALSE);
  std::lock_guard lock(g_mu);
  g_state = nullptr;
}

StopSignal StopSignals::wait(Clock::time_point deadline) {
  std::unique_lock lock(state_->mu);
  auto ready = [&] { return state_->woken || !state_->pending.empty(); };
  if (deadline == Clock::time_point::max()) state_->cv.wait(lock, ready);
  else if (!state_->cv.wait_until(lock, deadline, ready)) return StopSignal::none;
  if (state_->woken) return StopSignal::none;
  const StopSignal s = state_->pending.front();
  state_->pending.pop_front();
  return s;
}

void StopSignals::wake() {
  {
    std::lock_guard lock(state_->mu);
    state_->woken = true;
  }
  state_->cv.notify_all();
}

void ignore_broken_pipe() {}

#else

struct StopSignals::State {
  sigset_t signals;
  std::mutex mu;
  bool woken = false;     // under mu, like the two below
  bool waiting = false;
  pthread_t waiter{};
};

namespace {

StopSignal from_signal(int sig) {
  return sig == SIGTERM ? StopSignal::terminate : sig == SIGINT ? StopSignal::interrupt : StopSignal::none;
}

}  // namespace

const char* stop_signal_name(StopSignal s) {
  return s == StopSignal::terminate ? "SIGTERM" : s == StopSignal::interrupt ? "SIGINT" : "none";
}

StopSignals::StopSignals() : state_(std::make_unique<State>()) {
  sigemptyset(&state_->signals);
  sigaddset(&state_->signals, SIGINT);
  sigaddset(&state_->signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &state_->signals, nullptr);
}

StopSignals::~StopSignals() = default;

StopSignal StopSignals::wait(Clock::time_point deadline) {
  {
    std::lock_guard lock(state_->mu);
    if (state_->woken) return StopSignal::none;
    // wake() signals this thread: the signal stays pending until the sigwait below takes it.
    state_->waiting = true;
    state_->waiter = pthread_self();
  }
  StopSignal got = StopSignal::none;
  for (;;) {
    if (deadline == Clock::time_point::max()) {
      int sig = 0;
      if (sigwait(&state_->signals, &sig) == 0) {
        got = from_signal(sig);
        break;
      }
      continue;
    }
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) break;
#ifdef __APPLE__
    // macOS has no sigtimedwait: poll for a pending signal every 10 ms.
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) == 0 && (sigismember(&pending, SIGTERM) || sigismember(&pending, SIGINT))) {
      int sig = 0;
      if (sigwait(&state_->signals, &sig) == 0) {
        got = from_signal(sig);
        break;
      }
    }
    timespec ts{0, 10'000'000};
    nanosleep(&ts, nullptr);
#else
    timespec ts{};
    ts.tv_sec = time_t(left);
    ts.tv_nsec = long((left - std::floor(left)) * 1e9);
    const int sig = sigtimedwait(&state_->signals, nullptr, &ts);
    if (sig > 0) {
      got = from_signal(sig);
      break;
    }
    if (errno != EAGAIN && errno != EINTR) break;
#endif
  }
  std::lock_guard lock(state_->mu);
  state_->waiting = false;
  return state_->woken ? StopSignal::none : got;
}

void StopSignals::wake() {
  std::lock_guard lock(state_->mu);
  state_->woken = true;
  // The waiter sits in sigwait / sigtimedwait: a signal to it alone ends them.
  if (state_->waiting) pthread_kill(state_->waiter, SIGTERM);
}

void ignore_broken_pipe() { ::signal(SIGPIPE, SIG_IGN); }

#endif

}  // namespace reach::platform
