#pragma once
// The HTTP side of `reach serve`: one I/O thread owns every connection (base/platform/poller.hpp)
// and enforces the limits where the bytes arrive; worker threads answer the requests the handler
// does not answer at once (HttpHandler: the routes, e.g. openai_routes.hpp) and hand their response
// bytes back to the I/O thread.  The server knows no route.
#include <cstddef>
#include <memory>
#include <string>

#include "server/http_handler.hpp"

namespace reach::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;            // 0: any free port (printed)
  size_t max_body = 1 << 20;  // bytes, after Content-Encoding is undone; larger bodies get 413
  size_t threads = 16;        // requests served on workers at once; up to worker_backlog more wait, beyond: 503
  size_t worker_backlog = 64;
  size_t max_connections = 1024;  // open connections; beyond, new ones are closed at once
  int request_timeout_s = 10;     // for a whole request (head and body) to arrive from its first byte: 408
  int idle_timeout_s = 5;         // a keep-alive connection with no request in it is closed
  int write_timeout_s = 30;       // a client that takes none of its response for this long is dropped
};

class HttpServer {
 public:
  // `handler` answers every request; it outlives the server.
  HttpServer(HttpHandler& handler, const HttpOptions& options);
  ~HttpServer();
  // Binds and listens; returns the port (useful with port 0).  Throws Error(io) when the address is taken.
  int bind();
  void listen();  // serves until stop()
  // Any thread (a signal handler's thread): listen() closes every connection and returns within about
  // 0.1 s plus the time a worker takes to notice (bounded waits, well under a second).
  void stop();
  // Any thread: shutdown that drains (server/drain.hpp).  New requests get 503 with Retry-After and
  // /health says "draining"; idle and half-sent connections close at once; listen() returns once every
  // request in flight has been answered and its answer written.  stop() still ends it at once.
  void drain();
  // Requests being answered (read by a worker, or their answer still being written); updated by the I/O
  // thread every 0.1 s.
  size_t in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reach::server
