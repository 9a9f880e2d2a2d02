// Chat templates recognised by family and rendered in C++ (see chat_template.hpp for why).
#include "runtime/text/chat_template.hpp"

#include <algorithm>
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
    std::string quoted = "'" + std::string(body) + "'";
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

}  // namespace

ChatTemplate ChatTemplate::from_jinja(std::string_view text, const std::string& origin, std::string bos_token,
                                      std::string eos_token) {
  ChatTemplate t;
  t.origin_ = origin;
  t.bos_ = std::move(bos_token);
  t.eos_ = std::move(eos_token);
  if (has(text, "<start_of_turn>")) {
    t.family_ = ChatFamily::gemma;
    t.writes_bos_ = has(text, "bos_token");
    auto sep = gemma_system_separator(text);
    t.system_role_ = sep.has_value();
    t.system_separator_ = sep.value_or("");
  } else if (has(text, "<|start_header_id|>")) {
    if (has(text, "Cutting Knowledge Date") || has(text, "date_string") || has(text, "tools"))
      throw Error(ErrorCode::unsupported,
                  origin + ": a Llama 3.1-style chat template (knowledge-date system header, tools); reach renders "
                           "the original Llama 3 Instruct form only; write the prompt out with -p instead");
    t.family_ = ChatFamily::llama3;
    t.writes_bos_ = has(text, "bos_token");
  } else if (has(text, "<|im_start|>")) {
    t.family_ = ChatFamily::chatml;
    if (auto s = chatml_default_system(text)) {
      t.has_default_system_ = true;
      t.default_system_ = *s;
    }
  } else if (has(text, "[INST]") && has(text, "<<SYS>>")) {
    t.family_ = ChatFamily::llama2;
  } else {
    throw Error(ErrorCode::unsupported,
                origin + ": chat template of an unknown family: reach recognises ChatML (<|im_start|>), Gemma "
                         "(<start_of_turn>), Llama 3 (<|start_header_id|>) and Llama 2 ([INST] with <<SYS>>); "
                         "write the prompt out with -p instead");
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
  } else {
    throw Error(ErrorCode::unsupported,
                origin + ": no chat template (GGUF tokenizer.chat_template, tokenizer_config.json chat_template) "
                         "and no turn tokens reach recognises (<start_of_turn>, <|start_header_id|>, <|im_start|>) "
                         "in the vocabulary; write the prompt out with -p instead");
  }
  return t;
}

const char* ChatTemplate::family_name() const {
  switch (family_) {
    case ChatFamily::chatml: return "chatml";
    case ChatFamily::gemma: return "gemma";
    case ChatFamily::llama3: return "llama3";
    case ChatFamily::llama2: return "llama2";
  }
  return "?";
}

std::string ChatTemplate::end_of_turn() const {
  switch (family_) {
    case ChatFamily::chatml: return "<|im_end|>";
    case ChatFamily::gemma: return "<end_of_turn>";
    case ChatFamily::llama3: return "<|eot_id|>";
    case ChatFamily::llama2: return eos_;
  }
  return {};
}

std::string ChatTemplate::render(std::span<const ChatMessage> m, bool add_generation_prompt) const {
  if (m.empty()) raise(origin_, "no messages to render");
  std::string out;
  const bool has_system = m[0].role == "system";
  switch (family_) {
    case ChatFamily::chatml:
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
  if (auto id = tk.eos_id()) c.stop_ids.push_back(*id);
  return c;
}

}  // namespace reach
