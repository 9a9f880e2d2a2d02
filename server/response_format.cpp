#include "server/response_format.hpp"

#include "base/error.hpp"
#include "server/http_error.hpp"

namespace reach::server {

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError{400, message, "invalid_request_error", param, ""};
}

}  // namespace

std::shared_ptr<const JsonGrammar> parse_response_format(const nlohmann::json& value, const std::string& body_text) {
  if (!value.is_object()) bad("response_format", "'response_format' must be an object like {\"type\": \"json_object\"}");
  if (!value.contains("type") || !value["type"].is_string())
    bad("response_format.type", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  const std::string type = value["type"].get<std::string>();
  if (type == "text") return nullptr;
  // An extension: "whitespace": "compact" (the default: one space after ':' and ',') or "pretty".
  JsonWhitespace ws = JsonWhitespace::compact;
  if (value.contains("whitespace")) {
    if (!value["whitespace"].is_string())
      bad("response_format.whitespace", "'response_format.whitespace' must be \"compact\" or \"pretty\"");
    try {
      ws = json_whitespace_from_name(value["whitespace"].get<std::string>());
    } catch (const Error& e) {
      bad("response_format.whitespace", std::string(e.what()) + " (in response_format.whitespace)");
    }
  }
  if (type == "json_object") return JsonGrammar::any_object(ws);
  if (type != "json_schema")
    bad("response_format.type", "response_format type '" + type + "' is not supported: use \"text\", "
                                "\"json_object\" or \"json_schema\"");
  const nlohmann::json& js = value.contains("json_schema") ? value["json_schema"] : nlohmann::json();
  if (!js.is_object())
    bad("response_format.json_schema", "'response_format.json_schema' must be an object {\"name\": ..., \"schema\": {...}}");
  if (js.contains("name") && !js["name"].is_string())
    bad("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
  if (js.contains("strict") && !js["strict"].is_boolean() && !js["strict"].is_null())
    bad("response_format.json_schema.strict", "'response_format.json_schema.strict' must be true or false");
  if (!js.contains("schema"))
    bad("response_format.json_schema.schema", "'response_format.json_schema.schema' is required: the JSON schema "
                                              "the reply must follow");
  const std::string param = "response_format.json_schema.schema";
  try {
    // The body already passed the bounded parse: this second, ordered one cannot fail or grow past it.
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body_text);
    return JsonGrammar::from_schema(ordered["response_format"]["json_schema"]["schema"], ws);
  } catch (const Error& e) {
    bad(param, std::string(e.what()) + " (in " + param + ")");
  }
}

}  // namespace reach::server
