#include "server/drain.hpp"

namespace reach::server {

HttpResponse draining_refusal() {
  return error_response({503, "the server is shutting down and takes no new requests: retry later (another "
                              "instance may answer)",
                         "server_busy", "", "server_shutting_down"});
}

std::optional<HttpResponse> draining_response(const HttpRequest& req, size_t in_flight) {
  if (req.path == "/metrics") return std::nullopt;
  if (req.path == "/health" && req.method == "GET") {
    HttpResponse r = json_response({{"status", "draining"}, {"in_flight", in_flight}}, 503);
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  return draining_refusal();
}

}  // namespace reach::server
