#pragma once
// The request fields of function calling on /v1/chat/completions: tools (type "function", with a JSON
// schema as "parameters"), tool_choice ("auto", "none", "required" or {"type": "function",
// "function": {"name": ...}}), parallel_tool_calls; and the prompt prefix and sampler constraint they
// ask for (serve::plan_tool_calls).
// Tool history in messages (assistant tool_calls, role "tool") is parsed with the messages
// (openai_api.cpp).
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/constrain/json_grammar.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/text/chat_template.hpp"

namespace reach::server {

enum class ToolChoice { automatic, none, required, function };

struct ToolRequest {
  std::vector<ChatTool> tools;                  // as the template writes them (keys in request order)
  std::vector<nlohmann::ordered_json> schemas;  // each tool's parameters ({} where it has none)
  ToolChoice choice = ToolChoice::automatic;
  std::string forced_name;  // ToolChoice::function
  bool parallel = true;

  bool active() const { return !tools.empty() && choice != ToolChoice::none; }
  bool forced() const { return choice == ToolChoice::required || choice == ToolChoice::function; }
};

// Reads tools, tool_choice and parallel_tool_calls from the body (`ordered`: the body parsed again with
// its keys in order).  Throws ApiError (400) naming the field: a tool that is not {"type":
// "function", "function": {"name", ...}}, a name used twice, parameters that are not a JSON schema
// object, a tool_choice that is not one of the forms or names no tool.
ToolRequest parse_tool_request(const nlohmann::ordered_json& ordered);

// The prompt's prefix and the sampler's constraint for the request's tools (serve::plan_tool_calls):
// the forced_call's object or the calls under "auto" follow the tools' schemas.  Throws ApiError (400)
// naming the tool whose schema uses a keyword the grammar does not support, where a forced call must
// follow it.
serve::ToolPlan tool_plan(const ToolRequest& t, const serve::ToolSyntax& syntax, const Tokenizer& tokenizer);

}  // namespace reach::server
