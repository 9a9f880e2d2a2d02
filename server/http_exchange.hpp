#pragma once
// One request and its response, shared between the I/O thread (which owns the connection) and the
// worker that produces the answer.  The worker hands response bytes over through `post` (the I/O
// thread writes them); the I/O thread reports a client that left, which runs the worker's cancel
// callback (the OpenAI routes cancel the request's Job, so that its slot comes free at the
// scheduler's next step), and which the worker sees as gone().
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "server/http_request.hpp"
#include "server/http_response.hpp"

namespace reach::server {

class Exchange {
 public:
  // Hands bytes to the I/O thread; last: the response is complete.  Never blocks.
  using Post = std::function<void(std::string bytes, bool last)>;
  // Told the status of the answer when it starts (for the request counters).
  using Answered = std::function<void(std::string_view path, int status)>;

  Exchange(HttpRequest request, Post post, Answered answered)
      : request_(std::move(request)), post_(std::move(post)), answered_(std::move(answered)) {}

  const HttpRequest& request() const { return request_; }

  void reply(const HttpResponse& r);
  void start_stream(int status, const std::string& content_type, const HeaderList& headers);
  void send_chunk(std::string_view data);
  void end_stream();

  // The client closed its connection, or the server is stopping: nothing more will be sent.
  bool gone() const { return gone_; }
  // Runs `cancel` when the client leaves (at once if it already has), once.
  void on_gone(std::function<void()> cancel);
  // The I/O thread: the connection is closed.
  void client_left();
  // The I/O thread, when the server starts draining: a response not yet begun says "Connection: close"
  // (the connection closes after it whatever the client asked).
  void close_after() { close_after_ = true; }

 private:
  // HTTP/1.0 has no chunked coding: its streams end when the connection closes.
  bool chunked() const { return request_.minor_version >= 1; }
  bool keep_alive() const { return request_.keep_alive && !close_after_; }
  HttpRequest request_;
  Post post_;
  Answered answered_;
  std::atomic<bool> gone_{false};
  std::atomic<bool> close_after_{false};
  std::mutex mu_;
  std::function<void()> cancel_;
};

}  // namespace reach::server
