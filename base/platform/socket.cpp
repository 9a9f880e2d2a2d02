#include "base/platform/socket.hpp"

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#else
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#endif

#include <climits>
#include <mutex>

#include "base/error.hpp"

namespace reach::platform {

namespace {

#ifdef _WIN32
using SockLen = int;

// Winsock must be started before the first socket call; once per process, never stopped (the OS
// frees it at exit).
void start_sockets() {
  static std::once_flag once;
  std::call_once(once, [] {
    WSADATA data;
    if (const int rc = WSAStartup(MAKEWORD(2, 2), &data); rc != 0)
      throw Error(ErrorCode::io, "cannot start Windows sockets (WSAStartup): " + socket_error_text(rc));
  });
}

int last_error() { return WSAGetLastError(); }
bool is_would_block(int e) { return e == WSAEWOULDBLOCK; }
bool is_interrupted(int e) { return e == WSAEINTR; }

NativeSocket open_socket(int family, int type, int protocol) {
  // Not inherited by child processes (the POSIX side's close-on-exec).
  return NativeSocket(WSASocketW(family, type, protocol, nullptr, 0, WSA_FLAG_NO_HANDLE_INHERIT));
}

bool set_nonblocking(NativeSocket s) {
  u_long one = 1;
  return ioctlsocket(SOCKET(s), FIONBIO, &one) == 0;
}

void close_native(NativeSocket s) { closesocket(SOCKET(s)); }
#else
using SockLen = socklen_t;

void start_sockets() {}
int last_error() { return errno; }
bool is_would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }
bool is_interrupted(int e) { return e == EINTR; }

NativeSocket open_socket(int family, int type, int protocol) {
#ifdef SOCK_CLOEXEC
  return ::socket(family, type | SOCK_CLOEXEC, protocol);
#else
  const int s = ::socket(family, type, protocol);
  if (s >= 0) fcntl(s, F_SETFD, FD_CLOEXEC);
  return s;
#endif
}

bool set_nonblocking(NativeSocket s) {
  const int flags = fcntl(s, F_GETFL, 0);
  return flags >= 0 && fcntl(s, F_SETFL, flags | O_NONBLOCK) == 0;
}

void close_native(NativeSocket s) { ::close(s); }
#endif

void set_option(NativeSocket s, int level, int name, int value) {
  setsockopt(s, level, name, reinterpret_cast<const char*>(&value), sizeof value);
}

// What every connected socket gets: streamed tokens go out at once (no Nagle delay), and a write to a
// closed peer is an error result rather than SIGPIPE (Linux: MSG_NOSIGNAL on each send instead).
void prepare_connected(NativeSocket s) {
  set_option(s, IPPROTO_TCP, TCP_NODELAY, 1);
#ifdef SO_NOSIGPIPE
  set_option(s, SOL_SOCKET, SO_NOSIGPIPE, 1);
#endif
}

struct AddrList {
  addrinfo* head = nullptr;
  ~AddrList() {
    if (head) freeaddrinfo(head);
  }
};

// false: the host is not an address getaddrinfo knows.
bool resolve(const std::string& host, int port, bool passive, AddrList& out) {
  start_sockets();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  return getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &out.head) == 0 && out.head;
}

}  // namespace

NativeSocket Socket::invalid() {
#ifdef _WIN32
  return NativeSocket(INVALID_SOCKET);
#else
  return -1;
#endif
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    s_ = o.release();
  }
  return *this;
}

NativeSocket Socket::release() {
  const NativeSocket s = s_;
  s_ = invalid();
  return s;
}

void Socket::close() {
  if (valid()) close_native(release());
}

Socket listen_tcp(const std::string& host, int port, int backlog) {
  const std::string where = host + ":" + std::to_string(port);
  AddrList addrs;
  if (!resolve(host, port, true, addrs))
    throw Error(ErrorCode::io, "cannot listen on " + where + ": the host is not an address (check --host)");
  for (addrinfo* a = addrs.head; a; a = a->ai_next) {
    Socket s(open_socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (!s.valid()) continue;
#ifdef _WIN32
    // Windows' SO_REUSEADDR would let another process take the port from under us.
    set_option(s.native(), SOL_SOCKET, SO_EXCLUSIVEADDRUSE, 1);
#else
    set_option(s.native(), SOL_SOCKET, SO_REUSEADDR, 1);  // restart at once over old TIME_WAIT connections
#endif
    if (set_nonblocking(s.native()) && ::bind(s.native(), a->ai_addr, SockLen(a->ai_addrlen)) == 0 &&
        ::listen(s.native(), backlog) == 0)
      return s;
  }
  throw Error(ErrorCode::io, "cannot listen on " + where +
                                 ": the port is taken or the host is not an address of this machine "
                                 "(choose another --port or --host)");
}

int local_port(const Socket& s) {
  sockaddr_storage addr{};
  SockLen len = sizeof addr;
  if (getsockname(s.native(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

Accepted accept_tcp(const Socket& listener) {
  for (;;) {
#if defined(__linux__)
    const NativeSocket s = ::accept4(listener.native(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    const NativeSocket s = NativeSocket(::accept(listener.native(), nullptr, nullptr));
#endif
    if (s == Socket::invalid()) {
      const int e = last_error();
      if (is_interrupted(e)) continue;
      if (is_would_block(e)) return {Socket(), IoStatus::would_block, 0};
      return {Socket(), IoStatus::error, e};
    }
    Socket sock(s);
#ifdef _WIN32
    SetHandleInformation(HANDLE(s), HANDLE_FLAG_INHERIT, 0);
#elif !defined(__linux__)
    fcntl(s, F_SETFD, FD_CLOEXEC);
#endif
#if !defined(__linux__)
    if (!set_nonblocking(s)) return {Socket(), IoStatus::error, last_error()};
#endif
    prepare_connected(s);
    return {std::move(sock), IoStatus::ok, 0};
  }
}

bool out_of_descriptors(int error) {
#ifdef _WIN32
  return error == WSAEMFILE || error == WSAENOBUFS;
#else
  return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
#endif
}

Socket connect_tcp(const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  AddrList addrs;
  if (!resolve(host, port, false, addrs))
    throw Error(ErrorCode::io, "cannot connect to " + where + ": the host is not an address");
  int error = 0;
  for (addrinfo* a = addrs.head; a; a = a->ai_next) {
    Socket s(open_socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (!s.valid()) continue;
    if (::connect(s.native(), a->ai_addr, SockLen(a->ai_addrlen)) != 0) {
      error = last_error();
      continue;
    }
    if (!set_nonblocking(s.native())) {
      error = last_error();
      continue;
    }
    prepare_connected(s.native());
    return s;
  }
  throw Error(ErrorCode::io, "cannot connect to " + where + ": " +
                                 (error ? socket_error_text(error) : std::string("no address to try")));
}

IoResult recv_some(const Socket& s, char* buf, size_t size) {
  const size_t ask = size < size_t(INT_MAX) ? size : size_t(INT_MAX);  // Winsock takes an int
  for (;;) {
#ifdef _WIN32
    const long n = ::recv(SOCKET(s.native()), buf, int(ask), 0);
#else
    const long n = long(::recv(s.native(), buf, ask, 0));
#endif
    if (n > 0) return {IoStatus::ok, size_t(n), 0};
    if (n == 0) return {IoStatus::closed, 0, 0};
    const int e = last_error();
    if (is_interrupted(e)) continue;
    if (is_would_block(e)) return {IoStatus::would_block, 0, 0};
    return {IoStatus::error, 0, e};
  }
}

IoResult send_some(const Socket& s, const char* data, size_t size) {
  const size_t ask = size < size_t(INT_MAX) ? size : size_t(INT_MAX);
  for (;;) {
#ifdef _WIN32
    const long n = ::send(SOCKET(s.native()), data, int(ask), 0);
#elif defined(MSG_NOSIGNAL)
    const long n = long(::send(s.native(), data, ask, MSG_NOSIGNAL));
#else
    const long n = long(::send(s.native(), data, ask, 0));  // SO_NOSIGPIPE is set on the socket
#endif
    if (n >= 0) return {IoStatus::ok, size_t(n), 0};
    const int e = last_error();
    if (is_interrupted(e)) continue;
    if (is_would_block(e)) return {IoStatus::would_block, 0, 0};
    return {IoStatus::error, 0, e};
  }
}

void shutdown_write(const Socket& s) {
#ifdef _WIN32
  ::shutdown(SOCKET(s.native()), SD_SEND);
#else
  ::shutdown(s.native(), SHUT_WR);
#endif
}

std::string socket_error_text(int error) {
#ifdef _WIN32
  wchar_t wide[512];
  DWORD n = FormatMessageW(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr, DWORD(error), 0,
                           wide, DWORD(sizeof wide / sizeof wide[0]), nullptr);
  while (n > 0 && (wide[n - 1] == L'\r' || wide[n - 1] == L'\n' || wide[n - 1] == L' ')) --n;
  if (n == 0) return "socket error " + std::to_string(error);
  const int bytes = WideCharToMultiByte(CP_UTF8, 0, wide, int(n), nullptr, 0, nullptr, nullptr);
  std::string text(size_t(bytes > 0 ? bytes : 0), '\0');
  if (bytes > 0) WideCharToMultiByte(CP_UTF8, 0, wide, int(n), text.data(), bytes, nullptr, nullptr);
  return text;
#else
  return std::strerror(error);
#endif
}

}  // namespace reach::platform
