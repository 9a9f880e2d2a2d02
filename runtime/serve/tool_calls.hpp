#pragma once
// A chat reply split into text and tool calls, as it streams (protocol-free: the server shapes the
// pieces into the OpenAI API's delta.tool_calls, `reach run --tools` prints them).
//
// The call syntax is the chat family's (ToolSyntax::for_template):
//  - Qwen 2.5 / Qwen3 / SmolLM3 (Hermes style): <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>,
//    any number of them, text around them;
//  - Llama 3.1 / 3.2: the whole reply is one call, {"name": NAME, "parameters": {...}} (no tags): a
//    reply whose first non-blank character is "{" is read as a call, any other as text;
//  - Mistral v3 / Nemo: [TOOL_CALLS] then a JSON array of {"name", "arguments"}; the tag is a special
//    token a decoder may drop, so a reply that starts with it, or with "[", is read as the array, sent
//    at its end (its arguments are not streamed piece by piece);
//  - Phi-4-mini: <|tool_call|>[{"name", "arguments"}, ...]<|/tool_call|>, read as Mistral's array (the
//    tags may be dropped as special tokens too);
//  - gpt-oss (harmony): a message addressed to functions.NAME, "<|channel|>commentary to=functions.NAME
//    <|constrain|>json<|message|>{...}<|call|>"; HarmonyReply hands such messages out apart from the
//    channels' text (JobEvent::calls) as Hermes-style calls, which are what this stream is fed.
// A call's arguments are streamed as the model writes them (the bytes of its "arguments" object, from
// "{" to the matching "}"), once its name is known; the name must come first in the object, as the
// templates show it.  A call whose object has another order is sent whole at its end; a block that is
// not a call object ({"name": string, ...}) goes out as the text it was.  The whitespace that ends the
// text before a call, or that follows the last call, is not content (it separates).
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "runtime/constrain/json_constraint.hpp"
#include "runtime/constrain/tool_constraint.hpp"

namespace reach {
class ChatTemplate;
class Tokenizer;
}

namespace reach::serve {

struct ToolSyntax {
  std::string open, close;                  // the tags around one call; empty: the reply is the call (Llama 3.1)
  std::string arguments_key = "arguments";  // the call object's key of its arguments
  bool list = false;                        // the calls are one JSON array at the start of the reply (Mistral)
  bool short_ids = false;                   // call ids of 9 letters and digits, which the template requires (Mistral)
  std::string forced;                       // ChatTemplate::tool_call_prefix()
  bool harmony = false;  // gpt-oss: the calls come apart from the text (JobEvent::calls), as Hermes-style calls
  // The template's syntax; nullopt when reach parses no calls for its family.
  static std::optional<ToolSyntax> for_template(const ChatTemplate& t);
  // The text that opens a call, written after the generation prompt when the reply must be a call
  // (harmony: its header up to the function's name).
  std::string forced_prefix() const { return forced; }
  // harmony: the header of a call to `name` through to its arguments, as the prompt writes it for a call
  // forced to that function.
  std::string harmony_header(const std::string& name) const { return forced + name + " <|constrain|>json<|message|>"; }

  // What a call looks like to the sampler (runtime/constrain/tool_constraint.hpp): this family's
  // opener, then per tool its name and its arguments under grammars[i], as the template writes a call:
  //   Hermes: <tool_call> "\n{"name": "NAME", "arguments": " ARGS "}\n</tool_call>";
  //   Llama 3.1: a reply that starts with "{", then "\"name\": \"NAME\", \"parameters\": " ARGS "}";
  //   Mistral / Phi-4-mini: a reply that starts with the tag, then "[{"name": "NAME", "arguments": " ARGS
  //   "}]" (one call per list; Phi-4-mini's closing tag after it);
  //   (where the reply is the call, as these three parse it, it may only end after it)
  //   harmony: "to=functions." then "NAME <|constrain|>json<|message|>" ARGS (<|call|> ends the reply).
  // names[i] is the tool's name.  forced: the prompt wrote the opener and the reply is the call.
  std::shared_ptr<const ToolCallForms> call_forms(std::span<const std::string> names,
                                                  std::span<const std::shared_ptr<const JsonGrammar>> grammars,
                                                  const Tokenizer& tokenizer, bool forced) const;
};

// How a request with tools lets the model call them: "auto" (text or calls), "required" (a call of one
// of them), a named function (a call of that one).
enum class ToolMode { automatic, required, function };

// A forced call's schema the grammar cannot follow: Error(invalid_argument) naming tool `tool`.
struct ToolSchemaError : Error {
  ToolSchemaError(size_t t, const std::string& message) : Error(ErrorCode::invalid_argument, message), tool(t) {}
  size_t tool;
};

// What a request with tools asks of the prompt and the sampler, the same for `reach serve`, `reach run`
// and the C API.
struct ToolPlan {
  std::string reply_prefix;                          // written after the generation prompt (a forced call's opening)
  std::shared_ptr<const JsonConstraint> constraint;  // the sampler's
  bool in_call = false;                              // ToolCallStream's: the reply starts inside a call
};

// names[i], schemas[i]: the tools (their parameters; {} for none).  function: the named tool's index
// (ToolMode::function).  A forced call's object follows the named tool's schema, or (required, several
// tools) any tool's, chosen by the name the model writes; under auto a call the model opens does, and a
// schema the grammar cannot follow holds that tool's arguments to be an object only.  Throws
// ToolSchemaError for a forced call's schema the grammar cannot follow.
ToolPlan plan_tool_calls(const ToolSyntax& syntax, std::span<const std::string> names,
                         std::span<const nlohmann::ordered_json> schemas, ToolMode mode, size_t function,
                         const Tokenizer& tokenizer);

// What one push gives: text, and pieces of calls (a call's first piece carries its name).
struct ToolPiece {
  struct Call {
    size_t index = 0;
    std::string name;       // non-empty on the call's first piece only
    std::string arguments;  // the next bytes of its arguments
  };
  std::string content;
  std::vector<Call> calls;
};

class ToolCallStream {
 public:
  // in_call: the reply starts inside a call (its opening tag was written into the prompt).
  // max_calls: calls after this many are dropped (parallel_tool_calls false: 1).
  ToolCallStream(ToolSyntax syntax, bool in_call, size_t max_calls);
  ToolPiece push(std::string_view text);
  // The end of the reply: a call left open is closed; held-back text goes out.
  ToolPiece finish();
  size_t calls() const { return calls_; }

 private:
  // text: outside calls; seek_name: a call's object up to its arguments; arguments: streaming them;
  // after_arguments: to the closing tag; whole: a call sent at its end; ignore: calls past max_calls.
  // sniff: a tagless syntax's reply, before its first non-blank character says call or text; plain: text.
  // list: a Mistral reply's array, sent at its end.
  enum class Phase { text, seek_name, arguments, after_arguments, whole, ignore, sniff, plain, list };
  void step(ToolPiece& out, bool end);
  bool step_text(ToolPiece& out, bool end);  // each returns whether it moved to another phase
  bool step_sniff(bool end);
  bool step_list(ToolPiece& out, bool end);
  bool step_head(ToolPiece& out, bool end);
  bool step_arguments(ToolPiece& out, bool end);
  bool step_tail(bool end);
  bool step_whole(ToolPiece& out, bool end);
  void open_call(ToolPiece& out, std::string name);
  void add_arguments(ToolPiece& out, std::string_view bytes);
  void close_call();
  Phase after_call() const;
  void emit_text(ToolPiece& out, std::string_view text);

  ToolSyntax syntax_;
  size_t max_calls_;
  Phase phase_ = Phase::text;
  std::string buf_;  // text not yet handed out (text phase) or the current call's block
  size_t pos_ = 0;   // arguments: how far buf_ has been read (and sent)
  int depth_ = 0;    // in the arguments value: open brackets
  bool in_string_ = false, escaped_ = false;
  std::string held_space_;  // whitespace-only text, sent only if more text follows
  size_t calls_ = 0;
  bool call_open_ = false;  // the current call's name went out
};

}  // namespace reach::serve
