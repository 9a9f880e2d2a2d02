// Chat templates recognised by family and rendered in C++ (see chat_template.hpp for why).
#include "runtime/text/chat_template.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>

#include "base/error.hpp"
#include "runtime/text/tokenizer.hpp"

namespace reach {

namespace {

bool has(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

// Length of the Python-whitespace character (str.isspace, which Jinja's trim and str.strip use)
// starting at s[i], 0 when it is not one.
size_t space_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
  auto b = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  if (c == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;                            // U+0085, U+00A0
  if (c == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;                              // U+1680
  if (c == 0xE2 && b(1) == 0x80 && (b(2) <= 0x8A || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF))
    return 3;                                                                            // U+2000..200A, 2028/9, 202F
  if (c == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;                              // U+205F
  if (c == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;                              // U+3000
  return 0;
}

// Python's str.strip(): leading and trailing whitespace removed.
std::string strip(std::string_view s) {
  size_t a = 0;
  while (a < s.size())
    if (size_t n = space_at(s, a)) a += n;
    else break;
  size_t e = a, i = a;  // end of the last non-space character
  while (i < s.size())
    if (size_t n = space_at(s, i)) i += n;
    else e = ++i;
  return std::string(s.substr(a, e - a));
}

// Python's str.rstrip(): trailing whitespace removed.
std::string rstrip(std::string_view s) {
  size_t e = 0, i = 0;
  while (i < s.size())
    if (size_t n = space_at(s, i)) i += n;
    else e = ++i;
  return std::string(s.substr(0, e));
}

// Python's str.lstrip(chars) / rstrip(chars) / strip(chars) for one character.
std::string_view lstrip_char(std::string_view s, char c) {
  while (!s.empty() && s.front() == c) s.remove_prefix(1);
  return s;
}
std::string_view rstrip_char(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}

// Python's str.replace(from, to), every occurrence.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string_view::npos; at = hit + from.size())
    out.append(s.substr(at, hit - at)).append(to);
  out.append(s.substr(at));
  return out;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Today's local date, as transformers' strftime_now (datetime.now()) sees it.
ChatDate local_today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  return {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday};
}

void check_day(ChatDate d) {
  if (d.month < 1 || d.month > 12 || d.day < 1 || d.day > 31)
    throw Error(ErrorCode::invalid_argument, "chat template date " + std::to_string(d.year) + "-" +
                                                 std::to_string(d.month) + "-" + std::to_string(d.day) +
                                                 " is not a calendar day");
}

// strftime's "%Y-%m-%d" ("2025-07-08").
std::string iso_date(ChatDate d) {
  check_day(d);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", d.year, d.month, d.day);
  return buf;
}

// strftime's "%d %b %Y" (full_month false: "08 Jul 2025") or "%d %B %Y" ("08 July 2025"), C locale.
std::string format_date(ChatDate d, bool full_month) {
  static const char* const names[] = {"January", "February", "March",     "April",   "May",      "June",
                                      "July",    "August",   "September", "October", "November", "December"};
  check_day(d);
  std::string month = names[d.month - 1];
  if (!full_month) month.resize(3);
  char day[4];
  std::snprintf(day, sizeof day, "%02d", d.day);
  return std::string(day) + " " + month + " " + std::to_string(d.year);
}

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

// gpt-oss's identity line when neither the template nor the caller gives one.
constexpr const char* kHarmonyIdentity = "You are ChatGPT, a large language model trained by OpenAI.";

[[noreturn]] void raise(const std::string& origin, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, origin + ": " + what);
}

// The user/assistant alternation Gemma's and Llama 2's templates enforce from `first` on: they raise
// when a message is a user message at an odd place or another role at an even one.
void check_alternation(std::span<const ChatMessage> m, size_t first, const std::string& origin) {
  for (size_t i = first; i < m.size(); ++i)
    if ((m[i].role == "user") != ((i - first) % 2 == 0))
      raise(origin, "message " + std::to_string(i + 1) + " has role '" + m[i].role +
                        "': the template wants roles alternating user/assistant/user/... after an optional system "
                        "message");
}

// The families added with Llama 3.1 render system, user and assistant messages; their templates'
// other roles (tool results, ipython) carry fields a ChatMessage does not have.
void check_roles(std::span<const ChatMessage> m, const std::string& origin) {
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i].role != "system" && m[i].role != "user" && m[i].role != "assistant")
      throw Error(ErrorCode::unsupported, origin + ": message " + std::to_string(i + 1) + " has role '" + m[i].role +
                                              "': reach renders system, user and assistant messages of this template");
}

// Qwen3: the reasoning of an assistant message written as "<think>...</think>" in its text, and the
// text after it (the template's split on '</think>').
struct Thought {
  std::string reasoning, content;
};
Thought split_thought(std::string_view text) {
  const size_t close = text.find("</think>");
  if (close == std::string_view::npos) return {"", std::string(text)};
  const size_t last_close = text.rfind("</think>");
  std::string_view before = rstrip_char(text.substr(0, close), '\n');
  if (size_t open = before.rfind("<think>"); open != std::string_view::npos) before = before.substr(open + 7);
  return {std::string(lstrip_char(before, '\n')), std::string(lstrip_char(text.substr(last_close + 8), '\n'))};
}

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
      t.think_instructions_ = *think;
      t.plain_instructions_ = *plain;
    } else if (has(text, "<think>") || has(text, "reasoning_content")) {
      // Qwen3's; not QwQ's or Qwen3 Thinking 2507's, whose generation prompt opens a <think> block.
      if (!(has(text, "last_query_index") && has(text, "reasoning_content") && has(text, "'</think>' in")) ||
          has(text, "<|im_start|>assistant\\n<think>") || has(text, "<|im_start|>assistant\n<think>"))
        unsupported("a ChatML chat template with reasoning (<think>) that is not Qwen3's");
      t.family_ = ChatFamily::qwen3;
    } else {
      t.family_ = ChatFamily::chatml;
      // Qwen 2.5 writes tool results as <tool_response> in a user turn, not as a turn of their role.
      t.known_roles_only_ = has(text, "<tool_response>");
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

const char* ChatTemplate::family_name() const {
  switch (family_) {
    case ChatFamily::chatml: return "chatml";
    case ChatFamily::gemma: return "gemma";
    case ChatFamily::llama3: return "llama3";
    case ChatFamily::llama2: return "llama2";
    case ChatFamily::llama3_1: return "llama3.1";
    case ChatFamily::qwen3: return "qwen3";
    case ChatFamily::smollm3: return "smollm3";
    case ChatFamily::mistral: return "mistral";
    case ChatFamily::phi3: return "phi3";
    case ChatFamily::phi4: return "phi4-mini";
    case ChatFamily::olmo2: return "olmo2";
    case ChatFamily::harmony: return "harmony";
  }
  return "?";
}

std::string ChatTemplate::end_of_turn() const {
  switch (family_) {
    case ChatFamily::chatml: return "<|im_end|>";
    case ChatFamily::gemma: return "<end_of_turn>";
    case ChatFamily::llama3: return "<|eot_id|>";
    case ChatFamily::llama2: return eos_;
    case ChatFamily::llama3_1: return "<|eot_id|>";
    case ChatFamily::qwen3:
    case ChatFamily::smollm3: return "<|im_end|>";
    case ChatFamily::phi3:
    case ChatFamily::phi4: return "<|end|>";
    case ChatFamily::mistral:
    case ChatFamily::olmo2: return eos_;
    case ChatFamily::harmony: return "<|return|>";
  }
  return {};
}

void ChatTemplate::set_reasoning_effort(std::optional<std::string> effort) {
  if (effort && *effort != "low" && *effort != "medium" && *effort != "high")
    throw Error(ErrorCode::invalid_argument,
                "reasoning effort '" + effort->substr(0, 64) + "' is not one of low, medium, high");
  reasoning_effort_ = std::move(effort);
}

std::string ChatTemplate::render(std::span<const ChatMessage> m, bool add_generation_prompt) const {
  if (m.empty()) raise(origin_, "no messages to render");
  std::string out;
  const bool has_system = m[0].role == "system";
  switch (family_) {
    case ChatFamily::chatml:
      if (known_roles_only_) check_roles(m, origin_);
      if (!has_system && has_default_system_) out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
      for (const auto& msg : m) out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case ChatFamily::gemma: {
      if (has_system && !system_role_)
        raise(origin_, "this Gemma template has no system role; drop the system message");
      const size_t first = has_system ? 1 : 0;
      check_alternation(m, first, origin_);
      if (writes_bos_) out += bos_;
      for (size_t i = first; i < m.size(); ++i) {
        out += "<start_of_turn>" + std::string(m[i].role == "assistant" ? "model" : m[i].role) + "\n";
        if (i == first && has_system) out += m[0].content + system_separator_;
        out += strip(m[i].content) + "<end_of_turn>\n";
      }
      if (add_generation_prompt) out += "<start_of_turn>model\n";
      break;
    }
    case ChatFamily::llama3:
      for (size_t i = 0; i < m.size(); ++i) {
        if (i == 0 && writes_bos_) out += bos_;
        out += "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n" + strip(m[i].content) + "<|eot_id|>";
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFamily::llama2: {
      // The reply follows "[/INST]" directly: the template has no generation prompt.
      const size_t first = has_system ? 1 : 0;
      check_alternation(m, first, origin_);
      for (size_t i = first; i < m.size(); ++i) {
        std::string content = m[i].content;
        if (i == first && has_system) content = "<<SYS>>\n" + m[0].content + "\n<</SYS>>\n\n" + content;
        if (m[i].role == "user") out += bos_ + "[INST] " + strip(content) + " [/INST]";
        else out += " " + strip(content) + " " + eos_;
      }
      break;
    }
    case ChatFamily::llama3_1: {
      check_roles(m, origin_);
      if (writes_bos_) out += bos_;
      out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ";
      out += date_string_.empty() ? format_date(today_ ? *today_ : local_today(), false) : date_string_;
      out += "\n\n";
      if (has_system) out += strip(m[0].content);
      out += "<|eot_id|>";
      for (size_t i = has_system ? 1 : 0; i < m.size(); ++i)
        out += "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n" + strip(m[i].content) + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    }
    case ChatFamily::qwen3: {
      check_roles(m, origin_);
      if (has_system) out += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";
      // The last user message (a tool response in a user message would not count; reach has none):
      // assistant turns after it keep their reasoning.
      size_t last_query = m.size() - 1;
      for (size_t i = m.size(); i-- > 0;)
        if (m[i].role == "user" &&
            !(starts_with(m[i].content, "<tool_response>") && ends_with(m[i].content, "</tool_response>"))) {
          last_query = i;
          break;
        }
      for (size_t i = 0; i < m.size(); ++i) {
        if (m[i].role == "user" || (m[i].role == "system" && i != 0)) {
          out += "<|im_start|>" + m[i].role + "\n" + m[i].content + "<|im_end|>\n";
        } else if (m[i].role == "assistant") {
          const Thought t = split_thought(m[i].content);
          if (i > last_query && (i + 1 == m.size() || !t.reasoning.empty()))
            out += "<|im_start|>assistant\n<think>\n" + std::string(rstrip_char(lstrip_char(t.reasoning, '\n'), '\n')) +
                   "\n</think>\n\n" + std::string(lstrip_char(t.content, '\n'));
          else
            out += "<|im_start|>assistant\n" + t.content;
          out += "<|im_end|>\n";
        }
      }
      if (add_generation_prompt) {
        out += "<|im_start|>assistant\n";
        if (thinking_ == false) out += "<think>\n\n</think>\n\n";
      }
      break;
    }
    case ChatFamily::smollm3: {
      check_roles(m, origin_);
      bool think = thinking_.value_or(true);
      std::string instructions;
      if (has_system) {
        const std::string& sys = m[0].content;
        if (has(sys, "/no_think")) think = false;
        else if (has(sys, "/think")) think = true;
        instructions = rstrip(replace_all(replace_all(sys, "/no_think", ""), "/think", ""));
      }
      out += "<|im_start|>system\n";
      if (has_system && has(m[0].content, "/system_override")) {
        out += rstrip(replace_all(instructions, "/system_override", "")) + "<|im_end|>\n";
      } else {
        // Without tools the template closes no system turn: no <|im_end|> here, as it renders.
        const ChatDate today = today_ ? *today_ : local_today();
        out += "## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: " + format_date(today, true) +
               "\nReasoning Mode: " + (think ? "/think" : "/no_think") + "\n\n## Custom Instructions\n\n";
        out += !instructions.empty() ? instructions + "\n\n" : think ? think_instructions_ : plain_instructions_;
      }
      for (const auto& msg : m) {
        if (msg.role == "user") {
          out += "<|im_start|>user\n" + msg.content + "<|im_end|>\n";
        } else if (msg.role == "assistant") {
          out += "<|im_start|>assistant\n";
          if (!think) out += "<think>\n\n</think>\n";
          out += std::string(lstrip_char(msg.content, '\n')) + "<|im_end|>\n";
        }
      }
      if (add_generation_prompt) {
        out += "<|im_start|>assistant\n";
        if (!think) out += "<think>\n\n</think>\n";
      }
      break;
    }
    case ChatFamily::mistral: {
      // The reply follows "[/INST]" directly: the template has no generation prompt.
      const size_t first = has_system ? 1 : 0;
      check_alternation(m, first, origin_);
      const std::string inst = inst_space_ ? "[INST] " : "[INST]";
      out += bos_;
      for (size_t i = first; i < m.size(); ++i) {
        if (m[i].role == "user") {
          // The system message goes into the last user message only (none when the conversation
          // ends on the assistant's turn).
          out += inst + (i + 1 == m.size() && has_system ? m[0].content + "\n\n" : "") + m[i].content + "[/INST]";
        } else if (m[i].role == "assistant") {
          out += (assistant_trim_ ? " " + strip(m[i].content) : m[i].content) + eos_;
        } else {
          raise(origin_, "message " + std::to_string(i + 1) + " has role '" + m[i].role +
                             "': the template supports user and assistant roles after an optional first system "
                             "message");
        }
      }
      break;
    }
    case ChatFamily::phi3:
    case ChatFamily::phi4: {
      check_roles(m, origin_);
      const bool phi3 = family_ == ChatFamily::phi3;
      for (const auto& msg : m) {
        if (phi3 && skip_empty_system_ && msg.role == "system" && msg.content.empty()) continue;
        out += "<|" + msg.role + "|>" + (phi3 ? "\n" : "") + msg.content + "<|end|>" + (phi3 ? "\n" : "");
      }
      out += add_generation_prompt ? (phi3 ? "<|assistant|>\n" : "<|assistant|>") : eos_;
      break;
    }
    case ChatFamily::olmo2: {
      check_roles(m, origin_);
      if (writes_bos_) out += bos_;
      for (size_t i = 0; i < m.size(); ++i) {
        out += "<|" + m[i].role + "|>\n" + m[i].content;
        if (m[i].role == "assistant") out += eos_;
        if (m[i].role != "assistant" || i + 1 < m.size()) out += "\n";
      }
      if (add_generation_prompt) out += "<|assistant|>\n";
      break;
    }
    case ChatFamily::harmony: {
      const ChatDate today = today_ ? *today_ : local_today();
      out += "<|start|>system<|message|>" + model_identity_ + "\nKnowledge cutoff: 2024-06\nCurrent date: " +
             iso_date(today) + "\n\nReasoning: " + reasoning_effort_.value_or("medium") +
             "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>";
      const bool developer = m[0].role == "system" || m[0].role == "developer";
      if (developer && !m[0].content.empty())
        out += "<|start|>developer<|message|># Instructions\n\n" + m[0].content + "\n\n<|end|>";
      for (size_t i = developer ? 1 : 0; i < m.size(); ++i) {
        const ChatMessage& msg = m[i];
        if (msg.role == "assistant") {
          if (has(msg.content, "<|channel|>analysis<|message|>") || has(msg.content, "<|channel|>final<|message|>"))
            raise(origin_, "message " + std::to_string(i + 1) +
                               " has <|channel|> tags in its content: pass the final channel's text only");
          // <|return|> ends a reply (training data); a turn the conversation continues after ends in <|end|>.
          const bool last = i + 1 == m.size() && !add_generation_prompt;
          out += "<|start|>assistant<|channel|>final<|message|>" + msg.content + (last ? "<|return|>" : "<|end|>");
        } else if (msg.role == "user") {
          out += "<|start|>user<|message|>" + msg.content + "<|end|>";
        } else if (msg.role == "tool") {
          raise(origin_, "message " + std::to_string(i + 1) +
                             " has role 'tool': the template wants an assistant tool call before it, and reach "
                             "renders no tool calls");
        }
        // The template writes nothing for other roles (a system message after the first).
      }
      if (add_generation_prompt) out += "<|start|>assistant";
      break;
    }
  }
  return out;
}

ChatPrompt encode_chat(const Tokenizer& tk, const ChatTemplate& t, std::span<const ChatMessage> messages) {
  ChatPrompt c;
  c.ids = tk.encode(t.render(messages, true), false);
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
