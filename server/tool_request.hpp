#pragma once
// The request fields of function calling on /v1/chat/completions: tools (type "function", with a JSON
// schema as "parameters"), tool_choice ("auto", "none", "required" or {"type": "function",
// "function": {"name": ...}}), parallel_tool_calls; and the grammar a forced call follows.
// Tool history in messages (assistant tool_calls, role "tool") is parsed with the messages
// (openai_api.cpp).
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/constrain/json_grammar.hpp"
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

// A forced call's object as the sampler must write it, {"name": NAME, ARGUMENTS_KEY: {...}} (the
// template's key: "arguments", Llama 3.1's "parameters"): the
// arguments follow the named tool's parameters; under "required" with several tools, the name is one
// of theirs and the arguments any object (the grammar cannot choose a schema by a name it has not read
// yet).  Throws ApiError (400) naming the tool whose schema uses a keyword the grammar does not support.
// list: the call is written as a one-element array (Mistral's [TOOL_CALLS] [...]).
std::shared_ptr<const JsonGrammar> forced_call_grammar(const ToolRequest& t, const std::string& arguments_key,
                                                       bool list = false);

// Each tool's arguments grammar (its parameters; any object where it has none), for calls the sampler
// constrains by the name the model writes (ToolSyntax::call_forms).  strict: a schema the grammar
// cannot follow is a 400 naming the tool's parameters (a forced call); otherwise that tool's arguments
// are only held to be an object (tool_choice "auto", where the tools were accepted before calls were
// constrained).
std::vector<std::shared_ptr<const JsonGrammar>> argument_grammars(const ToolRequest& t, bool strict);

}  // namespace reach::server
