#include "server/http_request.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace reach::server {

namespace {

constexpr size_t kMaxHeaders = 100;
constexpr size_t kMaxChunkLine = 1024;  // hex size plus extensions

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (c <= 32 || c >= 127 || std::string_view("()<>@,;:\\\"/[]?={}").find(char(c)) != std::string_view::npos)
      return false;
  return true;
}

// A comma-separated header value holds `token` (Connection: keep-alive, Upgrade).
bool has_token(const std::string* value, std::string_view token) {
  if (!value) return false;
  std::string_view v = *value;
  while (!v.empty()) {
    const size_t comma = v.find(',');
    if (iequals(trim(v.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return &v;
  return nullptr;
}

void RequestReader::reset() {
  state_ = State::head;
  req_ = HttpRequest{};
  failure_ = ApiError{};
  framing_ = Framing::length;
  remaining_ = 0;
  raw_bytes_ = 0;
  trailer_bytes_ = 0;
  expect_continue_ = false;
  inflater_.reset();
}

bool RequestReader::take_continue() {
  const bool c = expect_continue_;
  expect_continue_ = false;
  return c;
}

RequestReader::State RequestReader::fail(int status, std::string message, std::string code) {
  failure_ = ApiError{status, std::move(message), "invalid_request_error", "", std::move(code)};
  return state_ = State::failed;
}

RequestReader::State RequestReader::feed(std::string& in) {
  if (state_ == State::head) {
    // Blank lines before a request line are allowed (RFC 9112 2.2).
    size_t skip = 0;
    while (skip + 1 < in.size() && in[skip] == '\r' && in[skip + 1] == '\n') skip += 2;
    if (skip) in.erase(0, skip);
    const size_t end = in.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (in.size() > limits_.max_head)
        return fail(431, "the request line and headers pass " + std::to_string(limits_.max_head) + " bytes",
                    "headers_too_large");
      return state_;
    }
    if (end + 4 > limits_.max_head)
      return fail(431, "the request line and headers pass " + std::to_string(limits_.max_head) + " bytes",
                  "headers_too_large");
    const std::string head = in.substr(0, end + 2);
    in.erase(0, end + 4);
    if (parse_head(head) == State::failed) return state_;
    if (state_ == State::body && expect_continue_ && !in.empty()) expect_continue_ = false;  // sent anyway
  }
  if (state_ == State::body) feed_body(in);
  return state_;
}

RequestReader::State RequestReader::parse_head(std::string_view head) {
  const size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1)
    return fail(400, "the request line is not 'METHOD TARGET HTTP/1.1'", "bad_request_line");
  req_.method = std::string(line.substr(0, sp1));
  req_.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(req_.method) || req_.target.empty() || req_.target.find(' ') != std::string::npos)
    return fail(400, "the request line is not 'METHOD TARGET HTTP/1.1'", "bad_request_line");
  if (version == "HTTP/1.1")
    req_.minor_version = 1;
  else if (version == "HTTP/1.0")
    req_.minor_version = 0;
  else
    return fail(505, "only HTTP/1.0 and HTTP/1.1 are served, not '" + std::string(version.substr(0, 16)) + "'",
                "http_version_not_supported");
  req_.path = req_.target.substr(0, req_.target.find('?'));

  std::string_view rest = head.substr(eol + 2);
  while (!rest.empty()) {
    const size_t e = rest.find("\r\n");
    const std::string_view h = rest.substr(0, e);
    rest.remove_prefix(e + 2);
    if (h.front() == ' ' || h.front() == '\t') return fail(400, "folded header lines are not accepted", "bad_header");
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || !is_token(h.substr(0, colon)))
      return fail(400, "a header line is not 'Name: value'", "bad_header");
    if (req_.headers.size() >= kMaxHeaders)
      return fail(431, "more than " + std::to_string(kMaxHeaders) + " headers", "headers_too_large");
    req_.headers.emplace_back(lower(h.substr(0, colon)), std::string(trim(h.substr(colon + 1))));
  }

  const std::string* connection = req_.header("connection");
  // HTTP/1.0 connections close after one answer (its keep-alive extension is not served: a streamed
  // answer to 1.0 ends by closing).
  req_.keep_alive = req_.minor_version == 1 && !has_token(connection, "close");

  // Content-Encoding: the body as sent is decoded before the limit applies.
  if (const std::string* ce = req_.header("content-encoding")) {
    const std::string_view enc = trim(*ce);
    if (iequals(enc, "gzip") || iequals(enc, "x-gzip"))
      inflater_ = std::make_unique<Inflater>(BodyEncoding::gzip, limits_.max_body);
    else if (iequals(enc, "deflate"))
      inflater_ = std::make_unique<Inflater>(BodyEncoding::deflate, limits_.max_body);
    else if (!enc.empty() && !iequals(enc, "identity"))
      return fail(415,
                  "Content-Encoding '" + std::string(enc.substr(0, 64)) +
                      "' is not supported: send the body as identity, gzip or deflate",
                  "unsupported_content_encoding");
  }

  const std::string* te = req_.header("transfer-encoding");
  const std::string* cl = req_.header("content-length");
  if (te) {
    if (!iequals(trim(*te), "chunked"))
      return fail(501,
                  "Transfer-Encoding '" + std::string(trim(*te).substr(0, 64)) +
                      "' is not supported: send Content-Length or 'Transfer-Encoding: chunked'",
                  "unsupported_transfer_encoding");
    // Both framings at once is how requests are smuggled past proxies: refuse rather than pick one.
    if (cl) return fail(400, "a request must not carry both Content-Length and Transfer-Encoding", "bad_framing");
    framing_ = Framing::chunk_size;
  } else if (cl) {
    for (const auto& [k, v] : req_.headers)
      if (k == "content-length" && v != *cl)
        return fail(400, "Content-Length is given twice, differently", "bad_framing");
    uint64_t n = 0;
    const auto [p, ec] = std::from_chars(cl->data(), cl->data() + cl->size(), n);
    if (cl->empty() || ec != std::errc() || p != cl->data() + cl->size())
      return fail(400, "Content-Length '" + cl->substr(0, 32) + "' is not a byte count", "bad_framing");
    if (n > limits_.max_body)
      return fail(413,
                  "the request body is " + std::to_string(n) + " bytes; this server takes at most " +
                      std::to_string(limits_.max_body) + " (see reach serve --max-body)",
                  "payload_too_large");
    framing_ = Framing::length;
    remaining_ = n;
    if (n == 0)
      return state_ = inflater_ ? fail(400, "an empty body cannot be " + *req_.header("content-encoding"), "bad_body")
                                : State::done;
  } else {
    // No body (GET, or a POST without one: the route says what is missing).
    return state_ = State::done;
  }
  const std::string* expect = req_.header("expect");
  expect_continue_ = expect && iequals(*expect, "100-continue");
  return state_ = State::body;
}

bool RequestReader::append_body(std::string_view data) {
  const std::string too_large = "the request body passes " + std::to_string(limits_.max_body) +
                                " bytes (after decoding); this server takes at most that (see reach serve --max-body)";
  raw_bytes_ += data.size();
  if (!inflater_) {
    if (req_.body.size() + data.size() > limits_.max_body) return fail(413, too_large, "payload_too_large"), false;
    req_.body.append(data);
    return true;
  }
  if (raw_bytes_ > limits_.max_body) return fail(413, too_large, "payload_too_large"), false;
  switch (inflater_->feed(data, req_.body)) {
    case Inflater::Result::ok: return true;
    case Inflater::Result::too_large: return fail(413, too_large, "payload_too_large"), false;
    case Inflater::Result::corrupt: break;
  }
  fail(400, "the body is not valid " + *req_.header("content-encoding") + " data", "bad_body");
  return false;
}

RequestReader::State RequestReader::feed_body(std::string& in) {
  size_t pos = 0;
  auto finish = [&]() {
    in.erase(0, pos);
    if (state_ == State::failed) return state_;
    if (inflater_ && !inflater_->finished())
      return fail(400, "the " + *req_.header("content-encoding") + " body is truncated", "bad_body");
    return state_ = State::done;
  };
  while (state_ == State::body) {
    switch (framing_) {
      case Framing::length: {
        const size_t n = size_t(std::min<uint64_t>(remaining_, in.size() - pos));
        if (n && !append_body(std::string_view(in).substr(pos, n))) break;
        pos += n;
        remaining_ -= n;
        if (remaining_ == 0) return finish();
        in.erase(0, pos);
        return state_;
      }
      case Framing::chunk_size: {
        const size_t e = in.find("\r\n", pos);
        if (e == std::string::npos) {
          if (in.size() - pos > kMaxChunkLine) return fail(400, "a chunk-size line is too long", "bad_chunk");
          in.erase(0, pos);
          return state_;
        }
        std::string_view line = std::string_view(in).substr(pos, e - pos);
        line = trim(line.substr(0, line.find(';')));
        uint64_t n = 0;
        const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), n, 16);
        if (line.empty() || ec != std::errc() || p != line.data() + line.size())
          return fail(400, "a chunk size is not a hexadecimal number", "bad_chunk");
        if (n > limits_.max_body)
          return fail(413,
                      "a body chunk of " + std::to_string(n) + " bytes passes the limit of " +
                          std::to_string(limits_.max_body) + " (see reach serve --max-body)",
                      "payload_too_large");
        pos = e + 2;
        remaining_ = n;
        framing_ = n == 0 ? Framing::trailers : Framing::chunk_data;
        break;
      }
      case Framing::chunk_data: {
        const size_t n = size_t(std::min<uint64_t>(remaining_, in.size() - pos));
        if (n && !append_body(std::string_view(in).substr(pos, n))) break;
        pos += n;
        remaining_ -= n;
        if (remaining_ > 0) {
          in.erase(0, pos);
          return state_;
        }
        framing_ = Framing::chunk_crlf;
        break;
      }
      case Framing::chunk_crlf: {
        if (in.size() - pos < 2) {
          in.erase(0, pos);
          return state_;
        }
        if (in.compare(pos, 2, "\r\n") != 0) return fail(400, "a chunk does not end with CRLF", "bad_chunk");
        pos += 2;
        framing_ = Framing::chunk_size;
        break;
      }
      case Framing::trailers: {
        const size_t e = in.find("\r\n", pos);
        if (e == std::string::npos) {
          if (trailer_bytes_ + in.size() - pos > limits_.max_head)
            return fail(431, "the chunked trailers are too long", "headers_too_large");
          in.erase(0, pos);
          return state_;
        }
        trailer_bytes_ += e + 2 - pos;
        if (trailer_bytes_ > limits_.max_head)
          return fail(431, "the chunked trailers are too long", "headers_too_large");
        const bool last = e == pos;
        pos = e + 2;
        if (last) return finish();
        break;
      }
    }
  }
  in.erase(0, std::min(pos, in.size()));
  return state_;
}

}  // namespace reach::server
