#pragma once
// TCP sockets on every OS reach serves from (POSIX sockets; Winsock on Windows, started once on first
// use): an owning handle, listen / accept / connect over getaddrinfo (IPv4 and IPv6), and recv / send
// that say "would block", "closed" or "error" the same way everywhere.  Every socket made here is
// non-blocking, close-on-exec, and never raises SIGPIPE.  No OS header leaks out of this file.
#include <cstddef>
#include <cstdint>
#include <string>

namespace reach::platform {

#ifdef _WIN32
using NativeSocket = std::uintptr_t;  // SOCKET
#else
using NativeSocket = int;
#endif

// Owns one socket; closes it when destroyed.  Move-only.
class Socket {
 public:
  Socket() = default;
  explicit Socket(NativeSocket s) : s_(s) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : s_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool valid() const { return s_ != invalid(); }
  NativeSocket native() const { return s_; }
  NativeSocket release();
  void close();
  static NativeSocket invalid();

 private:
  NativeSocket s_ = invalid();
};

enum class IoStatus {
  ok,           // `bytes` moved (at least one)
  would_block,  // nothing now: wait for the poller
  closed,       // recv: the peer closed its side (end of input)
  error,        // the connection is broken (reset, aborted); `error` holds the OS code
};

struct IoResult {
  IoStatus status = IoStatus::ok;
  size_t bytes = 0;
  int error = 0;  // the OS error code (errno, WSAGetLastError) when status is error
};

// Binds host:port (the first address getaddrinfo gives that binds; port 0: any free port) and listens.
// Throws Error(io) naming host:port and what to change when nothing binds.
Socket listen_tcp(const std::string& host, int port, int backlog);
// The port a bound socket listens on (the one chosen, with port 0).
int local_port(const Socket& s);

struct Accepted {
  Socket socket;  // valid with status ok: non-blocking, TCP_NODELAY set
  IoStatus status = IoStatus::ok;
  int error = 0;
};
// One waiting connection, or would_block when none waits; error: see out_of_descriptors().
Accepted accept_tcp(const Socket& listener);
// An accept error that passes when connections close (out of descriptors or buffers): the caller should
// stop accepting for a moment rather than retry at once.
bool out_of_descriptors(int error);

// Connects to host:port (blocking until connected or refused), then makes the socket non-blocking with
// TCP_NODELAY set.  Throws Error(io) naming host:port when no address connects.
Socket connect_tcp(const std::string& host, int port);

IoResult recv_some(const Socket& s, char* buf, size_t size);
IoResult send_some(const Socket& s, const char* data, size_t size);
// Ends the write side (the peer reads end of input once our bytes are read); reading goes on.
void shutdown_write(const Socket& s);

// The OS's text for an error code from IoResult / Accepted (strerror, FormatMessageW as UTF-8).
std::string socket_error_text(int error);

}  // namespace reach::platform
