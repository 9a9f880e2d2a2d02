// base/platform/socket.hpp and poller.hpp on loopback TCP: bytes sent by one end arrive at the other
// through the poller, a wait with nothing ready returns empty when its time is up, wake() from another
// thread ends a wait early, a closed peer reads as closed (and as a hang-up to a socket watched for
// nothing else), and a full or empty socket says would-block rather than blocking.  The references are
// the bytes the test sent itself and the clock.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/platform/poller.hpp"
#include "base/platform/socket.hpp"

using namespace reach::platform;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// Waits (up to 5 s) for an event of `tag` that `want` accepts; returns it, or a default event on time-out.
template <class Want>
PollEvent wait_for(Poller& poller, uint64_t tag, Want want) {
  std::vector<PollEvent> events;
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < until) {
    poller.wait(events, milliseconds(100));
    for (const PollEvent& e : events)
      if (e.tag == tag && want(e)) return e;
  }
  return PollEvent{~uint64_t(0) - 1};
}

// Events of `tag` in one wait of `ms`.
size_t events_of(Poller& poller, uint64_t tag, int ms) {
  std::vector<PollEvent> events;
  poller.wait(events, milliseconds(ms));
  size_t n = 0;
  for (const PollEvent& e : events) n += e.tag == tag;
  return n;
}

std::string recv_all(Poller& poller, const Socket& s, uint64_t tag, size_t want) {
  std::string got;
  char buf[4096];
  while (got.size() < want) {
    const IoResult r = recv_some(s, buf, sizeof buf);
    if (r.status == IoStatus::ok) {
      got.append(buf, r.bytes);
    } else if (r.status == IoStatus::would_block) {
      if (wait_for(poller, tag, [](const PollEvent& e) { return e.readable; }).tag != tag) break;
    } else {
      break;
    }
  }
  return got;
}

struct Pair {
  Socket listener, client, server;
};

// A listener on `host`, a client connected to it, and the server's end accepted through the poller.
Pair connect_pair(Poller& poller, const std::string& host) {
  Pair p;
  p.listener = listen_tcp(host, 0, 16);
  const int port = local_port(p.listener);
  REQUIRE(port > 0);
  REQUIRE(poller.add(p.listener, 1, want_read));
  CHECK(accept_tcp(p.listener).status == IoStatus::would_block);  // nobody is connecting yet
  p.client = connect_tcp(host, port);
  REQUIRE(wait_for(poller, 1, [](const PollEvent& e) { return e.readable; }).tag == 1);
  Accepted a = accept_tcp(p.listener);
  REQUIRE(a.status == IoStatus::ok);
  REQUIRE(a.socket.valid());
  p.server = std::move(a.socket);
  poller.remove(p.listener);
  return p;
}

}  // namespace

TEST_CASE("bytes cross a loopback connection both ways through the poller") {
  for (const char* host : {"127.0.0.1", "::1"}) {
    CAPTURE(host);
    Poller poller;
    Pair p;
    try {
      p = connect_pair(poller, host);
    } catch (const reach::Error& e) {
      if (std::string(host) == "::1") {
        MESSAGE("no IPv6 loopback here: " << e.what());
        continue;
      }
      throw;
    }
    REQUIRE(poller.add(p.server, 2, want_read));
    REQUIRE(poller.add(p.client, 3, want_read));
    const std::string request = "GET / HTTP/1.1\r\n\r\n", answer(100000, 'x');
    IoResult r = send_some(p.client, request.data(), request.size());
    REQUIRE(r.status == IoStatus::ok);
    CHECK(r.bytes == request.size());
    CHECK(recv_all(poller, p.server, 2, request.size()) == request);

    // A larger answer: sent as the socket takes it, read whole at the other end.
    size_t sent = 0;
    std::string got;
    char buf[8192];
    while (got.size() < answer.size()) {
      if (sent < answer.size()) {
        r = send_some(p.server, answer.data() + sent, answer.size() - sent);
        REQUIRE(r.status != IoStatus::error);
        sent += r.bytes;
      }
      r = recv_some(p.client, buf, sizeof buf);
      REQUIRE(r.status != IoStatus::error);
      REQUIRE(r.status != IoStatus::closed);
      if (r.status == IoStatus::ok) got.append(buf, r.bytes);
    }
    CHECK(got == answer);
  }
}

TEST_CASE("a wait with nothing ready lasts its time-out; wake() from another thread ends it early") {
  Poller poller;
  std::vector<PollEvent> events;
  auto t0 = Clock::now();
  CHECK_FALSE(poller.wait(events, milliseconds(150)));
  CHECK(events.empty());
  CHECK(Clock::now() - t0 >= milliseconds(120));

  t0 = Clock::now();
  std::thread waker([&] {
    std::this_thread::sleep_for(milliseconds(100));
    poller.wake();
  });
  const bool woken = poller.wait(events, milliseconds(10000));
  const auto took = Clock::now() - t0;
  waker.join();
  CHECK(woken);
  CHECK(events.empty());  // the wake-up is consumed, not listed
  CHECK(took >= milliseconds(90));
  CHECK(took < milliseconds(5000));

  // Wake-ups before a wait end the next one at once, and are then used up.
  poller.wake();
  poller.wake();
  t0 = Clock::now();
  CHECK(poller.wait(events, milliseconds(10000)));
  CHECK(Clock::now() - t0 < milliseconds(5000));
  CHECK_FALSE(poller.wait(events, milliseconds(50)));
}

TEST_CASE("a peer that closes reads as closed; watched for a hang-up alone, input does not wake it") {
  Poller poller;
  char buf[16];
  {
    // A client that leaves with nothing sent: a hang-up, then the end of input.
    Pair p = connect_pair(poller, "127.0.0.1");
    REQUIRE(poller.add(p.server, 2, want_hangup));
    CHECK(events_of(poller, 2, 100) == 0);
    p.client.close();
    const PollEvent e = wait_for(poller, 2, [](const PollEvent& e) { return e.hangup; });
    CHECK(e.tag == 2);
    CHECK(e.hangup);
    CHECK(recv_some(p.server, buf, sizeof buf).status == IoStatus::closed);
    poller.remove(p.server);
  }
  {
    // Input alone (a request pipelined behind the one being answered): no event for the hang-up watch.
    Pair p = connect_pair(poller, "127.0.0.1");
    REQUIRE(poller.add(p.server, 3, want_hangup));
    const std::string more = "more";
    REQUIRE(send_some(p.client, more.data(), more.size()).status == IoStatus::ok);
    CHECK(events_of(poller, 3, 200) == 0);
    p.client.close();
#ifndef _WIN32
    // Then the client leaves: noticed behind the input (WSAPoll cannot: poller.hpp, want_hangup).
    CHECK(wait_for(poller, 3, [](const PollEvent& e) { return e.hangup; }).tag == 3);
#endif
    // Read: what was sent first, then the end of input.
    poller.modify(p.server, 3, want_read);
    CHECK(recv_all(poller, p.server, 3, more.size()) == more);
    CHECK(recv_some(p.server, buf, sizeof buf).status == IoStatus::closed);
  }
}

TEST_CASE("an empty socket and a full one say would-block; the poller says when they are ready") {
  Poller poller;
  Pair p = connect_pair(poller, "127.0.0.1");
  char buf[65536];
  CHECK(recv_some(p.server, buf, sizeof buf).status == IoStatus::would_block);

  // The client reads nothing: the server's sends fill both ends' buffers, then would block.
  const std::string block(65536, 'y');
  size_t sent = 0;
  IoResult r;
  while ((r = send_some(p.server, block.data(), block.size())).status == IoStatus::ok) {
    sent += r.bytes;
    REQUIRE(sent < (size_t(256) << 20));  // buffers are megabytes at most
  }
  CHECK(r.status == IoStatus::would_block);
  REQUIRE(poller.add(p.server, 2, want_write));
  CHECK(events_of(poller, 2, 100) == 0);  // still full

  // The client drains everything: the server's socket takes bytes again.
  size_t read = 0;
  while (read < sent) {
    r = recv_some(p.client, buf, sizeof buf);
    REQUIRE(r.status != IoStatus::error);
    REQUIRE(r.status != IoStatus::closed);
    read += r.bytes;
  }
  CHECK(read == sent);
  CHECK(wait_for(poller, 2, [](const PollEvent& e) { return e.writable; }).tag == 2);
  poller.remove(p.server);
}

TEST_CASE("errors name the address at fault") {
  Socket taken = listen_tcp("127.0.0.1", 0, 4);
  const int port = local_port(taken);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  try {
    Socket again = listen_tcp("127.0.0.1", port, 4);
    FAIL("a second listener on " << where << " bound");
  } catch (const reach::Error& e) {
    CHECK(e.code() == reach::ErrorCode::io);
    CHECK(std::string(e.what()).find(where) != std::string::npos);
  }
  taken.close();  // nobody listens there now: a connection is refused
  try {
    Socket s = connect_tcp("127.0.0.1", port);
    FAIL("connected to " << where << " with nobody listening");
  } catch (const reach::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("cannot connect to " + where) != std::string::npos);
    CHECK(what.size() > ("cannot connect to " + where + ": ").size());  // the OS's reason follows
  }
  CHECK_FALSE(socket_error_text(1).empty());
}
