// Poller over kqueue (macOS, the BSDs); the wake-up is an EVFILT_USER event.
#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__NetBSD__) || defined(__OpenBSD__) || \
    defined(__DragonFly__)
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>
#include <unordered_map>

#include "base/error.hpp"
#include "base/platform/poller.hpp"

namespace reach::platform {

namespace {

constexpr uintptr_t kWakeIdent = 0;  // EVFILT_USER idents are their own namespace, apart from descriptors

struct Watch {
  uint64_t tag;
  uint32_t interest;
};

}  // namespace

struct Poller::Impl {
  int kq = -1;
  std::unordered_map<int, Watch> watched;
  std::vector<struct kevent> ready = std::vector<struct kevent>(256);

  // Moves a descriptor's filters from `before` to `after`.  A hang-up alone is a read filter whose low
  // water mark no input reaches: kqueue still reports the end of input (EV_EOF) whatever the mark.
  bool apply(int fd, uint32_t before, uint32_t after) {
    struct kevent changes[2];
    int n = 0;
    const bool read_after = after & (want_read | want_hangup), read_before = before & (want_read | want_hangup);
    if (read_after) {
      const bool hangup_only = !(after & want_read);
      EV_SET(&changes[n++], uintptr_t(fd), EVFILT_READ, EV_ADD | EV_ENABLE, hangup_only ? NOTE_LOWAT : 0,
             hangup_only ? INT_MAX : 0, nullptr);
    } else if (read_before) {
      EV_SET(&changes[n++], uintptr_t(fd), EVFILT_READ, EV_DELETE, 0, 0, nullptr);
    }
    if (after & want_write)
      EV_SET(&changes[n++], uintptr_t(fd), EVFILT_WRITE, EV_ADD | EV_ENABLE, 0, 0, nullptr);
    else if (before & want_write)
      EV_SET(&changes[n++], uintptr_t(fd), EVFILT_WRITE, EV_DELETE, 0, 0, nullptr);
    return n == 0 || kevent(kq, changes, n, nullptr, 0, nullptr) == 0;
  }
};

Poller::Poller() : impl_(std::make_unique<Impl>()) {
  impl_->kq = kqueue();
  struct kevent ev;
  EV_SET(&ev, kWakeIdent, EVFILT_USER, EV_ADD | EV_CLEAR, 0, 0, nullptr);
  if (impl_->kq < 0 || kevent(impl_->kq, &ev, 1, nullptr, 0, nullptr) != 0) {
    const std::string why = socket_error_text(errno);
    if (impl_->kq >= 0) ::close(impl_->kq);
    throw Error(ErrorCode::io, "cannot create a kqueue poller: " + why);
  }
}

Poller::~Poller() { ::close(impl_->kq); }

bool Poller::add(const Socket& s, uint64_t tag, uint32_t interest) {
  if (!impl_->apply(s.native(), want_nothing, interest)) return false;
  impl_->watched[s.native()] = {tag, interest};
  return true;
}

void Poller::modify(const Socket& s, uint64_t tag, uint32_t interest) {
  auto it = impl_->watched.find(s.native());
  if (it == impl_->watched.end()) return;
  impl_->apply(s.native(), it->second.interest, interest);
  it->second = {tag, interest};
}

void Poller::remove(const Socket& s) {
  auto it = impl_->watched.find(s.native());
  if (it == impl_->watched.end()) return;
  impl_->apply(s.native(), it->second.interest, want_nothing);
  impl_->watched.erase(it);
}

bool Poller::wait(std::vector<PollEvent>& events, std::chrono::milliseconds timeout) {
  events.clear();
  timespec ts{};
  ts.tv_sec = time_t(timeout.count() / 1000);
  ts.tv_nsec = long(timeout.count() % 1000) * 1000000L;
  const int n = kevent(impl_->kq, nullptr, 0, impl_->ready.data(), int(impl_->ready.size()), &ts);
  bool woken = false;
  for (int i = 0; i < n; ++i) {
    const struct kevent& e = impl_->ready[size_t(i)];
    if (e.filter == EVFILT_USER) {
      woken = true;
      continue;
    }
    auto it = impl_->watched.find(int(e.ident));
    if (it == impl_->watched.end()) continue;
    PollEvent p;
    p.tag = it->second.tag;
    if (e.flags & EV_ERROR) {
      p.error = true;
    } else if (e.filter == EVFILT_READ) {
      p.hangup = e.flags & EV_EOF;
      p.readable = (it->second.interest & want_read) != 0;  // input, or the end of it
      if (!p.readable && !p.hangup) {
        // A hang-up watch that fired on input: XNU caps the low water mark at the receive buffer's
        // size, so a full buffer wakes it.  Disabled until the interest changes, or it would spin.
        struct kevent off;
        EV_SET(&off, e.ident, EVFILT_READ, EV_DISABLE, 0, 0, nullptr);
        kevent(impl_->kq, &off, 1, nullptr, 0, nullptr);
        continue;
      }
    } else if (e.filter == EVFILT_WRITE) {
      p.writable = true;  // with EV_EOF too: send then reports the broken connection
    }
    events.push_back(p);
  }
  return woken;  // n < 0: EINTR (a signal), reported as an early return with nothing ready
}

void Poller::wake() {
  struct kevent ev;
  EV_SET(&ev, kWakeIdent, EVFILT_USER, 0, NOTE_TRIGGER, 0, nullptr);
  kevent(impl_->kq, &ev, 1, nullptr, 0, nullptr);
}

}  // namespace reach::platform
#endif
