// Chat templates: the family recognised from the template's text or the vocabulary, and the
// family table that names each family's renderer (chat_render.cpp) and end-of-turn token.  See
// chat_template.hpp for why.
#include "runtime/text/chat_template.hpp"

#include <algorithm>
#include <iterator>
#include <optional>

#include "base/error.hpp"
#include "runtime/text/chat_render.hpp"
#include "runtime/text/tokenizer.hpp"

namespace reach {

namespace {

using chat::has;
using chat::raise;


// The Jinja string literal at text[pos] ('...' or "..."), its escapes resolved; nullopt when there
// is none.  pos moves past it.
std::optional<std::string> literal_at(std::string_view text, size_t& pos) {
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n')) ++pos;
  if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"')) return std::nullopt;
  const char quote = text[pos];
  std::string out;
  for (size_t i = pos + 1; i < text.size(); ++i) {
    char c = text[i];
    if (c == quote) {
      pos = i + 1;
      return out;
    }
    if (c == '\\' && i + 1 < text.size()) {
      c = text[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    } else {
      out += c;
    }
  }
  return std::nullopt;
}

// "prefix ... marker" in text: whether `word` follows at pos (after blanks); pos moves past it.
bool expect(std::string_view text, size_t& pos, std::string_view word) {
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
  if (text.substr(pos, word.size()) != word) return false;
  pos += word.size();
  return true;
}

// ChatML: the system turn written when the conversation starts without one, as one string literal
// '<|im_start|>system\n...<|im_end|>' (the newline escaped or literal).
std::optional<std::string> chatml_default_system(std::string_view text) {
  const std::string_view open = "<|im_start|>system", close = "<|im_end|>";
  for (size_t at = text.find(open); at != std::string_view::npos; at = text.find(open, at + 1)) {
    size_t p = at + open.size();
    if (text.substr(p, 1) == "\n") p += 1;
    else if (text.substr(p, 2) == "\\n") p += 2;
    else continue;
    const size_t end = text.find(close, p);
    if (end == std::string_view::npos) break;
    const std::string_view body = text.substr(p, end - p);
    if (body.empty() || body.find_first_of("'\"{}+") != std::string_view::npos) continue;  // not one literal
    std::string quoted(1, '\'');  // appended, not "'" + ...: GCC 12 warns falsely (-Wrestrict) on that
    quoted.append(body).push_back('\'');
    size_t q = 0;
    if (auto s = literal_at(quoted, q)) return s;
  }
  return std::nullopt;
}

// Gemma 3: "set first_user_prefix = messages[0]['content'] + '\n\n'" gives the separator.
std::optional<std::string> gemma_system_separator(std::string_view text) {
  for (size_t at = text.find("first_user_prefix"); at != std::string_view::npos;
       at = text.find("first_user_prefix", at + 1)) {
    size_t p = at + std::string_view("first_user_prefix").size();
    if (!expect(text, p, "=")) continue;
    if (!expect(text, p, "messages[0]['content']") && !expect(text, p, "messages[0][\"content\"]")) continue;
    if (!expect(text, p, "+")) continue;
    if (auto s = literal_at(text, p)) return s;
  }
  return std::nullopt;
}

// Llama 3.1: '{%- set date_string = "26 Jul 2024" %}', the date the template writes when the caller
// passes none; nullopt when there is no such literal.
std::optional<std::string> llama_date_string(std::string_view text) {
  for (size_t at = text.find("set date_string"); at != std::string_view::npos;
       at = text.find("set date_string", at + 1)) {
    size_t p = at + std::string_view("set date_string").size();
    if (!expect(text, p, "=")) continue;
    if (auto s = literal_at(text, p)) return s;
  }
  return std::nullopt;
}

// SmolLM3: the literal written after `marker` ('{{- "..." -}}'), the default instructions of one
// reasoning mode.
std::optional<std::string> literal_after(std::string_view text, std::string_view marker) {
  size_t at = text.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  size_t p = at + marker.size();
  while (p < text.size() && (text[p] == ' ' || text[p] == '\n' || text[p] == '\t')) ++p;
  if (!expect(text, p, "{{-") && !expect(text, p, "{{")) return std::nullopt;
  return literal_at(text, p);
}

// harmony: the literal after '{%- set NAME = ' (gpt-oss's model_identity default); nullopt when there
// is none.
std::optional<std::string> set_literal(std::string_view text, std::string_view name) {
  const std::string marker = "set " + std::string(name);
  for (size_t at = text.find(marker); at != std::string_view::npos; at = text.find(marker, at + 1)) {
    size_t p = at + marker.size();
    if (!expect(text, p, "=")) continue;
    if (auto s = literal_at(text, p)) return s;
  }
  return std::nullopt;
}

// Qwen 2.5's and Qwen3's tool instructions (chat_render.cpp writes them): a template without them
// writes tools some other way, which reach does not render.
constexpr std::string_view kQwenToolsMarker =
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>";

// gpt-oss's identity line when neither the template nor the caller gives one.
constexpr const char* kHarmonyIdentity = "You are ChatGPT, a large language model trained by OpenAI.";

// One row per family, in the enum's order: its name (family_name()), the token text that ends an
// assistant turn (nullptr: the tokenizer's EOS text) and its renderer.
struct FamilyRow {
  ChatFamily family;
  const char* name;
  const char* end_of_turn;
  ChatRender::Fn render;
};

constexpr FamilyRow kFamilies[] = {
    {ChatFamily::chatml, "chatml", "<|im_end|>", ChatRender::chatml},
    {ChatFamily::gemma, "gemma", "<end_of_turn>", ChatRender::gemma},
    {ChatFamily::llama3, "llama3", "<|eot_id|>", ChatRender::llama3},
    {ChatFamily::llama2, "llama2", nullptr, ChatRender::llama2},
    {ChatFamily::llama3_1, "llama3.1", "<|eot_id|>", ChatRender::llama3_1},
    {ChatFamily::qwen3, "qwen3", "<|im_end|>", ChatRender::qwen3},
    {ChatFamily::smollm3, "smollm3", "<|im_end|>", ChatRender::smollm3},
    {ChatFamily::mistral, "mistral", nullptr, ChatRender::mistral},
    {ChatFamily::phi3, "phi3", "<|end|>", ChatRender::phi3},
    {ChatFamily::phi4, "phi4-mini", "<|end|>", ChatRender::phi4},
    {ChatFamily::olmo2, "olmo2", nullptr, ChatRender::olmo2},
    {ChatFamily::harmony, "harmony", "<|return|>", ChatRender::harmony},
};

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kFamilies); ++i)
    if (static_cast<size_t>(kFamilies[i].family) != i) return false;
  return true;
}
static_assert(rows_in_enum_order() && std::size(kFamilies) == static_cast<size_t>(ChatFamily::harmony) + 1,
              "kFamilies has one row per ChatFamily, in the enum's order (harmony last)");

const FamilyRow& row(ChatFamily family) { return kFamilies[static_cast<size_t>(family)]; }

}  // namespace


ChatTemplate ChatTemplate::from_jinja(std::string_view text, const std::string& origin, std::string bos_token,
                                      std::string eos_token) {
  ChatTemplate t;
  t.origin_ = origin;
  t.bos_ = std::move(bos_token);
  t.eos_ = std::move(eos_token);
  auto unsupported = [&](const std::string& what) {
    throw Error(ErrorCode::unsupported, origin + ": " + what + "; write the prompt out with -p instead");
  };
  if (has(text, "<|start|>") && has(text, "<|channel|>") && has(text, "<|message|>")) {
    // gpt-oss's harmony template; its system message's fixed lines must be the ones rendered here.
    if (!has(text, "Knowledge cutoff: 2024-06\\n") || !has(text, "strftime_now(\"%Y-%m-%d\")") ||
        !has(text, "# Valid channels: analysis, commentary, final. Channel must be included for every message."))
      unsupported("a harmony (<|start|>, <|channel|>) chat template whose system message is not gpt-oss's");
    t.family_ = ChatFamily::harmony;
    t.model_identity_ = set_literal(text, "model_identity").value_or(kHarmonyIdentity);
    // Its functions namespace, calls to functions.NAME and their results (chat_render_harmony.cpp).
    t.takes_tools_ = has(text, "render_tool_namespace(\"functions\", tools)") &&
                     has(text, "\" to=assistant<|channel|>commentary<|message|>\"");
  } else if (has(text, "<start_of_turn>")) {
    t.family_ = ChatFamily::gemma;
    t.writes_bos_ = has(text, "bos_token");
    auto sep = gemma_system_separator(text);
    t.system_role_ = sep.has_value();
    t.system_separator_ = sep.value_or("");
  } else if (has(text, "<|start_header_id|>")) {
    t.writes_bos_ = has(text, "bos_token");
    if (has(text, "Cutting Knowledge Date: December 2023") && has(text, "Today Date: ")) {
      // Llama 3.1 / 3.2 / 3.3: a date_string literal, or strftime_now first where the template asks
      // for it (3.2's; transformers provides it, so its literal is only a fallback).
      t.family_ = ChatFamily::llama3_1;
      auto date = llama_date_string(text);
      if (!has(text, "strftime_now") && !date)
        unsupported("a Llama 3.1-style chat template without a date_string reach can find");
      if (!has(text, "strftime_now")) t.date_string_ = *date;
      // Custom tools as JSON in the first user message (tools_in_user_message's default), calls as
      // {"name", "parameters"}, results in ipython turns.
      t.takes_tools_ = has(text, "Given the following functions, please respond with a JSON for a function call ") &&
                       has(text, "tools_in_user_message") && has(text, "tojson(indent=4)");
    } else if (has(text, "Cutting Knowledge Date") || has(text, "date_string") || has(text, "tools")) {
      unsupported("a Llama 3 chat template with a system header reach does not know (only Llama 3.1's "
                  "\"Cutting Knowledge Date: December 2023\" one is rendered)");
    } else {
      t.family_ = ChatFamily::llama3;
    }
  } else if (has(text, "<|im_start|>")) {
    if (has(text, "<|im_sep|>")) unsupported("a Phi-4 (<|im_sep|>) chat template, which reach does not render");
    if (has(text, "## Metadata") && has(text, "Reasoning Mode") && has(text, "strftime_now(\"%d %B %Y\")") &&
        has(text, "Knowledge Cutoff Date: June 2025")) {
      t.family_ = ChatFamily::smollm3;
      auto think = literal_after(text, "reasoning_mode == \"/think\" -%}");
      auto plain = think ? literal_after(text.substr(text.find("reasoning_mode == \"/think\" -%}")), "{%- else -%}")
                         : std::nullopt;
      if (!think || !plain) unsupported("a SmolLM3 chat template whose default instructions reach cannot find");
      // Tools come as the template's xml_tools variable (its model card's way: it reads no `tools`).
      t.takes_tools_ = has(text, "xml_tools") && has(text, "<tool_call>") && has(text, "(tool | string)");
      t.think_instructions_ = *think;
      t.plain_instructions_ = *plain;
    } else if (has(text, "<think>") || has(text, "reasoning_content")) {
      // Qwen3's; not QwQ's or Qwen3 Thinking 2507's, whose generation prompt opens a <think> block.
      if (!(has(text, "last_query_index") && has(text, "reasoning_content") && has(text, "'</think>' in")) ||
          has(text, "<|im_start|>assistant\\n<think>") || has(text, "<|im_start|>assistant\n<think>"))
        unsupported("a ChatML chat template with reasoning (<think>) that is not Qwen3's");
      t.family_ = ChatFamily::qwen3;
      t.takes_tools_ = has(text, kQwenToolsMarker) && has(text, "<tool_response>");
    } else {
      t.family_ = ChatFamily::chatml;
      // Qwen 2.5 writes tool results as <tool_response> in a user turn, not as a turn of their role.
      t.known_roles_only_ = has(text, "<tool_response>");
      t.takes_tools_ = t.known_roles_only_ && has(text, kQwenToolsMarker);
      if (auto s = chatml_default_system(text)) {
        t.has_default_system_ = true;
        t.default_system_ = *s;
      }
    }
  } else if (has(text, "[INST]") && has(text, "<<SYS>>")) {
    t.family_ = ChatFamily::llama2;
  } else if (has(text, "[INST]")) {
    // mistralai's v3 / v3-tekken templates: the system message is kept apart and written into the
    // last user message.  Older Mistral templates (no system message, " [/INST]") differ.
    if (!(has(text, "loop.last and system_message is defined") && has(text, "loop_messages")))
      unsupported("an [INST] chat template that is neither Llama 2's (<<SYS>>) nor mistralai's v3 one");
    t.family_ = ChatFamily::mistral;
    t.inst_space_ = has(text, "\"[INST] \"") || has(text, "'[INST] '");
    t.assistant_trim_ = has(text, "|trim + eos_token");
    t.takes_tools_ = has(text, "[AVAILABLE_TOOLS]") && has(text, "[TOOL_CALLS]") && has(text, "[TOOL_RESULTS]") &&
                     has(text, "out[:-1]");
  } else if (has(text, "<|end|>") && has(text, "<|user|>")) {
    // Phi-3.5: "<|user|>\n"; Phi-3 mini 4k's older template (no system role, no generation prompt
    // switch) differs.
    if (!has(text, "<|system|>") || !has(text, "add_generation_prompt"))
      unsupported("a Phi-3 chat template reach does not know (Phi-3.5-mini's is rendered)");
    t.family_ = ChatFamily::phi3;
    // Phi-3.5 writes no system turn for an empty system text; Phi-3 mini's later template does.
    t.skip_empty_system_ = has(text, "'system' and message['content']");
  } else if (has(text, "<|end|>") && (has(text, "'<|' + message['role'] + '|>'") ||
                                      has(text, "\"<|\" + message[\"role\"] + \"|>\""))) {
    t.family_ = ChatFamily::phi4;
    // Tools as the system message's "tools" text, between <|tool|> and <|/tool|>.
    t.takes_tools_ = has(text, "'<|tool|>' + message['tools'] + '<|/tool|>'");
  } else if (has(text, "<|user|>") && has(text, "<|assistant|>") && has(text, "not loop.last") &&
             has(text, "eos_token")) {
    t.family_ = ChatFamily::olmo2;
    t.writes_bos_ = has(text, "bos_token");
  } else {
    unsupported("chat template of an unknown family: reach recognises ChatML (<|im_start|>, Qwen3, SmolLM3), "
                "Gemma (<start_of_turn>), Llama 3 and 3.1 (<|start_header_id|>), Llama 2 ([INST] with <<SYS>>), "
                "Mistral ([INST]), Phi-3 and Phi-4-mini (<|end|>), OLMo 2 (<|user|>) and harmony (<|start|> with "
                "<|channel|> and <|message|>: gpt-oss)");
  }
  return t;
}

ChatTemplate ChatTemplate::for_tokenizer(const Tokenizer& tk, const std::string& origin) {
  auto text_of = [&](std::optional<int32_t> id) { return id ? tk.token_text(*id) : std::string(); };
  const std::string bos = text_of(tk.bos_id()), eos = text_of(tk.eos_id());
  if (!tk.chat_template().empty()) return from_jinja(tk.chat_template(), origin + " chat template", bos, eos);
  ChatTemplate t;
  t.origin_ = origin + " (no chat template; recognised by its turn tokens)";
  t.bos_ = bos;
  t.eos_ = eos;
  t.from_vocabulary_ = true;
  if (tk.find("<start_of_turn>") && tk.find("<end_of_turn>")) {
    // Gemma 3's template: <bos>, the system text + "\n\n" before the first user message.
    t.family_ = ChatFamily::gemma;
    t.writes_bos_ = !bos.empty();
    t.system_separator_ = "\n\n";
  } else if (tk.find("<|start_header_id|>") && tk.find("<|eot_id|>")) {
    t.family_ = ChatFamily::llama3;
    t.writes_bos_ = !bos.empty();
  } else if (tk.find("<|im_start|>") && tk.find("<|im_end|>")) {
    t.family_ = ChatFamily::chatml;
  } else if (tk.find("<|start|>") && tk.find("<|channel|>") && tk.find("<|message|>") && tk.find("<|return|>")) {
    t.family_ = ChatFamily::harmony;   // gpt-oss's template, its default identity
    t.model_identity_ = kHarmonyIdentity;
    t.takes_tools_ = true;
  } else if (tk.find("[INST]") && tk.find("[/INST]") && !tk.find("[SYSTEM_PROMPT]")) {
    // [INST] as one token is mistralai's v3 vocabulary (Llama 2 spells it out in pieces): its v3
    // template, with the space.  A vocabulary with [SYSTEM_PROMPT] is v7's, whose format differs.
    // (No fallback for <|user|> ... <|end|>: Phi-3.5 and Phi-4-mini share those tokens but not
    // their format.)
    t.family_ = ChatFamily::mistral;
  } else {
    throw Error(ErrorCode::unsupported,
                origin + ": no chat template (GGUF tokenizer.chat_template, tokenizer_config.json chat_template) "
                         "and no turn tokens reach recognises (<start_of_turn>, <|start_header_id|>, <|im_start|>, "
                         "[INST], <|start|> with <|channel|>) in the vocabulary; write the prompt out with -p instead");
  }
  return t;
}

const char* ChatTemplate::family_name() const { return row(family_).name; }

std::string ChatTemplate::tool_call_prefix() const {
  if (family_ == ChatFamily::mistral) return inst_space_ ? "[TOOL_CALLS] " : "[TOOL_CALLS]";
  if (family_ == ChatFamily::phi4) return "<|tool_call|>";
  if (family_ == ChatFamily::chatml || family_ == ChatFamily::qwen3 || family_ == ChatFamily::smollm3)
    return "<tool_call>\n";
  // harmony: the header of a call on the commentary channel, up to the function's name.
  if (family_ == ChatFamily::harmony) return "<|channel|>commentary to=functions.";
  return "";
}

std::string ChatTemplate::end_of_turn() const {
  const char* text = row(family_).end_of_turn;
  return text ? text : eos_;
}

void ChatTemplate::set_reasoning_effort(std::optional<std::string> effort) {
  if (effort && *effort != "low" && *effort != "medium" && *effort != "high")
    throw Error(ErrorCode::invalid_argument,
                "reasoning effort '" + effort->substr(0, 64) + "' is not one of low, medium, high");
  reasoning_effort_ = std::move(effort);
}

std::string ChatTemplate::render(std::span<const ChatMessage> m, bool add_generation_prompt,
                                 std::span<const ChatTool> tools) const {
  if (m.empty()) raise(origin_, "no messages to render");
  if (!takes_tools_) {
    const auto history =
        std::find_if(m.begin(), m.end(), [](const ChatMessage& msg) { return !msg.tool_calls.empty(); });
    if (!tools.empty() || history != m.end())
      throw Error(ErrorCode::unsupported,
                  origin_ +
                      ": reach renders tools and tool calls for Qwen 2.5's, Qwen3's, "
                      "Llama 3.1's, Mistral v3's, SmolLM3's, Phi-4-mini's and gpt-oss's templates, not this one (" +
                      family_name() + ")");
  }
  return row(family_).render(*this, m, add_generation_prompt, tools);
}

ChatPrompt encode_chat(const Tokenizer& tk, const ChatTemplate& t, std::span<const ChatMessage> messages,
                       std::span<const ChatTool> tools, const std::string& reply_prefix) {
  ChatPrompt c;
  c.ids = tk.encode(t.render(messages, true, tools) + reply_prefix, false);
  const auto prefix = tk.special_prefix();
  const bool has_prefix = c.ids.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), c.ids.begin());
  if (!has_prefix) c.ids.insert(c.ids.begin(), prefix.begin(), prefix.end());
  if (auto id = tk.find(t.end_of_turn())) c.stop_ids.push_back(*id);
  if (t.has_channels())
    if (auto id = tk.find("<|call|>")) c.stop_ids.push_back(*id);   // a tool call ends the reply too
  if (auto id = tk.eos_id()) c.stop_ids.push_back(*id);
  return c;
}

}  // namespace reach
