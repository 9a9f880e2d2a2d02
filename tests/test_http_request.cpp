// RequestReader (server/http_request.hpp): requests fed in any split parse to what was sent, and every
// limit answers with its status before more than the limit is held.  The references are the bytes the
// tests build themselves: the body that was framed (Content-Length, chunked) or compressed (zlib's own
// compress2 / gzip writer), and the HTTP status RFC 9110 assigns to each refusal.
#include <zlib.h>

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "server/http_request.hpp"

using reach::server::HttpRequest;
using reach::server::RequestLimits;
using reach::server::RequestReader;
using State = RequestReader::State;

namespace {

// Feeds `wire` in pieces of the given sizes (cycled); returns the final state and what is left over.
State feed_in_pieces(RequestReader& r, const std::string& wire, const std::vector<size_t>& sizes, std::string& in) {
  State st = State::head;
  size_t pos = 0, k = 0;
  while (pos < wire.size() && st != State::done && st != State::failed) {
    const size_t n = std::min(sizes[k++ % sizes.size()], wire.size() - pos);
    in.append(wire, pos, n);
    pos += n;
    st = r.feed(in);
  }
  in.append(wire, pos, std::string::npos);  // what the reader was not given: a pipelined rest
  return st;
}

std::string post(const std::string& headers, const std::string& body) {
  return "POST /v1/completions?x=1 HTTP/1.1\r\nHost: h\r\n" + headers + "\r\n" + body;
}

std::string chunked(const std::string& body, size_t piece) {
  std::string out;
  for (size_t i = 0; i < body.size(); i += piece) {
    const std::string part = body.substr(i, piece);
    char size[32];
    std::snprintf(size, sizeof size, "%zX;ext=1\r\n", part.size());
    out += size + part + "\r\n";
  }
  return out + "0\r\nTrailer-A: x\r\n\r\n";
}

// gzip (RFC 1952) by zlib's deflate with the gzip wrapper.
std::string gzip(const std::string& data) {
  z_stream s{};
  REQUIRE(deflateInit2(&s, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&s, uLong(data.size())) + 64, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  s.avail_in = uInt(data.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = uInt(out.size());
  REQUIRE(deflate(&s, Z_FINISH) == Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

// HTTP's "deflate": the zlib format (RFC 1950), as compress2 writes it.
std::string zlib_deflate(const std::string& data) {
  uLongf n = compressBound(uLong(data.size()));
  std::string out(n, '\0');
  REQUIRE(compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(data.data()),
                    uLong(data.size()), 9) == Z_OK);
  out.resize(n);
  return out;
}

std::string text_body(size_t n) {
  std::mt19937 rng(7);
  std::string s;
  for (size_t i = 0; i < n; ++i) s += char('a' + rng() % 26);
  return s;
}

}  // namespace

TEST_CASE("a request parses to what was sent, whatever the pieces it arrives in") {
  const std::string body = text_body(3000);
  const std::vector<std::pair<std::string, std::string>> framings = {
      {"Content-Length: 3000\r\n", body},
      {"Transfer-Encoding: chunked\r\n", chunked(body, 700)},
      {"Content-Encoding: gzip\r\nContent-Length: " + std::to_string(gzip(body).size()) + "\r\n", gzip(body)},
      {"Content-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n", chunked(zlib_deflate(body), 100)},
  };
  for (const auto& [headers, payload] : framings) {
    const std::string wire = post(headers, payload) + "GET /health HTTP/1.1\r\n\r\n";
    for (const std::vector<size_t>& sizes : std::vector<std::vector<size_t>>{{1}, {7, 1, 64}, {wire.size()}}) {
      CAPTURE(headers);
      CAPTURE(sizes[0]);
      RequestReader r(RequestLimits{});
      std::string in;
      REQUIRE(feed_in_pieces(r, wire, sizes, in) == State::done);
      const HttpRequest& req = r.request();
      CHECK(req.method == "POST");
      CHECK(req.path == "/v1/completions");
      CHECK(req.target == "/v1/completions?x=1");
      CHECK(req.keep_alive);
      CHECK(req.body == body);
      CHECK(in == "GET /health HTTP/1.1\r\n\r\n");  // the pipelined next request is left alone
      r.reset();
      REQUIRE(r.feed(in) == State::done);
      CHECK(r.request().path == "/health");
      CHECK(in.empty());
    }
  }
}

TEST_CASE("the body limit: exactly max_body passes, one byte more is 413, decoded or not") {
  RequestLimits limits;
  limits.max_body = 4096;
  for (size_t n : {size_t(4096), size_t(4097)}) {
    const std::string body = text_body(n);
    const int want = n <= limits.max_body ? 0 : 413;
    for (const std::string& wire :
         {post("Content-Length: " + std::to_string(n) + "\r\n", body),
          post("Transfer-Encoding: chunked\r\n", chunked(body, 1000)),
          post("Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", chunked(gzip(body), 50))}) {
      RequestReader r(limits);
      std::string in;
      const State st = feed_in_pieces(r, wire, {333}, in);
      CHECK(r.request().body.size() <= limits.max_body);
      if (want == 0)
        CHECK(st == State::done);
      else
        CHECK((st == State::failed && r.failure().status == 413));
    }
  }
}

TEST_CASE("a gzip bomb stops at the limit, not after inflating") {
  RequestLimits limits;
  limits.max_body = 1 << 20;
  const std::string bomb = gzip(std::string(64 << 20, ' '));
  CHECK(bomb.size() < limits.max_body / 8);
  RequestReader r(limits);
  std::string in = post("Content-Encoding: gzip\r\nContent-Length: " + std::to_string(bomb.size()) + "\r\n", bomb);
  CHECK(r.feed(in) == State::failed);
  CHECK(r.failure().status == 413);
  CHECK(r.request().body.size() <= limits.max_body);
}

TEST_CASE("refusals carry the status RFC 9110 gives them") {
  struct Case {
    const char* what;
    std::string wire;
    int status;
  };
  const std::vector<Case> cases = {
      {"a head past 16 KiB", "GET / HTTP/1.1\r\nX: " + std::string(17000, 'a') + "\r\n\r\n", 431},
      {"a head past 16 KiB, never ended", "GET / HTTP/1.1\r\nX: " + std::string(17000, 'a'), 431},
      {"Content-Length past the limit", post("Content-Length: 99999999999\r\n", ""), 413},
      {"a chunk size past the limit", post("Transfer-Encoding: chunked\r\n", "FFFFFFFFFF\r\n"), 413},
      {"both framings (smuggling)", post("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", "abc"), 400},
      {"two different lengths", post("Content-Length: 3\r\nContent-Length: 4\r\n", "abcd"), 400},
      {"a length that is not a number", post("Content-Length: 3x\r\n", "abc"), 400},
      {"zstd", post("Content-Encoding: zstd\r\nContent-Length: 3\r\n", "abc"), 415},
      {"gzip, gzip", post("Content-Encoding: gzip, gzip\r\nContent-Length: 3\r\n", "abc"), 415},
      {"a transfer coding other than chunked", post("Transfer-Encoding: gzip\r\n", ""), 501},
      {"HTTP/2.0", "GET / HTTP/2.0\r\n\r\n", 505},
      {"no version", "GET /\r\n\r\n", 400},
      {"a folded header", "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 400},
      {"a header without a colon", "GET / HTTP/1.1\r\nAb\r\n\r\n", 400},
      {"a chunk size that is not hex", post("Transfer-Encoding: chunked\r\n", "zz\r\n"), 400},
      {"a chunk without its CRLF", post("Transfer-Encoding: chunked\r\n", "3\r\nabcXY"), 400},
      {"corrupt gzip", post("Content-Encoding: gzip\r\nContent-Length: 5\r\n", "\x1f\x8bxyz"), 400},
      {"truncated gzip", post("Content-Encoding: gzip\r\nContent-Length: 10\r\n", gzip(text_body(100)).substr(0, 10)),
       400},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    RequestReader r(RequestLimits{});
    std::string in = c.wire;
    CHECK(r.feed(in) == State::failed);
    CHECK(r.failure().status == c.status);
    CHECK(!r.failure().message.empty());
  }
}

TEST_CASE("keep-alive by version and Connection; Expect: 100-continue once, and only before the body") {
  auto parse = [](const std::string& wire) {
    RequestReader r(RequestLimits{});
    std::string in = wire;
    REQUIRE(r.feed(in) == State::done);
    return r.request().keep_alive;
  };
  CHECK(parse("GET / HTTP/1.1\r\n\r\n"));
  CHECK_FALSE(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
  CHECK_FALSE(parse("GET / HTTP/1.0\r\n\r\n"));
  CHECK_FALSE(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));  // 1.0 keep-alive is not served
  CHECK_FALSE(parse("GET / HTTP/1.1\r\nConnection: TE, close\r\n\r\n"));

  RequestReader r(RequestLimits{});
  std::string in = post("Expect: 100-continue\r\nContent-Length: 3\r\n", "");
  CHECK(r.feed(in) == State::body);
  CHECK(r.take_continue());
  CHECK_FALSE(r.take_continue());
  in = "abc";
  CHECK(r.feed(in) == State::done);
  CHECK(r.request().body == "abc");

  RequestReader sent_anyway(RequestLimits{});
  in = post("Expect: 100-continue\r\nContent-Length: 3\r\n", "abc");
  CHECK(sent_anyway.feed(in) == State::done);
  CHECK_FALSE(sent_anyway.take_continue());
}
