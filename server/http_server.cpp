// Our own small HTTP/1.1 server rather than a library.  cpp-httplib (0.11, what Debian ships) has no
// cap on a chunked or gzip body's decoded size, a listen backlog of 5, a thread per connection while a
// request is still arriving (a few slow clients hold every thread), no notice to a non-streamed handler
// that its client left, and a stop() that waits for trickling clients.  Boost.Beast would have been the
// alternative: a large header-only dependency, slow to compile on small machines, and it would still
// need our own inflate limit and disconnect plumbing.  Here every limit is enforced where the bytes
// arrive: one I/O thread reads all connections (a slow client costs its buffers, never a thread),
// RequestReader caps the head and the decoded body, and a closed connection cancels its Job.  The OS
// side (sockets; epoll, kqueue or WSAPoll) is base/platform/'s: this file names no OS call.
#include "server/http_server.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"
#include "base/platform/poller.hpp"
#include "base/platform/socket.hpp"
#include "server/drain.hpp"
#include "server/http_exchange.hpp"
#include "server/http_handler.hpp"
#include "server/http_request.hpp"
#include "server/http_workers.hpp"

namespace reach::server {

namespace {

using Clock = std::chrono::steady_clock;
using platform::IoStatus;

constexpr uint64_t kListenerTag = 0;  // connections count from 1
constexpr int kBacklog = 1024;               // the kernel caps it at net.core.somaxconn
constexpr size_t kReadPerEvent = 64 * 1024;  // per connection and wake-up, so one fast sender cannot starve the rest
// After an answer that ends a connection early (413 while the client still sends its body), the rest is
// read and dropped for a while (Conn::Phase::draining): clients that send their whole body before they
// read (most do) would otherwise get a reset instead of the answer.  Dropping costs no memory.
constexpr size_t kDrainBytes = 64 << 20;
constexpr auto kDrainTime = std::chrono::seconds(2);
constexpr size_t kMaxQueuedOutput = 256 * 1024;
constexpr auto kTick = std::chrono::milliseconds(100);  // how often deadlines are checked

struct Conn {
  enum class Phase {
    reading,   // a request arriving (or none yet: idle keep-alive)
    busy,      // a worker answers; only a hang-up is watched for (pipelined bytes wait in the socket)
    closing,   // the last response is being written, then the write side is shut
    draining,  // write side shut: the client's unread bytes are read and dropped for a moment, so
               // that closing does not reset the connection before the client has read our answer
  };
  uint64_t id = 0;
  platform::Socket sock;
  Phase phase = Phase::reading;
  std::string in, out;
  RequestReader reader;
  std::shared_ptr<Exchange> exchange;  // in busy
  bool keep_alive = true;              // of the request being answered
  uint32_t interest = 0;               // registered with the poller (platform::Interest bits)
  Clock::time_point idle_since, request_start, write_stalled_since, drain_until;
  bool request_started = false;
  size_t drained = 0;

  explicit Conn(RequestLimits limits) : reader(limits) {}
};

struct Posted {
  uint64_t conn;
  std::string bytes;
  bool last;
};

}  // namespace

struct HttpServer::Impl {
  HttpHandler& handler;
  HttpOptions options;
  WorkerPool workers;
  platform::Poller poller;
  platform::Socket listener;
  std::atomic<bool> stopping{false};
  // Shutdown that drains (server/drain.hpp): asked for by drain() from any thread, begun by the I/O thread.
  std::atomic<bool> drain_asked{false};
  bool draining = false;
  std::atomic<size_t> in_flight{0};  // requests being answered, counted every tick
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  uint64_t next_conn = 1;
  bool listener_paused = false;
  Clock::time_point listener_resume;

  std::mutex posted_mu;
  std::vector<Posted> posted;

  Impl(HttpHandler& h, const HttpOptions& o)
      : handler(h), options(o), workers(std::max<size_t>(o.threads, 1), o.worker_backlog) {}

  ~Impl() { workers.stop(); }  // the sockets close with their owners

  void wake() { poller.wake(); }

  // Any thread: bytes for a connection, written by the I/O thread.
  void post(uint64_t conn, std::string bytes, bool last) {
    {
      std::lock_guard lock(posted_mu);
      posted.push_back({conn, std::move(bytes), last});
    }
    wake();
  }

  int bind_listener() {
    listener = platform::listen_tcp(options.host, options.port, kBacklog);
    poller.add(listener, kListenerTag, platform::want_read);
    return platform::local_port(listener);
  }

  void run() {
    std::vector<platform::PollEvent> events;
    Clock::time_point next_tick = Clock::now() + kTick;
    while (!stopping) {
      poller.wait(events, kTick);  // a wake-up: posted bytes, stop() or drain()
      for (const platform::PollEvent& ev : events) {
        if (ev.tag == kListenerTag)
          accept_all();
        else
          on_event(ev);
      }
      deliver_posted();
      const Clock::time_point now = Clock::now();
      if (now >= next_tick) {
        check_deadlines(now);
        next_tick = now + kTick;
      }
      if (drain_asked && !draining) begin_drain();
      if (draining && (in_flight = count_in_flight()) == 0) break;  // drained: every answer is written
    }
    // Stopping: every connection goes at once; workers see their exchanges gone and return.
    std::vector<uint64_t> ids;
    for (auto& [id, c] : conns) ids.push_back(id);
    for (uint64_t id : ids) destroy(id);
    if (!listener_paused) poller.remove(listener);
    listener.close();
    workers.stop();
  }

  // A request being answered: read and handed to a worker, or its answer not yet all written.
  static bool answering(const Conn& c) {
    return c.phase == Conn::Phase::busy || (c.phase == Conn::Phase::closing && !c.out.empty());
  }

  size_t count_in_flight() const {
    size_t n = 0;
    for (const auto& [id, c] : conns) n += answering(*c);
    return n;
  }

  // The I/O thread, once drain() was called: answers in progress go on (and close their connection when
  // done), idle connections close, requests still arriving get the 503.
  void begin_drain() {
    draining = true;
    std::vector<uint64_t> idle, arriving, finishing;
    for (auto& [id, cp] : conns) {
      Conn& c = *cp;
      if (c.phase == Conn::Phase::busy) {
        c.keep_alive = false;
        if (c.exchange) c.exchange->close_after();
      } else if (c.phase == Conn::Phase::reading) {
        if (c.request_started || !c.in.empty())
          arriving.push_back(id);
        else if (c.out.empty())
          idle.push_back(id);
        else
          finishing.push_back(id);  // an answer still being written: the connection closes after it
      }
    }
    for (uint64_t id : idle) destroy(id);
    for (uint64_t id : arriving) {
      Conn& c = *find(id);
      const HttpResponse r = draining_refusal();
      handler.answered(c.reader.request().path, r.status);
      respond_and_close(c, r);
    }
    for (uint64_t id : finishing) {
      Conn& c = *find(id);
      c.phase = Conn::Phase::closing;
      flush(c);
    }
  }

  void accept_all() {
    for (;;) {
      platform::Accepted a = platform::accept_tcp(listener);  // non-blocking, TCP_NODELAY: tokens go out at once
      if (a.status != IoStatus::ok) {
        if (a.status == IoStatus::error && platform::out_of_descriptors(a.error)) {
          // Out of descriptors: stop watching the listener for a moment rather than spin on it.
          poller.remove(listener);
          listener_paused = true;
          listener_resume = Clock::now() + std::chrono::milliseconds(200);
        }
        return;
      }
      if (conns.size() >= options.max_connections) continue;  // closed as `a` goes
      auto c = std::make_unique<Conn>(RequestLimits{16 * 1024, options.max_body});
      c->id = next_conn++;
      c->sock = std::move(a.socket);
      c->idle_since = Clock::now();
      c->interest = platform::want_read | platform::want_hangup;
      if (!poller.add(c->sock, c->id, c->interest)) continue;
      conns.emplace(c->id, std::move(c));
    }
  }

  Conn* find(uint64_t id) {
    auto it = conns.find(id);
    return it == conns.end() ? nullptr : it->second.get();
  }

  void destroy(uint64_t id) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    if (c.exchange) c.exchange->client_left();  // cancels the Job: the slot comes free at the next step
    poller.remove(c.sock);
    conns.erase(it);  // closes the socket
  }

  void update_events(Conn& c) {
    // Busy: only a hang-up is watched for.  Reading: input while the answers already queued are not
    // too many (a client that pipelines requests but reads no answers stops being read).
    uint32_t want = platform::want_nothing;
    if (c.phase == Conn::Phase::busy) want |= platform::want_hangup;
    if ((c.phase == Conn::Phase::reading && c.out.size() < kMaxQueuedOutput) || c.phase == Conn::Phase::draining)
      want |= platform::want_read;
    if (!c.out.empty()) want |= platform::want_write;
    if (want == c.interest) return;
    poller.modify(c.sock, c.id, want);
    c.interest = want;
  }

  void on_event(const platform::PollEvent& ev) {
    const uint64_t id = ev.tag;
    Conn* c = find(id);
    if (!c) return;  // closed earlier in this round
    if (ev.error) return destroy(id);
    if (ev.writable && !flush(*c)) return;  // flush destroys on error
    if (ev.readable || ev.hangup) {
      if (c->phase == Conn::Phase::busy || c->phase == Conn::Phase::closing) {
        // Not reading now: a hang-up means the client left (a non-streamed request's too).
        if (ev.hangup) return destroy(id);
        return update_events(*c);
      }
      if (!read_input(*c)) return;
    }
    if ((c = find(id))) update_events(*c);
  }

  // false: the connection was destroyed.
  bool read_input(Conn& c) {
    const uint64_t id = c.id;
    char buf[16384];
    size_t total = 0;
    bool eof = false;
    while (total < kReadPerEvent) {
      const platform::IoResult r = platform::recv_some(c.sock, buf, sizeof buf);
      if (r.status == IoStatus::ok) {
        total += r.bytes;
        if (c.phase == Conn::Phase::draining)
          c.drained += r.bytes;
        else
          c.in.append(buf, r.bytes);
        continue;
      }
      if (r.status == IoStatus::closed)
        eof = true;
      else if (r.status == IoStatus::error) {
        destroy(c.id);
        return false;
      }
      break;
    }
    if (c.phase == Conn::Phase::draining) {
      if (eof || c.drained > kDrainBytes) {
        destroy(c.id);
        return false;
      }
      return true;
    }
    if (total) process_input(c);
    if (!find(id)) return false;
    // The end of the input with no request being answered: the client is done sending; answers
    // already queued are still written.  (With a request being answered, the hang-up counts as
    // leaving: see on_event.)
    if (eof && c.phase == Conn::Phase::reading) {
      if (c.out.empty()) {
        destroy(id);
        return false;
      }
      c.phase = Conn::Phase::closing;
      return flush(c);
    }
    return true;
  }

  void process_input(Conn& c) {
    while (c.phase == Conn::Phase::reading && !c.in.empty() && c.out.size() < kMaxQueuedOutput) {
      if (!c.request_started) {
        c.request_started = true;
        c.request_start = Clock::now();
      }
      const RequestReader::State st = c.reader.feed(c.in);
      if (c.reader.take_continue()) c.out += "HTTP/1.1 100 Continue\r\n\r\n";
      if (st == RequestReader::State::failed) {
        const HttpRequest& req = c.reader.request();
        handler.answered(req.path, c.reader.failure().status);
        respond_and_close(c, error_response(c.reader.failure()));
        return;
      }
      if (st != RequestReader::State::done) break;
      HttpRequest req = std::move(c.reader.request());
      c.reader.reset();
      c.request_started = false;
      dispatch(c, std::move(req));
    }
    if (!flush(c)) return;
  }

  void respond_and_close(Conn& c, const HttpResponse& r) {
    c.out += serialize(r, false);
    c.phase = Conn::Phase::closing;
    flush(c);
  }

  void dispatch(Conn& c, HttpRequest req) {
    c.keep_alive = req.keep_alive && !stopping && !draining;
    std::optional<HttpResponse> r;
    if (draining) r = draining_response(req, count_in_flight());
    if (!r) r = handler.quick(req);
    if (r) {
      handler.answered(req.path, r->status);
      c.out += serialize(*r, c.keep_alive);
      if (!c.keep_alive) c.phase = Conn::Phase::closing;
      c.idle_since = Clock::now();
      return;
    }
    const uint64_t id = c.id;
    auto ex = std::make_shared<Exchange>(
        std::move(req), [this, id](std::string bytes, bool last) { post(id, std::move(bytes), last); },
        [this](std::string_view path, int status) { handler.answered(path, status); });
    if (!workers.try_submit([this, ex] { handler.respond(*ex); })) {
      const HttpResponse busy = error_response({503,
                                                "every request thread is busy and their queue is full: retry "
                                                "later (or start the server with a larger --threads)",
                                                "server_busy", "", "server_busy"});
      handler.answered(ex->request().path, busy.status);
      c.out += serialize(busy, c.keep_alive);
      if (!c.keep_alive) c.phase = Conn::Phase::closing;
      return;
    }
    c.exchange = std::move(ex);
    c.phase = Conn::Phase::busy;
  }

  void deliver_posted() {
    std::vector<Posted> batch;
    {
      std::lock_guard lock(posted_mu);
      batch.swap(posted);
    }
    for (Posted& p : batch) {
      Conn* c = find(p.conn);
      if (!c || c->phase != Conn::Phase::busy) continue;  // the client left meanwhile
      c->out += p.bytes;
      if (p.last) {
        c->exchange.reset();
        c->idle_since = Clock::now();
        c->phase = c->keep_alive ? Conn::Phase::reading : Conn::Phase::closing;
      }
      if (!flush(*c)) continue;
      // A pipelined request that arrived while this one was answered.
      if (c->phase == Conn::Phase::reading && !c->in.empty()) process_input(*c);
      if ((c = find(p.conn))) update_events(*c);
    }
  }

  // Writes what the socket takes.  false: the connection was destroyed.
  bool flush(Conn& c) {
    // Not waiting for the socket yet: a stall, if any, starts now.
    if (!c.out.empty() && !(c.interest & platform::want_write)) c.write_stalled_since = Clock::now();
    while (!c.out.empty()) {
      const platform::IoResult r = platform::send_some(c.sock, c.out.data(), c.out.size());
      if (r.status == IoStatus::ok && r.bytes > 0) {
        c.out.erase(0, r.bytes);
        c.write_stalled_since = Clock::now();
        continue;
      }
      if (r.status == IoStatus::ok || r.status == IoStatus::would_block) break;
      destroy(c.id);
      return false;
    }
    if (c.out.empty() && c.phase == Conn::Phase::closing) {
      platform::shutdown_write(c.sock);
      c.phase = Conn::Phase::draining;
      c.drain_until = Clock::now() + kDrainTime;
    }
    update_events(c);
    return true;
  }

  void check_deadlines(Clock::time_point now) {
    if (listener_paused && now >= listener_resume) {
      poller.add(listener, kListenerTag, platform::want_read);
      listener_paused = false;
    }
    const auto request_limit = std::chrono::seconds(options.request_timeout_s);
    const auto idle_limit = std::chrono::seconds(options.idle_timeout_s);
    const auto write_limit = std::chrono::seconds(options.write_timeout_s);
    std::vector<uint64_t> drop;
    std::vector<Conn*> late;
    size_t answering_now = 0;
    for (auto& [id, cp] : conns) {
      Conn& c = *cp;
      answering_now += answering(c);
      if (!c.out.empty() && now - c.write_stalled_since > write_limit)
        drop.push_back(id);
      else if (c.phase == Conn::Phase::draining && now > c.drain_until)
        drop.push_back(id);
      else if (c.phase == Conn::Phase::reading && c.request_started && now - c.request_start > request_limit)
        late.push_back(&c);
      else if (c.phase == Conn::Phase::reading && !c.request_started && c.out.empty() &&
               now - c.idle_since > idle_limit)
        drop.push_back(id);
    }
    in_flight = answering_now;
    for (uint64_t id : drop) destroy(id);
    for (Conn* c : late) {
      handler.answered(c->reader.request().path, 408);
      respond_and_close(*c, error_response({408,
                                            "the request did not arrive within " +
                                                std::to_string(options.request_timeout_s) + " s",
                                            "invalid_request_error", "", "request_timeout"}));
    }
  }
};

HttpServer::HttpServer(HttpHandler& handler, const HttpOptions& options)
    : impl_(std::make_unique<Impl>(handler, options)) {}

HttpServer::~HttpServer() = default;

int HttpServer::bind() { return impl_->bind_listener(); }

void HttpServer::listen() { impl_->run(); }

void HttpServer::stop() {
  impl_->stopping = true;
  impl_->wake();
}

void HttpServer::drain() {
  impl_->drain_asked = true;
  impl_->wake();
}

size_t HttpServer::in_flight() const { return impl_->in_flight; }

}  // namespace reach::server
