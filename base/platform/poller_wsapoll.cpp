// Poller over WSAPoll (Windows); the wake-up is a loopback TCP pair (WSAPoll takes sockets only).
#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <winsock2.h>
#include <ws2tcpip.h>

#include <chrono>
#include <string>
#include <thread>
#include <unordered_map>

#include "base/error.hpp"
#include "base/platform/poller.hpp"

namespace reach::platform {

namespace {

struct Watch {
  uint64_t tag;
  uint32_t interest;
  bool muted;  // hang-up only, and input waits: not polled until the interest changes (no busy loop)
};

SHORT poll_mask(const Watch& w) {
  SHORT m = 0;
  if ((w.interest & want_read) || ((w.interest & want_hangup) && !w.muted)) m |= POLLRDNORM;
  if (w.interest & want_write) m |= POLLWRNORM;
  return m;
}

int peer_port(const Socket& s) {
  sockaddr_storage addr{};
  int len = sizeof addr;
  if (getpeername(SOCKET(s.native()), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

}  // namespace

struct Poller::Impl {
  Socket wake_in, wake_out;        // wake() writes a byte to wake_out; wake_in is polled
  std::vector<WSAPOLLFD> fds;      // fds[0]: wake_in
  std::vector<Watch> watches;      // parallel to fds
  std::unordered_map<NativeSocket, size_t> index;  // socket -> its place in fds
};

Poller::Poller() : impl_(std::make_unique<Impl>()) {
  Socket listener = listen_tcp("127.0.0.1", 0, 1);
  impl_->wake_out = connect_tcp("127.0.0.1", local_port(listener));
  // The connection is queued once connect returns; the peer check keeps a stranger's connection out.
  for (int tries = 0; tries < 200 && !impl_->wake_in.valid(); ++tries) {
    Accepted a = accept_tcp(listener);
    if (a.status == IoStatus::ok && peer_port(a.socket) == local_port(impl_->wake_out))
      impl_->wake_in = std::move(a.socket);
    else if (a.status != IoStatus::ok)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!impl_->wake_in.valid())
    throw Error(ErrorCode::io, "cannot create the poller's wake-up socket pair on 127.0.0.1");
  impl_->fds.push_back({SOCKET(impl_->wake_in.native()), POLLRDNORM, 0});
  impl_->watches.push_back({kReservedTag, want_read, false});
}

Poller::~Poller() = default;

bool Poller::add(const Socket& s, uint64_t tag, uint32_t interest) {
  if (impl_->index.count(s.native())) return false;
  const Watch w{tag, interest, false};
  impl_->index[s.native()] = impl_->fds.size();
  impl_->fds.push_back({SOCKET(s.native()), poll_mask(w), 0});
  impl_->watches.push_back(w);
  return true;
}

void Poller::modify(const Socket& s, uint64_t tag, uint32_t interest) {
  auto it = impl_->index.find(s.native());
  if (it == impl_->index.end()) return;
  Watch& w = impl_->watches[it->second];
  w = {tag, interest, false};
  impl_->fds[it->second].events = poll_mask(w);
}

void Poller::remove(const Socket& s) {
  auto it = impl_->index.find(s.native());
  if (it == impl_->index.end()) return;
  const size_t i = it->second, last = impl_->fds.size() - 1;
  impl_->index.erase(it);
  if (i != last) {  // the last entry takes the freed place
    impl_->fds[i] = impl_->fds[last];
    impl_->watches[i] = impl_->watches[last];
    impl_->index[NativeSocket(impl_->fds[i].fd)] = i;
  }
  impl_->fds.pop_back();
  impl_->watches.pop_back();
}

bool Poller::wait(std::vector<PollEvent>& events, std::chrono::milliseconds timeout) {
  events.clear();
  const int n = WSAPoll(impl_->fds.data(), ULONG(impl_->fds.size()), int(timeout.count()));
  if (n <= 0) return false;
  bool woken = false;
  char drop[256];
  if (impl_->fds[0].revents) {
    while (recv_some(impl_->wake_in, drop, sizeof drop).status == IoStatus::ok) {
    }
    woken = true;
  }
  for (size_t i = 1; i < impl_->fds.size(); ++i) {
    const SHORT r = impl_->fds[i].revents;
    if (!r) continue;
    Watch& w = impl_->watches[i];
    PollEvent p;
    p.tag = w.tag;
    p.error = r & (POLLERR | POLLNVAL);
    p.hangup = r & POLLHUP;
    p.writable = r & POLLWRNORM;
    p.readable = (w.interest & want_read) && (r & (POLLRDNORM | POLLHUP));
    if (!(w.interest & want_read) && (r & POLLRDNORM) && !p.hangup) {
      // Watching for a hang-up alone: a peek tells the end of input from input that waits.
      char byte;
      const int got = ::recv(impl_->fds[i].fd, &byte, 1, MSG_PEEK);
      if (got == 0)
        p.hangup = true;
      else if (got < 0 && WSAGetLastError() != WSAEWOULDBLOCK)
        p.error = true;
      else if (got > 0) {
        w.muted = true;
        impl_->fds[i].events = poll_mask(w);
      }
    }
    if (p.readable || p.writable || p.hangup || p.error) events.push_back(p);
  }
  return woken;
}

void Poller::wake() {
  const char one = 1;
  send_some(impl_->wake_out, &one, 1);  // would block: bytes already wait, the wait ends anyway
}

}  // namespace reach::platform
#endif
