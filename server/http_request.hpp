#pragma once
// An HTTP/1.1 request read incrementally from the bytes a connection delivers, every limit enforced
// as the bytes arrive: the head (request line and headers) is capped, the body is framed by
// Content-Length or chunked transfer coding, and a gzip or deflate Content-Encoding is undone with
// the decoded size capped.  No I/O here: the reader is fed whatever arrived.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http_inflate.hpp"
#include "server/http_error.hpp"

namespace reach::server {

struct HttpRequest {
  std::string method, target, path;                          // path: the target without its query
  int minor_version = 1;                                     // HTTP/1.x
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;                                          // decoded
  bool keep_alive = true;

  // The first header of that (lower-case) name, or null.
  const std::string* header(std::string_view name) const;
};

struct RequestLimits {
  size_t max_head = 16 * 1024;  // request line + headers (and chunked trailers); beyond: 431
  size_t max_body = 1 << 20;    // decoded body, and the bytes on the wire that carry it; beyond: 413
};

class RequestReader {
 public:
  explicit RequestReader(RequestLimits limits) : limits_(limits) {}

  enum class State { head, body, done, failed };
  // Consumes what it can of `in` (erasing it) and says where the request stands.  On done the
  // bytes after the request (a pipelined next one) stay in `in`.
  State feed(std::string& in);
  State state() const { return state_; }
  // Whether the client waits for "100 Continue" before sending its body; true once per request.
  bool take_continue();
  HttpRequest& request() { return req_; }
  // The answer for a request that failed: its status and a message naming what was wrong.
  const ApiError& failure() const { return failure_; }
  // Ready for the next request on the same connection.
  void reset();

 private:
  State fail(int status, std::string message, std::string code = "");
  State parse_head(std::string_view head);
  State feed_body(std::string& in);
  bool append_body(std::string_view data);  // false: failed (too large or corrupt)

  enum class Framing { length, chunk_size, chunk_data, chunk_crlf, trailers };
  RequestLimits limits_;
  State state_ = State::head;
  HttpRequest req_;
  ApiError failure_;
  Framing framing_ = Framing::length;
  uint64_t remaining_ = 0;  // of the body (length) or of the current chunk
  size_t raw_bytes_ = 0;    // body bytes as sent (before decoding)
  size_t trailer_bytes_ = 0;
  bool expect_continue_ = false;
  std::unique_ptr<Inflater> inflater_;
};

// ASCII case-insensitive equality (header names and tokens).
bool iequals(std::string_view a, std::string_view b);
std::string_view trim(std::string_view s);

}  // namespace reach::server
