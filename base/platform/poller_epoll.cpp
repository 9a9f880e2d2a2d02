// Poller over epoll (Linux); the wake-up is an eventfd.
#if defined(__linux__)
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "base/error.hpp"
#include "base/platform/poller.hpp"

namespace reach::platform {

namespace {

uint32_t epoll_mask(uint32_t interest) {
  uint32_t m = 0;
  if (interest & want_read) m |= EPOLLIN;
  if (interest & want_write) m |= EPOLLOUT;
  if (interest & want_hangup) m |= EPOLLRDHUP;
  return m;
}

}  // namespace

struct Poller::Impl {
  int epoll_fd = -1, wake_fd = -1;
  std::vector<epoll_event> ready = std::vector<epoll_event>(256);
};

Poller::Poller() : impl_(std::make_unique<Impl>()) {
  impl_->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  impl_->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kReservedTag;
  if (impl_->epoll_fd < 0 || impl_->wake_fd < 0 || epoll_ctl(impl_->epoll_fd, EPOLL_CTL_ADD, impl_->wake_fd, &ev) != 0) {
    const std::string why = socket_error_text(errno);
    if (impl_->wake_fd >= 0) ::close(impl_->wake_fd);
    if (impl_->epoll_fd >= 0) ::close(impl_->epoll_fd);
    throw Error(ErrorCode::io, "cannot create an epoll poller and its eventfd: " + why);
  }
}

Poller::~Poller() {
  ::close(impl_->wake_fd);
  ::close(impl_->epoll_fd);
}

bool Poller::add(const Socket& s, uint64_t tag, uint32_t interest) {
  epoll_event ev{};
  ev.events = epoll_mask(interest);
  ev.data.u64 = tag;
  return epoll_ctl(impl_->epoll_fd, EPOLL_CTL_ADD, s.native(), &ev) == 0;
}

void Poller::modify(const Socket& s, uint64_t tag, uint32_t interest) {
  epoll_event ev{};
  ev.events = epoll_mask(interest);
  ev.data.u64 = tag;
  epoll_ctl(impl_->epoll_fd, EPOLL_CTL_MOD, s.native(), &ev);
}

void Poller::remove(const Socket& s) { epoll_ctl(impl_->epoll_fd, EPOLL_CTL_DEL, s.native(), nullptr); }

bool Poller::wait(std::vector<PollEvent>& events, std::chrono::milliseconds timeout) {
  events.clear();
  const int n = epoll_wait(impl_->epoll_fd, impl_->ready.data(), int(impl_->ready.size()), int(timeout.count()));
  bool woken = false;
  for (int i = 0; i < n; ++i) {
    const epoll_event& e = impl_->ready[size_t(i)];
    if (e.data.u64 == kReservedTag) {
      uint64_t count;
      [[maybe_unused]] ssize_t r = ::read(impl_->wake_fd, &count, sizeof count);
      woken = true;
      continue;
    }
    PollEvent p;
    p.tag = e.data.u64;
    p.readable = e.events & EPOLLIN;
    p.writable = e.events & EPOLLOUT;
    p.hangup = e.events & (EPOLLHUP | EPOLLRDHUP);
    p.error = e.events & EPOLLERR;
    events.push_back(p);
  }
  return woken;  // n < 0: EINTR (a signal), reported as an early return with nothing ready
}

void Poller::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(impl_->wake_fd, &one, sizeof one);
}

}  // namespace reach::platform
#endif
