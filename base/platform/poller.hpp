#pragma once
// Readiness of many sockets on one thread: epoll (Linux), kqueue (macOS, the BSDs), WSAPoll (Windows).
// Level-triggered: a socket stays reported while it is ready and its interest asks for it.  One thread
// adds, modifies, removes and waits; wake() may be called from any thread and ends a wait early
// (eventfd on Linux, EVFILT_USER on kqueue, a loopback socket pair on Windows).
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/platform/socket.hpp"

namespace reach::platform {

// What a socket is watched for (a bit set).
enum Interest : uint32_t {
  want_nothing = 0,
  want_read = 1,   // input waits, or the peer closed (recv then says closed)
  want_write = 2,  // send would take bytes
  // The peer closed or reset the connection, while waiting input alone does not wake the wait (a
  // request being answered: pipelined bytes stay in the socket, a client that leaves is noticed).
  // Where the OS cannot tell the two apart (WSAPoll; kqueue once input fills the receive buffer),
  // input that waits hides a later close until the interest changes.
  want_hangup = 4,
};

struct PollEvent {
  uint64_t tag = 0;  // given to add()
  bool readable = false;
  bool writable = false;
  bool hangup = false;  // the peer closed its side or the connection was reset
  bool error = false;   // the socket is broken: close it
};

class Poller {
 public:
  static constexpr uint64_t kReservedTag = ~uint64_t(0);  // the wake-up's own

  Poller();  // throws Error(io) when the OS gives no poller
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // `tag` (any value but kReservedTag) comes back in every PollEvent of the socket.  false: the OS
  // refused (the caller closes the socket).
  bool add(const Socket& s, uint64_t tag, uint32_t interest);
  void modify(const Socket& s, uint64_t tag, uint32_t interest);
  void remove(const Socket& s);  // before the socket closes

  // Waits until a watched socket is ready, wake() is called, or `timeout` passes; fills `events`
  // (cleared first; wake-ups are consumed and not listed).  Returns whether wake() ended the wait.
  bool wait(std::vector<PollEvent>& events, std::chrono::milliseconds timeout);
  // Any thread, any number of times: the current or next wait() returns at once.
  void wake();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reach::platform
