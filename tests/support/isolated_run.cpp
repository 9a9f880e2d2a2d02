#include "tests/support/isolated_run.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <string_view>

#if defined(__SANITIZE_ADDRESS__)
#define REACH_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REACH_TEST_ASAN 1
#endif
#endif

namespace reach::test {

namespace {

void write_all(int fd, std::string_view s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

}  // namespace

std::string Outcome::describe() const {
  switch (kind) {
    case returned: return "returned normally after " + std::to_string(seconds) + " s";
    case error: return std::string("reach::Error ") + error_code_name(code) + ": " + message;
    case other_exception: return "another exception: " + message;
    case signaled: return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    case timed_out: return "did not return within " + std::to_string(seconds) + " s (a hang)";
  }
  return "?";
}

Outcome run_isolated(const std::function<std::string()>& f, double seconds, size_t max_address_space) {
  int fds[2];
  if (::pipe(fds) != 0) return {Outcome::other_exception, ErrorCode::internal, "pipe() failed"};
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return {Outcome::other_exception, ErrorCode::internal, "fork() failed"};
  if (pid == 0) {  // child: reports "R<result>", "E<code> <message>" or "X<message>"
    ::close(fds[0]);
    // The default action for a crash: the test framework's handler would report it again from here.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
#ifndef REACH_TEST_ASAN
    struct rlimit rl {max_address_space, max_address_space};
    ::setrlimit(RLIMIT_AS, &rl);
#else
    (void)max_address_space;
#endif
    char kind = 'R';
    std::string body;
    try {
      body = f();
    } catch (const Error& e) {
      kind = 'E';
      body = std::to_string(static_cast<int>(e.code()));
      body += ' ';
      body += e.what();
    } catch (const std::exception& e) {
      kind = 'X';
      body = e.what();
    } catch (...) {
      kind = 'X';
      body = "unknown exception";
    }
    write_all(fds[1], std::string_view(&kind, 1));
    write_all(fds[1], body);
    ::_exit(0);
  }
  ::close(fds[1]);
  Outcome out;
  std::string text;
  bool done = false;
  for (;;) {
    const double left = seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (left <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      done = true;  // the child closed its end: it exited (or died)
      break;
    }
    text.append(buf, size_t(n));
  }
  ::close(fds[0]);
  if (!done) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!done) {
    out.kind = Outcome::timed_out;
    out.seconds = seconds;
  } else if (WIFSIGNALED(status)) {
    out.kind = Outcome::signaled;
    out.signal = WTERMSIG(status);
  } else if (text.empty()) {
    out.kind = Outcome::other_exception;
    out.message = "the child exited without a report";
  } else if (text[0] == 'R') {
    out.kind = Outcome::returned;
    out.message = text.substr(1);
  } else if (text[0] == 'E') {
    out.kind = Outcome::error;
    const size_t sp = text.find(' ');
    out.code = static_cast<ErrorCode>(std::stoi(text.substr(1, sp - 1)));
    out.message = sp == std::string::npos ? "" : text.substr(sp + 1);
  } else {
    out.kind = Outcome::other_exception;
    out.message = text.substr(1);
  }
  return out;
}

}  // namespace reach::test
