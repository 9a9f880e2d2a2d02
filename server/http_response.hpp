#pragma once
// HTTP/1.1 responses as bytes: whole ones (Content-Length) and the head and chunks of a streamed one
// (chunked transfer coding, for server-sent events).
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/http_error.hpp"

namespace reach::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;  // besides Content-Type, Content-Length and Connection
};

HttpResponse json_response(const nlohmann::json& j, int status = 200);
// The error body (http_error.hpp: error_json); a 503 says when to retry.
HttpResponse error_response(const ApiError& e);

const char* reason_phrase(int status);
// A whole response; keep_alive false adds "Connection: close".
std::string serialize(const HttpResponse& r, bool keep_alive);
// The head of a streamed response whose body follows in chunk()s and ends with last_chunk(); for an
// HTTP/1.0 client (chunked = false), one whose body is plain bytes ended by closing the connection.
std::string stream_head(int status, const std::string& content_type, const HeaderList& headers, bool keep_alive,
                        bool chunked = true);
std::string chunk(std::string_view data);
inline constexpr std::string_view last_chunk = "0\r\n\r\n";

}  // namespace reach::server
