// tools, tool_choice and parallel_tool_calls (see tool_request.hpp).
#include "server/tool_request.hpp"

#include <algorithm>
#include <cctype>

#include "base/error.hpp"
#include "server/http_error.hpp"

namespace reach::server {

namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError{400, message, "invalid_request_error", param, ""};
}

bool present(const ojson& o, const char* key) { return o.is_object() && o.contains(key) && !o[key].is_null(); }

// OpenAI's rule for function names: letters, digits, '_' and '-', 64 at most.
bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

// The shape of a JSON schema object, checked where a tool is declared (the keywords themselves are
// the grammar's business, when a call is forced): "type" a string or list of strings, "properties" an
// object of schema objects, "required" a list of strings, "items" a schema object.
void check_schema(const ojson& s, const std::string& at) {
  if (!s.is_object()) bad(at, "'" + at + "' must be a JSON schema object, not " + s.type_name());
  if (s.contains("type")) {
    const ojson& t = s["type"];
    const bool ok = t.is_string() ||
                    (t.is_array() && std::all_of(t.begin(), t.end(), [](const ojson& x) { return x.is_string(); }));
    if (!ok) bad(at + ".type", "'" + at + ".type' must be a type name or a list of them");
  }
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) bad(at + ".properties", "'" + at + ".properties' must be an object");
    for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it)
      check_schema(it.value(), at + ".properties." + it.key());
  }
  if (s.contains("required")) {
    const ojson& r = s["required"];
    if (!r.is_array() || !std::all_of(r.begin(), r.end(), [](const ojson& x) { return x.is_string(); }))
      bad(at + ".required", "'" + at + ".required' must be a list of property names");
  }
  if (s.contains("items") && !s["items"].is_boolean()) check_schema(s["items"], at + ".items");
}

}  // namespace

ToolRequest parse_tool_request(const ojson& body) {
  ToolRequest t;
  if (present(body, "tools")) {
    const ojson& tools = body["tools"];
    if (!tools.is_array()) bad("tools", std::string("'tools' must be an array, not ") + tools.type_name());
    for (size_t i = 0; i < tools.size(); ++i) {
      const std::string p = "tools[" + std::to_string(i) + "]";
      const ojson& tool = tools[i];
      if (!tool.is_object()) bad(p, "'" + p + "' must be an object {\"type\": \"function\", \"function\": {...}}");
      if (!tool.contains("type") || tool["type"] != "function")
        bad(p + ".type", "'" + p + ".type' must be \"function\" (the only tool type)");
      if (!present(tool, "function") || !tool["function"].is_object())
        bad(p + ".function", "'" + p + ".function' must be an object {\"name\", \"description\", \"parameters\"}");
      const ojson& fn = tool["function"];
      if (!present(fn, "name") || !fn["name"].is_string() || !valid_name(fn["name"].get<std::string>()))
        bad(p + ".function.name",
            "'" + p + ".function.name' must be a name of letters, digits, '_' and '-' (64 at most)");
      const std::string name = fn["name"].get<std::string>();
      for (const ChatTool& other : t.tools)
        if (other.name == name) bad(p + ".function.name", "two tools are named '" + name + "'");
      if (present(fn, "description") && !fn["description"].is_string())
        bad(p + ".function.description", "'" + p + ".function.description' must be a string");
      if (present(fn, "strict") && !fn["strict"].is_boolean())
        bad(p + ".function.strict", "'" + p + ".function.strict' must be true or false");
      ojson schema = ojson::object();
      if (present(fn, "parameters")) {
        check_schema(fn["parameters"], p + ".function.parameters");
        schema = fn["parameters"];
      }
      t.tools.push_back({name, tool.dump()});
      t.schemas.push_back(std::move(schema));
    }
  }
  if (present(body, "parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean())
      bad("parallel_tool_calls", "'parallel_tool_calls' must be true or false");
    t.parallel = body["parallel_tool_calls"].get<bool>();
  }
  if (present(body, "tool_choice")) {
    const ojson& c = body["tool_choice"];
    if (c.is_string()) {
      const std::string s = c.get<std::string>();
      if (s == "auto")
        t.choice = ToolChoice::automatic;
      else if (s == "none")
        t.choice = ToolChoice::none;
      else if (s == "required")
        t.choice = ToolChoice::required;
      else
        bad("tool_choice",
            "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
            "\"function\": {\"name\": ...}}, not \"" +
                s.substr(0, 64) + "\"");
    } else if (c.is_object()) {
      if (!c.contains("type") || c["type"] != "function")
        bad("tool_choice.type", "'tool_choice.type' must be \"function\"");
      if (!present(c, "function") || !present(c["function"], "name") || !c["function"]["name"].is_string())
        bad("tool_choice.function.name", "'tool_choice.function.name' must name one of the tools");
      t.choice = ToolChoice::function;
      t.forced_name = c["function"]["name"].get<std::string>();
      const bool known =
          std::any_of(t.tools.begin(), t.tools.end(), [&](const ChatTool& x) { return x.name == t.forced_name; });
      if (!known)
        bad("tool_choice.function.name",
            "'tool_choice' names the function '" + t.forced_name.substr(0, 64) + "', which is not among the tools");
    } else {
      bad("tool_choice", std::string("'tool_choice' must be a string or an object, not ") + c.type_name());
    }
    if (t.choice == ToolChoice::required && t.tools.empty())
      bad("tool_choice", "'tool_choice' is \"required\" but the request has no tools");
  }
  return t;
}

serve::ToolPlan tool_plan(const ToolRequest& t, const serve::ToolSyntax& syntax, const Tokenizer& tokenizer) {
  std::vector<std::string> names;
  for (const ChatTool& x : t.tools) names.push_back(x.name);
  const serve::ToolMode mode = t.choice == ToolChoice::function ? serve::ToolMode::function
                               : t.forced()                     ? serve::ToolMode::required
                                                                : serve::ToolMode::automatic;
  const size_t function =
      size_t(std::find(names.begin(), names.end(), t.forced_name) - names.begin());   // ToolMode::function's
  try {
    return serve::plan_tool_calls(syntax, names, t.schemas, mode, function, tokenizer);
  } catch (const serve::ToolSchemaError& e) {
    const std::string param =
        e.tool < t.tools.size() ? "tools[" + std::to_string(e.tool) + "].function.parameters" : std::string("tools");
    bad(param, std::string(e.what()) + " (in " + param + ": a forced tool call follows its parameters schema)");
  }
}

}  // namespace reach::server
