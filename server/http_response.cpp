#include "server/http_response.hpp"

#include <cstdio>

namespace reach::server {

HttpResponse json_response(const nlohmann::json& j, int status) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(j);
  return r;
}

HttpResponse error_response(const ApiError& e) {
  HttpResponse r = json_response(error_json(e), e.status);
  if (e.status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

namespace {
std::string head(int status, const std::string& content_type, const HeaderList& headers, bool keep_alive) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  return h;
}
}  // namespace

std::string serialize(const HttpResponse& r, bool keep_alive) {
  std::string s = head(r.status, r.content_type, r.headers, keep_alive);
  s += "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n";
  s += r.body;
  return s;
}

std::string stream_head(int status, const std::string& content_type, const HeaderList& headers, bool keep_alive,
                        bool chunked) {
  if (!chunked) return head(status, content_type, headers, false) + "\r\n";
  return head(status, content_type, headers, keep_alive) + "Transfer-Encoding: chunked\r\n\r\n";
}

std::string chunk(std::string_view data) {
  if (data.empty()) return {};  // an empty chunk would end the body
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string s = size;
  s += data;
  s += "\r\n";
  return s;
}

}  // namespace reach::server
