#pragma once
// Shutdown that drains (SIGTERM): the server takes no new work while the requests in flight finish.
// HttpServer::drain() starts it; the I/O thread then
//   - answers every new request with drain_response(): 503 with Retry-After, GET /health a 503 whose
//     status is "draining" (load balancers and readiness probes take the instance out), /metrics as usual
//     (the last scrape sees the end); every answer closes its connection;
//   - closes idle keep-alive connections at once, and answers a request still arriving (a slow or
//     half-sent one) with the same 503 and closes it;
//   - lets the requests being answered run to their end (a stream ends with its finish_reason and
//     [DONE]; one cut by the deadline, with an error event and [DONE]), and returns from listen() once
//     none is left and every answer is written.
// The deadline is the caller's (reach serve --drain-timeout): it ends the jobs in flight with an error
// (Scheduler::stop), and HttpServer::stop() drops whatever is still open after that.
#include <cstddef>
#include <optional>

#include "server/http_request.hpp"
#include "server/http_response.hpp"

namespace reach::server {

// The 503 a request gets while the server drains (Retry-After: 1, for a retry that a load balancer
// sends to another instance).
HttpResponse draining_refusal();
// What the I/O thread answers a request that arrives while the server drains: GET /health, 503
// {"status": "draining", "in_flight": N} (requests still being answered); /metrics: nullopt (the usual
// route answers it); anything else draining_refusal().
std::optional<HttpResponse> draining_response(const HttpRequest& req, size_t in_flight);

}  // namespace reach::server
