// A reply split into text and tool calls as it streams (see tool_calls.hpp).
#include "runtime/serve/tool_calls.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "runtime/formats/json_parse.hpp"
#include "runtime/constrain/token_trie.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer.hpp"

namespace reach::serve {

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The longest tail of `s` that is a proper prefix of `tag` (text that may still become the tag).
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

// The head of a call object, `{"name": "NAME", "arguments": ` (any JSON whitespace): where its
// arguments value starts.  more: the text ends inside the head; bad: it is not this head.
struct Head {
  enum { ok, more, bad } state = more;
  std::string name;
  size_t value_at = 0;
};

Head read_head(std::string_view s) {
  Head h;
  size_t i = 0;
  auto ws = [&] {
    while (i < s.size() && is_space(s[i])) ++i;
  };
  // Reads `lit` at i: true when it is there, false (state set) when not or not yet.
  auto lit = [&](std::string_view word) {
    ws();
    const size_t n = std::min(word.size(), s.size() - i);
    if (s.substr(i, n) != word.substr(0, n)) {
      h.state = Head::bad;
      return false;
    }
    if (n < word.size()) {
      h.state = Head::more;
      return false;
    }
    i += n;
    return true;
  };
  if (!lit("{") || !lit("\"name\"") || !lit(":")) return h;
  ws();
  if (i == s.size()) return h;
  if (s[i] != '"') {
    h.state = Head::bad;
    return h;
  }
  size_t end = i + 1;
  for (bool esc = false; end < s.size(); ++end) {
    if (esc)
      esc = false;
    else if (s[end] == '\\')
      esc = true;
    else if (s[end] == '"')
      break;
  }
  if (end == s.size()) return h;
  try {
    h.name = nlohmann::json::parse(s.substr(i, end + 1 - i)).get<std::string>();
  } catch (const nlohmann::json::exception&) {
    h.state = Head::bad;
    return h;
  }
  i = end + 1;
  if (!lit(",")) return h;
  ws();
  // "arguments" (Qwen) or "parameters" (Llama 3.1; some other models).
  const std::string_view rest = s.substr(i);
  const std::string_view key = rest.substr(0, 2) == "\"p" ? "\"parameters\"" : "\"arguments\"";
  if (!lit(key) || !lit(":")) return h;
  ws();
  if (i == s.size()) return h;
  if (s[i] != '{') {
    h.state = Head::bad;
    return h;
  }
  h.state = Head::ok;
  h.value_at = i;
  return h;
}

}  // namespace

std::optional<ToolSyntax> ToolSyntax::for_template(const ChatTemplate& t) {
  if (!t.takes_tools()) return std::nullopt;
  std::optional<ToolSyntax> s;
  if (t.family() == ChatFamily::chatml || t.family() == ChatFamily::qwen3 || t.family() == ChatFamily::smollm3)
    s = ToolSyntax{"<tool_call>", "</tool_call>"};
  else if (t.family() == ChatFamily::llama3_1)
    s = ToolSyntax{"", "", "parameters"};
  else if (t.family() == ChatFamily::mistral)
    s = ToolSyntax{"[TOOL_CALLS]", "", "arguments", true, true};
  else if (t.family() == ChatFamily::phi4)
    s = ToolSyntax{"<|tool_call|>", "<|/tool_call|>", "arguments", true};
  else if (t.family() == ChatFamily::harmony) {
    s = ToolSyntax{"<tool_call>", "</tool_call>"};
    s->harmony = true;
  }
  if (s) s->forced = t.tool_call_prefix();
  return s;
}

std::shared_ptr<const ToolCallForms> ToolSyntax::call_forms(std::span<const std::string> names,
                                                            std::span<const std::shared_ptr<const JsonGrammar>> grammars,
                                                            const Tokenizer& tk, bool forced_call) const {
  auto f = std::make_shared<ToolCallForms>();
  // Where the reply is the call (Llama 3.1's object, Mistral's and Phi-4-mini's list), it opens only
  // the reply and nothing follows it.
  f->in_call = forced_call;
  f->end_after_call = forced_call || list || open.empty();
  f->at_start = list || open.empty();
  const auto trie = TokenTrie::for_tokenizer(tk);
  using Seg = ToolCallSegment;
  auto text = [](std::string s) { return Seg{Seg::text, std::move(s), -1, nullptr}; };
  // A special token where the vocabulary has it as one (its bytes empty to the sampler), else its text.
  auto token = [&](const std::string& s) {
    const auto id = tk.find(s);
    return id && trie->bytes(*id).empty() ? Seg{Seg::special, "", *id, nullptr} : text(s);
  };
  // The text a forced prefix writes after the opener tag ("\n" after <tool_call>, " " after [TOOL_CALLS]),
  // which a forced call's prompt has written already; Llama 3.1's forced call opens its object itself.
  const std::string lead =
      forced_call || forced.substr(0, open.size()) != open ? std::string() : forced.substr(open.size());
  const std::string brace = forced_call && open.empty() && !harmony ? "{" : "";
  if (harmony) {
    // A recipient is written in a message's header, never in its text.
    f->opener = "to=functions.";
    for (const char* m : {"<|start|>", "<|channel|>"})
      if (const auto id = tk.find(m)) f->header_open_ids.push_back(*id);
    if (const auto id = tk.find("<|message|>")) f->header_close_ids.push_back(*id);
  } else if (open.empty()) {
    f->opener = "{";
  } else {
    f->opener = open;
    if (const auto id = tk.find(open); id && trie->bytes(*id).empty()) f->opener_ids.push_back(*id);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const Seg args{Seg::json, "", -1, grammars[i]};
    const std::string& n = names[i];
    if (harmony)
      f->calls.push_back({text(n + " "), token("<|constrain|>"), text("json"), token("<|message|>"), args});
    else if (open.empty())
      f->calls.push_back({text(brace + "\"name\": \"" + n + "\", \"" + arguments_key + "\": "), args, text("}")});
    else if (list && !close.empty())
      f->calls.push_back(
          {text(lead + "[{\"name\": \"" + n + "\", \"arguments\": "), args, text("}]"), token(close)});
    else if (list)
      f->calls.push_back({text(lead + "[{\"name\": \"" + n + "\", \"arguments\": "), args, text("}]")});
    else
      f->calls.push_back({text(lead + "{\"name\": \"" + n + "\", \"arguments\": "), args, text("}\n" + close)});
  }
  // Empty texts are no segment (a form of zero bytes would never move on).
  for (auto& c : f->calls)
    std::erase_if(c, [](const Seg& s) { return s.kind == Seg::text && s.bytes.empty(); });
  return f;
}

namespace {

std::shared_ptr<const JsonGrammar> arguments_grammar(const nlohmann::ordered_json& schema, size_t i, bool strict) {
  try {
    return schema.empty() ? JsonGrammar::any_object() : JsonGrammar::from_schema(schema);
  } catch (const Error& e) {
    if (strict) throw ToolSchemaError(i, e.what());
    return JsonGrammar::any_object();
  }
}

}  // namespace

ToolPlan plan_tool_calls(const ToolSyntax& s, std::span<const std::string> names,
                         std::span<const nlohmann::ordered_json> schemas, ToolMode mode, size_t function,
                         const Tokenizer& tk) {
  ToolPlan p;
  const auto trie = TokenTrie::for_tokenizer(tk);
  if (mode == ToolMode::automatic) {
    // Free text, but a call, once the model opens one, follows the schema of the tool it names.
    std::vector<std::shared_ptr<const JsonGrammar>> g;
    for (size_t i = 0; i < names.size(); ++i) g.push_back(arguments_grammar(schemas[i], i, false));
    p.constraint = std::make_shared<JsonConstraint>(s.call_forms(names, g, tk, false), trie);
    return p;
  }
  const bool one = mode == ToolMode::function || names.size() == 1;
  const size_t i = mode == ToolMode::function ? function : 0;
  if (s.harmony) {
    // The call's header is opened in the prompt (through the name when it is known) and the reply
    // continues it: the arguments, or the name and the arguments.
    if (one) {
      p.reply_prefix = s.harmony_header(names[i]);
      p.constraint = std::make_shared<JsonConstraint>(arguments_grammar(schemas[i], i, true), trie);
    } else {
      std::vector<std::shared_ptr<const JsonGrammar>> g;
      for (size_t k = 0; k < names.size(); ++k) g.push_back(arguments_grammar(schemas[k], k, true));
      p.reply_prefix = s.forced_prefix();
      p.constraint = std::make_shared<JsonConstraint>(s.call_forms(names, g, tk, true), trie);
    }
    return p;
  }
  p.reply_prefix = s.forced_prefix();
  p.in_call = true;
  if (!one) {
    // Several tools under "required": the call's forms, the name the model writes picking the schema.
    std::vector<std::shared_ptr<const JsonGrammar>> g;
    for (size_t k = 0; k < names.size(); ++k) g.push_back(arguments_grammar(schemas[k], k, true));
    p.constraint = std::make_shared<JsonConstraint>(s.call_forms(names, g, tk, true), trie);
    return p;
  }
  // The call is opened in the prompt and its object constrained: {"name": NAME, KEY: ARGUMENTS}, the
  // arguments the named tool's schema.
  nlohmann::ordered_json name = {{"const", names[i]}}, arguments = {{"type", "object"}};
  if (!schemas[i].empty()) arguments = schemas[i];
  nlohmann::ordered_json call = {{"type", "object"},
                                 {"properties", {{"name", name}, {s.arguments_key, arguments}}},
                                 {"required", {"name", s.arguments_key}}};
  if (s.list) call = {{"type", "array"}, {"items", call}, {"minItems", 1}, {"maxItems", 1}};
  try {
    p.constraint = std::make_shared<JsonConstraint>(JsonGrammar::from_schema(call), trie);
  } catch (const Error& e) {
    throw ToolSchemaError(i, e.what());
  }
  return p;
}

ToolCallStream::ToolCallStream(ToolSyntax syntax, bool in_call, size_t max_calls)
    : syntax_(std::move(syntax)),
      max_calls_(max_calls),
      phase_(in_call                                ? (syntax_.list ? Phase::list : Phase::seek_name)
             : syntax_.open.empty() || syntax_.list ? Phase::sniff
                                                    : Phase::text) {}

ToolPiece ToolCallStream::push(std::string_view text) {
  ToolPiece out;
  buf_.append(text);
  step(out, false);
  return out;
}

ToolPiece ToolCallStream::finish() {
  ToolPiece out;
  step(out, true);
  if (calls_ == 0) out.content += held_space_;
  held_space_.clear();
  return out;
}

void ToolCallStream::step(ToolPiece& out, bool end) {
  for (bool moved = true; moved;) {
    switch (phase_) {
      case Phase::text: moved = step_text(out, end); break;
      case Phase::seek_name: moved = step_head(out, end); break;
      case Phase::arguments: moved = step_arguments(out, end); break;
      case Phase::after_arguments: moved = step_tail(end); break;
      case Phase::whole: moved = step_whole(out, end); break;
      case Phase::ignore:
        buf_.clear();
        moved = false;
        break;
      case Phase::sniff: moved = step_sniff(end); break;
      case Phase::list: moved = step_list(out, end); break;
      case Phase::plain:
        emit_text(out, buf_);
        buf_.clear();
        moved = false;
        break;
    }
  }
}

bool ToolCallStream::step_text(ToolPiece& out, bool end) {
  const size_t at = buf_.find(syntax_.open);
  if (at == std::string::npos) {
    const size_t keep = end ? 0 : partial_tag(buf_, syntax_.open);
    emit_text(out, std::string_view(buf_).substr(0, buf_.size() - keep));
    buf_.erase(0, buf_.size() - keep);
    return false;
  }
  emit_text(out, std::string_view(buf_).substr(0, at));
  buf_.erase(0, at + syntax_.open.size());
  phase_ = calls_ < max_calls_ ? Phase::seek_name : Phase::ignore;
  return true;
}

bool ToolCallStream::step_sniff(bool end) {
  size_t first = buf_.find_first_not_of(" \t\r\n");
  if (syntax_.list && first != std::string::npos) {
    // Mistral: the [TOOL_CALLS] tag where the decoder wrote it, then the array.
    const std::string_view rest = std::string_view(buf_).substr(first);
    if (!end && rest.size() < syntax_.open.size() && syntax_.open.substr(0, rest.size()) == rest) return false;
    if (rest.substr(0, syntax_.open.size()) == syntax_.open)
      first = buf_.find_first_not_of(" \t\r\n", first + syntax_.open.size());
  }
  if (first == std::string::npos && !end) return false;
  const char want = syntax_.list ? '[' : '{';
  phase_ = first != std::string::npos && buf_[first] == want && max_calls_ > 0
               ? (syntax_.list ? Phase::list : Phase::seek_name)
               : Phase::plain;
  return true;
}

bool ToolCallStream::step_list(ToolPiece& out, bool end) {
  if (!end) return false;
  std::string_view text = buf_;
  const size_t tag = text.find(syntax_.open);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (tag != std::string_view::npos && tag == first) text.remove_prefix(tag + syntax_.open.size());
  // Phi-4-mini's closing tag, where the decoder wrote it.
  const size_t last = text.find_last_not_of(" \t\r\n");
  if (!syntax_.close.empty() && last != std::string_view::npos && last + 1 >= syntax_.close.size() &&
      text.substr(last + 1 - syntax_.close.size(), syntax_.close.size()) == syntax_.close)
    text = text.substr(0, last + 1 - syntax_.close.size());
  nlohmann::ordered_json list;
  try {
    (void)parse_json_bounded(text, 64);
    list = nlohmann::ordered_json::parse(text);
  } catch (const std::exception&) {
  }
  const bool calls = list.is_array() && !list.empty() && std::all_of(list.begin(), list.end(), [](const auto& c) {
                       return c.is_object() && c.contains("name") && c["name"].is_string();
                     });
  if (!calls) {
    emit_text(out, buf_);
  } else {
    for (const auto& c : list) {
      if (calls_ >= max_calls_) break;
      open_call(out, c["name"].template get<std::string>());
      const nlohmann::ordered_json args = c.contains("arguments") ? c["arguments"] : nlohmann::ordered_json::object();
      add_arguments(out, args.is_string() ? args.get<std::string>() : args.dump());
      close_call();
    }
  }
  buf_.clear();
  phase_ = Phase::ignore;
  return false;
}

bool ToolCallStream::step_head(ToolPiece& out, bool end) {
  const Head h = read_head(buf_);
  if (h.state == Head::ok) {
    open_call(out, h.name);
    pos_ = h.value_at;
    depth_ = 0;
    in_string_ = escaped_ = false;
    phase_ = Phase::arguments;
    return true;
  }
  // Not the expected head (or the call ends before it is whole): the call goes out at its end.
  if (h.state == Head::bad || end || (!syntax_.close.empty() && buf_.find(syntax_.close) != std::string::npos)) {
    phase_ = Phase::whole;
    return true;
  }
  return false;
}

bool ToolCallStream::step_arguments(ToolPiece& out, bool end) {
  const size_t from = pos_;
  bool done = false, cut = false;
  for (; pos_ < buf_.size() && !done && !cut; ++pos_) {
    const char c = buf_[pos_];
    if (in_string_) {
      if (escaped_)
        escaped_ = false;
      else if (c == '\\')
        escaped_ = true;
      else if (c == '"')
        in_string_ = false;
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      done = --depth_ == 0;
    } else if (c == '<' && !syntax_.close.empty()) {
      // Outside a string: the closing tag before the arguments closed (or maybe it, still arriving).
      const std::string_view rest = std::string_view(buf_).substr(pos_);
      if (rest.substr(0, syntax_.close.size()) == syntax_.close ||
          (!end && syntax_.close.substr(0, rest.size()) == rest)) {
        cut = true;
        break;
      }
    }
  }
  add_arguments(out, std::string_view(buf_).substr(from, pos_ - from));
  if (done) {
    phase_ = Phase::after_arguments;
    return true;
  }
  if (cut && std::string_view(buf_).substr(pos_, syntax_.close.size()) == syntax_.close) {  // cut: close non-empty
    phase_ = Phase::after_arguments;
    return true;
  }
  if (end) {
    close_call();
    buf_.clear();
    phase_ = after_call();
  }
  return false;
}

bool ToolCallStream::step_tail(bool end) {
  // Tagless: the reply is the call, which ends with its object; what follows is dropped.
  const size_t at = syntax_.close.empty() ? std::string::npos : buf_.find(syntax_.close, std::min(pos_, buf_.size()));
  if (at == std::string::npos && !end && !syntax_.close.empty()) return false;
  buf_.erase(0, at == std::string::npos ? buf_.size() : at + syntax_.close.size());
  close_call();
  phase_ = after_call();
  return true;
}

bool ToolCallStream::step_whole(ToolPiece& out, bool end) {
  const size_t at = syntax_.close.empty() ? std::string::npos : buf_.find(syntax_.close);
  if (at == std::string::npos && !end) return false;
  const std::string block = buf_.substr(0, at);
  buf_.erase(0, at == std::string::npos ? buf_.size() : at + syntax_.close.size());
  phase_ = after_call();
  // A call object in another key order: its name and arguments (compact); anything else is text.
  nlohmann::ordered_json call;
  try {
    (void)parse_json_bounded(block, 64);
    call = nlohmann::ordered_json::parse(block);
  } catch (const std::exception&) {
  }
  const bool is_call = call.is_object() && call.contains("name") && call["name"].is_string();
  if (!is_call) {
    emit_text(out, syntax_.open + block + (at == std::string::npos ? "" : syntax_.close));
    return true;
  }
  open_call(out, call["name"].get<std::string>());
  const std::string key = call.contains(syntax_.arguments_key) ? syntax_.arguments_key
                          : call.contains("arguments")         ? "arguments"
                                                               : "parameters";
  const nlohmann::ordered_json args = call.contains(key) ? call[key] : nlohmann::ordered_json::object();
  add_arguments(out, args.is_string() ? args.get<std::string>() : args.dump());
  close_call();
  return true;
}

// After a call: more text and calls, or (tagless: the reply was the call) nothing.
ToolCallStream::Phase ToolCallStream::after_call() const { return syntax_.open.empty() ? Phase::ignore : Phase::text; }

void ToolCallStream::open_call(ToolPiece& out, std::string name) {
  out.calls.push_back({calls_, std::move(name), ""});
  call_open_ = true;
  held_space_.clear();  // whitespace before a call is not content
}

void ToolCallStream::add_arguments(ToolPiece& out, std::string_view bytes) {
  if (bytes.empty()) return;
  if (out.calls.empty() || out.calls.back().index != calls_) out.calls.push_back({calls_, "", ""});
  out.calls.back().arguments.append(bytes);
}

void ToolCallStream::close_call() {
  if (call_open_) ++calls_;
  call_open_ = false;
}

// Trailing whitespace is held until text follows it: before a call it was only a separator.
void ToolCallStream::emit_text(ToolPiece& out, std::string_view text) {
  size_t body = text.size();
  while (body > 0 && is_space(text[body - 1])) --body;
  if (body > 0) {
    out.content += held_space_;
    held_space_.clear();
    out.content.append(text.substr(0, body));
  }
  held_space_.append(text.substr(body));
}

}  // namespace reach::serve
