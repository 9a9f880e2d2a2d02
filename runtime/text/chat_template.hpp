#pragma once
// Chat templates: a conversation (system / user / assistant messages) as the prompt text a model
// was tuned on.
//
// Models ship their template as Jinja (tokenizer.chat_template in a GGUF, chat_template in
// tokenizer_config.json).  reach does not interpret Jinja: it recognises the template's family from
// its text and renders that family's format in C++.  Why:
//  - the templates of the models reach runs come in a handful of families, each a few lines of
//    string joining; a Jinja engine able to run them (filters, tests, namespaces, macros, loops,
//    trim_blocks / lstrip_blocks whitespace rules) would be a far larger and riskier piece of code
//    for the same output, and a GGUF's template is untrusted input that an interpreter would have
//    to bound (loops, recursion, string growth);
//  - a model without a template (Gemma 3 270M's GGUF carries none) still chats, from the turn tokens
//    of its vocabulary.
// The families, and what is taken from the template text beyond its family:
//  - ChatML (<|im_start|>: SmolLM2, Qwen2, Qwen 2.5): the system turn the template writes when the
//    conversation has none (SmolLM2's "You are a helpful AI assistant named SmolLM, ...", Qwen 2.5's
//    "You are Qwen, created by Alibaba Cloud. ...");
//  - Qwen3 (ChatML with <think> blocks): an assistant turn after the last user message carries its
//    reasoning as <think>...</think>, earlier ones lose it; enable_thinking (set_thinking) false
//    writes an empty think block into the generation prompt;
//  - SmolLM3 (ChatML with a "## Metadata" system block): today's date (the template calls
//    strftime_now), the reasoning mode (/think by default, /no_think from set_thinking(false) or the
//    system message), and the two default instructions the template holds, one per mode; without
//    tools its system turn has no <|im_end|>, and so reach writes none either;
//  - Gemma (<start_of_turn>: Gemma 2 and 3): whether it starts with bos_token, and the separator
//    after a system message, which Gemma 3 puts before the first user message ('\n\n');
//    Gemma 2's template has no system role;
//  - Llama 3 (<|start_header_id|>): the original Llama 3 Instruct form;
//  - Llama 3.1 (<|start_header_id|> with the "Cutting Knowledge Date: December 2023" system header:
//    Llama 3.1, 3.2, 3.3 Instruct): the "Today Date" the template writes, its date_string literal
//    ("26 Jul 2024" in Llama 3.1's), or today's date where it asks strftime_now (Llama 3.2's);
//    custom tools (JSON in the first user message), one call per assistant turn, results as ipython
//    turns; not builtin_tools;
//  - Llama 2 ([INST] with <<SYS>>);
//  - Mistral ([INST] without <<SYS>>: mistralai's "v3" template of Mistral 7B Instruct v0.3, and
//    its "v3-tekken" form of Mistral Nemo): whether "[INST] " has its space and the assistant's
//    text its leading space and trim; the system message goes before the last user message, the tools
//    ([AVAILABLE_TOOLS]) before the last user message, calls as [TOOL_CALLS], results as [TOOL_RESULTS];
//  - Phi-3 (<|user|> ... <|end|>: Phi-3.5-mini) and Phi-4-mini (the same turn tokens, no newlines; tools
//    as its model card passes them: the functions' json.dumps in the system message's "tools" field,
//    an empty system message added to carry them where there is none);
//  - OLMo 2 (<|user|> with eos_token ending the assistant's turns: the Tulu 3 template): whether it
//    starts with bos_token;
//  - harmony (<|start|> ... <|channel|> ... <|message|>: gpt-oss): the model identity the system
//    message opens with, today's date (strftime_now("%Y-%m-%d")), the reasoning effort
//    (set_reasoning_effort; "medium" by default); a first system (or developer) message becomes the
//    developer message's instructions; assistant turns are written on the final channel, ending in
//    <|end|>, or <|return|> for a last one without the generation prompt; tools as the "functions"
//    namespace of TypeScript-like signatures in the developer message (chat_render_harmony.cpp), a
//    call as "<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>"
//    (the first of a message's calls; its text as analysis until an answer follows), a result as
//    "<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>"text"<|end|>".  reach renders
//    no analysis ("thinking") text of its own; roles it has no turn for (a later system message) are
//    dropped, as it drops them.  The reply's channels are split by HarmonyReply (harmony_reply.hpp).
// Tools, tool calls and tool results (role "tool") are rendered by the families takes_tools() names
// (Qwen 2.5, Qwen3, Llama 3.1, Mistral v3, SmolLM3, Phi-4-mini, gpt-oss: each as its template writes them);
// there, and in the other families added with Llama 3.1, another role is ErrorCode::unsupported,
// and tools or calls for a family that does not take them too.  Mistral's template raises on unknown
// roles (invalid_argument); the older families write any role as a turn of that name.
// Anything else is ErrorCode::unsupported, naming the markers looked for.  tests/test_chat_template.cpp
// compares the output with Python's jinja2 rendering of the real templates.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reach {

class Tokenizer;

// A function call an assistant message made (the OpenAI API's tool_calls[i]).
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object's text, as the API carries it
};

// A function the model may call: the API's whole tool entry ({"type": "function", "function": {"name",
// "description", "parameters"}}) as JSON text with its keys in the request's order, which the templates
// write out (tojson) as they are.
struct ChatTool {
  std::string name;
  std::string json;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant: the calls it made
  std::string tool_call_id;          // tool: the call this is the result of
  std::string name;                  // tool: the function's name, where the request gives it
};

enum class ChatFamily { chatml, gemma, llama3, llama2, llama3_1, qwen3, smollm3, mistral, phi3, phi4, olmo2, harmony };

// A calendar day, for the templates that write today's date.
struct ChatDate {
  int year = 0, month = 0, day = 0;  // month 1..12
};

class ChatTemplate {
 public:
  // The family of a Jinja template's text; `origin` names it in errors.  bos_token / eos_token are
  // the texts the template's variables of those names stand for.  Throws unsupported.
  static ChatTemplate from_jinja(std::string_view text, const std::string& origin, std::string bos_token,
                                 std::string eos_token);
  // The tokenizer's chat_template(); without one, the family that the vocabulary's turn tokens name
  // (<start_of_turn>, <|start_header_id|>, <|im_start|>, [INST] as one token: Mistral v3, <|start|> with
  // <|channel|>, <|message|> and <|return|>: harmony).  Throws
  // unsupported when neither says.
  static ChatTemplate for_tokenizer(const Tokenizer& tokenizer, const std::string& origin);

  ChatFamily family() const { return family_; }
  const char* family_name() const;
  bool from_vocabulary() const { return from_vocabulary_; }  // no template text: recognised by tokens

  // The prompt text, special tokens written out as text (encode them with special-token matching).
  // add_generation_prompt opens the assistant's turn.  Throws invalid_argument where the template
  // itself raises (roles not alternating user/assistant, a system role it has no place for, no
  // messages).
  // tools (the functions the model may call) and tool history (assistant tool_calls, tool messages) are
  // written by the families takes_tools() names; others throw unsupported for them.  The template sees
  // each call's arguments as the parsed object (as vLLM and transformers' documentation pass them), not
  // the API's JSON string.
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     std::span<const ChatTool> tools = {}) const;
  // Whether render() writes tools and tool history for this template (Qwen 2.5's ChatML, Qwen3, Llama 3.1/3.2,
  // Mistral v3 / v3-tekken, SmolLM3, Phi-4-mini, gpt-oss).
  bool takes_tools() const { return takes_tools_; }
  // The text a reply that must call a tool opens with, written after the generation prompt: the
  // family's call tag as its template writes it ("<tool_call>\n", "[TOOL_CALLS] "; "" for Llama 3.1,
  // whose reply is the call object; harmony's header up to the name, "<|channel|>commentary to=functions.").
  std::string tool_call_prefix() const;
  // The token text that ends an assistant turn: <|im_end|>, <end_of_turn>, <|eot_id|>, <|end|>,
  // <|return|> (harmony: its <|end|> ends one message of the reply, not the reply), or the EOS text
  // (Llama 2, Mistral, OLMo 2).
  std::string end_of_turn() const;
  // The reply is harmony's channels (analysis, then final): split it with HarmonyReply.
  bool has_channels() const { return family_ == ChatFamily::harmony; }

  // The day written where the template asks strftime_now for today's date (SmolLM3, Llama 3.2):
  // by default the local date at each render(), as transformers' strftime_now gives it; tests fix it.
  void set_today(ChatDate day) { today_ = day; }
  // The templates' enable_thinking variable (Qwen3, SmolLM3): unset (nullopt) by default, as a
  // caller of apply_chat_template that does not pass it.
  void set_thinking(std::optional<bool> enable) { thinking_ = enable; }
  // The templates' reasoning_effort variable (harmony: "low", "medium" or "high"; nullopt: the
  // template's default, "medium").  Other families have none and ignore it.  Throws invalid_argument
  // for another value.
  void set_reasoning_effort(std::optional<std::string> effort);
  bool takes_reasoning_effort() const { return family_ == ChatFamily::harmony; }

 private:
  // Each family's renderer (chat_render.cpp) reads the settings below; chat_template.cpp's family
  // table picks it.
  friend struct ChatRender;

  ChatFamily family_ = ChatFamily::chatml;
  std::string origin_;
  std::string bos_, eos_;
  bool from_vocabulary_ = false;
  bool writes_bos_ = false;            // gemma: the template starts with bos_token
  bool has_default_system_ = false;    // chatml
  bool known_roles_only_ = false;      // chatml: system / user / assistant only (Qwen 2.5: tools differ)
  bool takes_tools_ = false;           // the template writes tools (<tools>, <tool_call>, <tool_response>)
  std::string default_system_;
  bool system_role_ = true;            // gemma: false for Gemma 2's template
  std::string system_separator_;       // gemma: after the system text, before the first user message
  std::string date_string_;            // llama3_1: the template's date_string; empty: today_ (strftime_now)
  std::optional<ChatDate> today_;     // nullopt: the local date when rendering
  std::optional<bool> thinking_;
  std::optional<std::string> reasoning_effort_;   // harmony; nullopt: "medium"
  std::string model_identity_;         // harmony: the first line of its system message
  std::string think_instructions_, plain_instructions_;  // smollm3: the defaults of /think and /no_think
  bool skip_empty_system_ = true;      // phi3: no system turn for an empty system text (Phi-3.5)
  bool inst_space_ = true;             // mistral: "[INST] " (v3) or "[INST]" (v3-tekken)
  bool assistant_trim_ = true;         // mistral: " " + trimmed text (v3) or the text as it is (v3-tekken)
};

// A conversation as the prompt of the assistant's next turn, and the tokens that end that turn.
struct ChatPrompt {
  std::vector<int32_t> ids;        // the prompt
  // The end-of-turn token (harmony: <|return|>, and <|call|>, a tool call's end), and the tokenizer's
  // EOS, where the vocabulary has them.
  std::vector<int32_t> stop_ids;
};

// The template rendered with the assistant's turn opened, encoded (special tokens matched).  The
// tokenizer's own prefix (BOS) is added only where the rendered text does not start with it already:
// Gemma's and Llama's templates write bos_token themselves, and a doubled BOS degrades the reply.
// Throws what render() and encode() throw.
// `tools` as render() takes them; `reply_prefix` is written after the generation prompt (the opening of a
// tool call the reply must make).
ChatPrompt encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                       std::span<const ChatMessage> messages, std::span<const ChatTool> tools = {},
                       const std::string& reply_prefix = {});

}  // namespace reach
