#pragma once
// What the HTTP server serves: it reads requests and writes responses, and hands every request to a
// handler, which knows the routes (server/openai_routes.hpp: the OpenAI API).  The server knows none.
#include <optional>
#include <string_view>

#include "server/http_exchange.hpp"
#include "server/http_request.hpp"
#include "server/http_response.hpp"

namespace reach::server {

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // The I/O thread: the answer to a request that needs no long work (or is refused before it);
  // nullopt: the request goes to a worker thread's respond().  Must not block.
  virtual std::optional<HttpResponse> quick(const HttpRequest& req) = 0;
  // A worker thread: answers the request through `ex`.  Returns when the answer is sent, the client
  // is gone or the server stops.
  virtual void respond(Exchange& ex) = 0;
  // Every answer's status as it starts, those the server gives itself (408, 413, 503, ...) included:
  // for the handler's request counters.  Any thread.
  virtual void answered(std::string_view path, int status) = 0;
};

}  // namespace reach::server
