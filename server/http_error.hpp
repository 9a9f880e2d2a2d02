#pragma once
// The server's error answers: a status and a message naming what was wrong, sent as the body
// {"error": {"message", "type", "param", "code"}} (the OpenAI API's shape, which the transport's own
// answers, 408, 413, 503, ..., use too), and JSON text that never throws on invalid UTF-8.
#include <string>

#include <nlohmann/json.hpp>

namespace reach::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;   // the request field at fault; "" = null
  std::string code;    // "" = null
};

nlohmann::json error_json(const ApiError& e);

// JSON text, invalid UTF-8 replaced rather than thrown on.
std::string dump_json(const nlohmann::json& j);

}  // namespace reach::server
