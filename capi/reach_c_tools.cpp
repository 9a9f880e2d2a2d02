// The C API (include/reach.h): function calling.  The tools (the OpenAI API's `tools` array) and the
// tool choice give the chat prompt (reach_chat_tokenize_tools), the session's constraint
// (reach_session_set_tools) and the reply's parsing into calls (reach_reply_set_tools,
// reach_reply_tool_calls_json), as `reach serve` does them (runtime/serve/tool_calls: plan_tool_calls,
// ToolCallStream).
#include "capi/capi_internal.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tool_json.hpp"

using namespace reach;
using namespace reach::capi;

namespace {

using ojson = nlohmann::ordered_json;

// The tools and the choice among them, read from the caller's JSON.
struct Tools {
  std::vector<ChatTool> tools;
  std::vector<std::string> names;
  std::vector<ojson> schemas;
  serve::ToolMode mode = serve::ToolMode::automatic;
  size_t function = 0;
  bool none = false;   // tool_choice "none": the tools are left out
};

Tools read_tools(const char* tools_json, const char* tool_choice) {
  Tools t;
  need(tools_json && *tools_json, REACH_ERROR_INVALID_ARGUMENT, "tools_json is NULL or empty");
  const ojson list = parse_tool_json(tools_json, "tools_json");
  need(list.is_array() && !list.empty(), REACH_ERROR_INVALID_ARGUMENT,
       "tools_json must be a non-empty array of {\"type\": \"function\", \"function\": {\"name\", \"description\", "
       "\"parameters\"}}");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = "tools_json[" + std::to_string(i) + "]";
    const ojson& tool = list[i];
    need(tool.is_object() && tool.value("type", "") == "function" && tool.contains("function") &&
             tool["function"].is_object(),
         REACH_ERROR_INVALID_ARGUMENT, at + " must be {\"type\": \"function\", \"function\": {...}}");
    const ojson& fn = tool["function"];
    need(fn.contains("name") && fn["name"].is_string() && !fn["name"].get<std::string>().empty(),
         REACH_ERROR_INVALID_ARGUMENT, at + ".function.name must be a non-empty string");
    const std::string name = fn["name"].get<std::string>();
    for (char c : name)
      need(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-', REACH_ERROR_INVALID_ARGUMENT,
           at + ".function.name '" + name.substr(0, 64) + "' must be letters, digits, '_' and '-'");
    need(std::find(t.names.begin(), t.names.end(), name) == t.names.end(), REACH_ERROR_INVALID_ARGUMENT,
         "two tools are named '" + name + "'");
    const ojson schema = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : ojson::object();
    need(schema.is_object(), REACH_ERROR_INVALID_ARGUMENT, at + ".function.parameters must be a JSON schema object");
    t.tools.push_back({name, tool.dump()});
    t.names.push_back(name);
    t.schemas.push_back(schema);
  }
  const std::string choice = tool_choice ? tool_choice : "auto";
  if (choice == "auto") {
    t.mode = serve::ToolMode::automatic;
  } else if (choice == "none") {
    t.none = true;
  } else if (choice == "required") {
    t.mode = serve::ToolMode::required;
  } else {
    const auto at = std::find(t.names.begin(), t.names.end(), choice);
    need(at != t.names.end(), REACH_ERROR_INVALID_ARGUMENT,
         "tool_choice '" + choice.substr(0, 64) + "' is not \"auto\", \"none\", \"required\" or one of the tools' names");
    t.mode = serve::ToolMode::function;
    t.function = size_t(at - t.names.begin());
  }
  return t;
}

const Tokenizer& tokenizer_of(const reach_model* m) {
  const Tokenizer* tk = m->model->tokenizer();
  need(tk != nullptr, REACH_ERROR_UNSUPPORTED,
       "the model was loaded without a tokenizer (require_tokenizer = 0 and no tokenizer.json): tool calls need "
       "its chat template and vocabulary");
  return *tk;
}

serve::ToolSyntax syntax_of(const ChatTemplate& t) {
  auto s = serve::ToolSyntax::for_template(t);
  need(s.has_value(), REACH_ERROR_UNSUPPORTED,
       std::string("this model's chat template (") + t.family_name() +
           ") has no tool calls reach renders: Qwen 2.5, Qwen3, Llama 3.1, Mistral v3, SmolLM3, Phi-4-mini and "
           "gpt-oss have");
  return *s;
}

serve::ToolPlan plan(const serve::ToolSyntax& s, const Tools& t, const Tokenizer& tk) {
  try {
    return serve::plan_tool_calls(s, t.names, t.schemas, t.mode, t.function, tk);
  } catch (const serve::ToolSchemaError& e) {
    const std::string at = e.tool < t.names.size() ? "tools_json[" + std::to_string(e.tool) + "].function.parameters"
                                                   : std::string("tools_json");
    throw ApiError{REACH_ERROR_INVALID_ARGUMENT, std::string(e.what()) + " (in " + at + ": a forced call follows it)"};
  }
}

}  // namespace

serve::ReplyPiece reach::capi::take_tool_calls(reach_reply* r, serve::ReplyPiece piece, bool end) {
  if (!r->tool_stream) return piece;
  const bool harmony = r->tools->harmony;
  std::vector<serve::ToolPiece> parts{r->tool_stream->push(harmony ? piece.calls : piece.content)};
  if (end) parts.push_back(r->tool_stream->finish());
  if (!harmony) piece.content.clear();
  for (const serve::ToolPiece& part : parts) {
    piece.content += part.content;
    for (const auto& c : part.calls) {
      if (c.index >= r->calls.size()) r->calls.emplace_back(c.name, "");
      r->calls[c.index].second += c.arguments;
    }
  }
  return piece;
}

extern "C" {

reach_status reach_chat_tokenize_tools(const reach_model* model, const reach_chat_message* messages,
                                       size_t n_messages, const char* tools_json, const char* tool_choice,
                                       int32_t* tokens, size_t capacity, size_t* n_tokens) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    need(n_tokens, REACH_ERROR_INVALID_ARGUMENT, "n_tokens is NULL");
    need(messages && n_messages > 0, REACH_ERROR_INVALID_ARGUMENT, "a chat prompt needs a message (messages is NULL or n_messages 0)");
    const Tools t = read_tools(tools_json, tool_choice);
    const Tokenizer& tk = tokenizer_of(m.get());
    std::vector<ChatMessage> list;
    for (size_t i = 0; i < n_messages; ++i) {
      const std::string at = "messages[" + std::to_string(i) + "]";
      need(messages[i].role && *messages[i].role, REACH_ERROR_INVALID_ARGUMENT, at + ".role is NULL or empty");
      need(messages[i].content != nullptr, REACH_ERROR_INVALID_ARGUMENT, at + ".content is NULL");
      list.push_back({messages[i].role, messages[i].content});
    }
    const ChatTemplate tmpl = ChatTemplate::for_tokenizer(tk, m->model->dir().string());
    std::string prefix;
    if (!t.none) prefix = plan(syntax_of(tmpl), t, tk).reply_prefix;
    const std::vector<int32_t> ids =
        encode_chat(tk, tmpl, list, t.none ? std::span<const ChatTool>() : std::span<const ChatTool>(t.tools), prefix).ids;
    *n_tokens = ids.size();
    if (!tokens) return;
    need(capacity >= ids.size(), REACH_ERROR_BUFFER_TOO_SMALL,
         "the chat prompt needs " + std::to_string(ids.size()) + " tokens, the buffer holds " + std::to_string(capacity));
    std::copy(ids.begin(), ids.end(), tokens);
  });
}

reach_status reach_session_set_tools(reach_session* session, const char* tools_json, const char* tool_choice) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    std::shared_ptr<const JsonConstraint> c;
    if (tools_json && *tools_json) {
      const Tools t = read_tools(tools_json, tool_choice);
      if (!t.none) {
        const Tokenizer& tk = tokenizer_of(s->model);
        c = plan(syntax_of(ChatTemplate::for_tokenizer(tk, s->model->model->dir().string())), t, tk).constraint;
      }
    }
    std::unique_lock<std::recursive_mutex> l(s->model->device->mu);   // as reach_session_set_json_schema
    s->gen->set_constraint(std::move(c));
  });
}

reach_status reach_reply_set_tools(reach_reply* reply, const char* tools_json, const char* tool_choice) {
  return guard(__func__, [&] {
    auto r = live(reply, Kind::reply, "reply");
    std::lock_guard<std::mutex> l(r->mu);
    r->tools.reset();
    r->tool_prefix.clear();
    r->tool_in_call = false;
    if (tools_json && *tools_json) {
      const Tools t = read_tools(tools_json, tool_choice);
      if (!t.none) {
        const serve::ToolSyntax s = syntax_of(ChatTemplate::for_tokenizer(r->tokenizer, "the reply's model"));
        const serve::ToolPlan p = plan(s, t, r->tokenizer);
        r->tools = s;
        r->tool_prefix = p.reply_prefix;
        r->tool_in_call = p.in_call;
        need(!s.harmony || r->channels, REACH_ERROR_INVALID_ARGUMENT,
             "the model's chat is harmony's (gpt-oss): create the reply with channels (1 or REACH_REPLY_CHANNELS_AUTO) "
             "to read its calls");
      }
    }
    restart_reply(r.get());
  });
}

reach_status reach_reply_tool_calls_json(reach_reply* reply, char* json, size_t capacity, size_t* length) {
  return guard(__func__, [&] {
    auto r = live(reply, Kind::reply, "reply");
    std::lock_guard<std::mutex> l(r->mu);
    need(length, REACH_ERROR_INVALID_ARGUMENT, "length is NULL");
    ojson list = ojson::array();
    for (const auto& [name, arguments] : r->calls) list.push_back({{"name", name}, {"arguments", arguments}});
    const std::string text = list.dump(-1, ' ', false, ojson::error_handler_t::replace);
    *length = text.size();
    if (!json) return;
    need(capacity > text.size(), REACH_ERROR_BUFFER_TOO_SMALL,
         "the calls' JSON is " + std::to_string(text.size()) + " bytes; the buffer needs one more for the NUL, it holds " +
             std::to_string(capacity));
    std::memcpy(json, text.c_str(), text.size() + 1);
  });
}

}  // extern "C"
