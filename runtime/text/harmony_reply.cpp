// The harmony reply splitter (see harmony_reply.hpp).
#include "runtime/text/harmony_reply.hpp"

#include <nlohmann/json.hpp>

#include "runtime/text/tokenizer.hpp"

namespace reach {

namespace {

// The markers that structure a reply.  <|constrain|> belongs to a tool call's header.
constexpr std::string_view kMarkers[] = {"<|start|>", "<|channel|>", "<|message|>", "<|end|>",
                                         "<|return|>", "<|call|>",   "<|constrain|>"};

// The marker text starts with, if any; `partial` is set when text is a proper prefix of one (more
// text may complete it).
std::string_view marker_at(std::string_view text, bool& partial) {
  partial = false;
  for (std::string_view m : kMarkers) {
    if (text.substr(0, m.size()) == m) return m;
    if (text.size() < m.size() && m.substr(0, text.size()) == text) partial = true;
  }
  return {};
}

// The channel a header names: the word after <|channel|> ("<|channel|>analysis",
// " to=functions.f<|channel|>commentary <|constrain|>json").  A header without one: "final", the
// answer (a model that writes no channel talks to the user).
std::string channel_of(std::string_view header) {
  const size_t at = header.find("<|channel|>");
  if (at == std::string_view::npos) return "final";
  size_t b = at + std::string_view("<|channel|>").size();
  while (b < header.size() && header[b] == ' ') ++b;
  size_t e = b;
  while (e < header.size() && header[e] != ' ' && header[e] != '<' && header[e] != '\n') ++e;
  return e > b ? std::string(header.substr(b, e - b)) : "final";
}

// The function a header addresses: NAME of "to=functions.NAME" (before or after the channel), "" for
// none or another recipient.
std::string function_of(std::string_view header) {
  constexpr std::string_view kTo = "to=functions.";
  const size_t at = header.find(kTo);
  if (at == std::string_view::npos) return "";
  size_t b = at + kTo.size(), e = b;
  while (e < header.size() && header[e] != ' ' && header[e] != '<' && header[e] != '\n') ++e;
  return std::string(header.substr(b, e - b));
}

}  // namespace

HarmonyDelta HarmonyReply::push(std::string_view piece) {
  HarmonyDelta out;
  pending_.append(piece);
  const std::string_view p = pending_;
  size_t start = 0, i = 0;
  for (; i < p.size(); ++i) {
    if (p[i] != '<') continue;
    bool partial = false;
    const std::string_view m = marker_at(p.substr(i), partial);
    if (!m.empty()) {
      text(p.substr(start, i - start), out);
      marker(m, out);
      i += m.size() - 1;
      start = i + 1;
    } else if (partial) {
      break;   // hold from here: the next piece may complete a marker
    }
  }
  text(p.substr(start, i - start), out);
  pending_.erase(0, i);
  return out;
}

HarmonyDelta HarmonyReply::flush() {
  HarmonyDelta out;
  text(pending_, out);
  pending_.clear();
  close_call(out);
  // Never a message: not a harmony reply; its text is the answer.
  if (!opened_) out.content = std::move(unopened_);
  unopened_.clear();
  return out;
}

void HarmonyReply::marker(std::string_view m, HarmonyDelta& out) {
  if (!opened_) unopened_.append(m);
  if (state_ == State::ended) return;
  if (m == "<|start|>") {
    close_call(out);
    state_ = State::header;
    header_.clear();
    channel_.clear();
  } else if (m == "<|channel|>" || m == "<|constrain|>") {
    if (state_ != State::header) {   // a header without its <|start|>: it starts here
      close_call(out);
      state_ = State::header;
      header_.clear();
      channel_.clear();
    }
    header_.append(m);
  } else if (m == "<|message|>") {
    const std::string header = state_ == State::header ? header_ : std::string();
    close_call(out);
    channel_ = channel_of(header);
    function_ = split_calls_ ? function_of(header) : std::string();
    if (!function_.empty()) out.calls += "<tool_call>{\"name\": " + nlohmann::json(function_).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ", \"arguments\": ";
    state_ = State::body;
    opened_ = true;
  } else if (m == "<|end|>") {
    close_call(out);
    state_ = State::between;
    channel_.clear();
  } else {   // <|return|>, <|call|>: the reply is over
    close_call(out);
    state_ = State::ended;
    channel_.clear();
  }
}

void HarmonyReply::close_call(HarmonyDelta& out) {
  if (function_.empty()) return;
  out.calls += "}</tool_call>";
  function_.clear();
}

void HarmonyReply::text(std::string_view t, HarmonyDelta& out) {
  if (t.empty()) return;
  if (!opened_) unopened_.append(t);
  switch (state_) {
    case State::header: header_.append(t); break;
    case State::body:
      // A call's arguments; analysis is the model's reasoning; commentary (preambles) is not the
      // answer either.
      if (!function_.empty())
        out.calls.append(t);
      else
        (channel_ == "analysis" || channel_ == "commentary" ? out.reasoning : out.content).append(t);
      break;
    case State::between:
    case State::ended: break;
  }
}

std::string harmony_piece(const Tokenizer& tokenizer, int32_t id, const std::string& decoded) {
  return tokenizer.is_special(id) ? decoded + tokenizer.token_text(id) : decoded;
}

}  // namespace reach
