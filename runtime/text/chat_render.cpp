// The renderer of each chat family (the table of chat_template.cpp picks one): each writes what its
// family's Jinja template writes, byte for byte (tests/test_chat_template.cpp runs jinja2 on the real
// templates).
#include "runtime/text/chat_render.hpp"

#include <cstdio>
#include <ctime>
#include <optional>

#include "base/error.hpp"
#include "base/platform/local_time.hpp"
#include "runtime/text/tool_json.hpp"

namespace reach {

namespace chat {

bool has(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

[[noreturn]] void raise(const std::string& origin, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, origin + ": " + what);
}

}  // namespace chat

namespace {

using chat::has;
using chat::raise;

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
  const std::tm tm = platform::local_time(now);
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
void check_roles(std::span<const ChatMessage> m, const std::string& origin, bool tool_role = false) {
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i].role != "system" && m[i].role != "user" && m[i].role != "assistant" &&
        !(tool_role && (m[i].role == "tool" || m[i].role == "ipython")))
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

bool has_tool_history(std::span<const ChatMessage> m) {
  for (const ChatMessage& msg : m)
    if (msg.role == "tool" || !msg.tool_calls.empty()) return true;
  return false;
}

// Qwen 2.5's and Qwen3's tool block in the system turn, its fixed text as their templates write it.
constexpr std::string_view kQwenToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kQwenToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

std::string qwen_tools(std::span<const ChatTool> tools, const std::string& origin) {
  std::string out(kQwenToolsHead);
  for (const ChatTool& tool : tools)
    out.append("\n").append(python_json(parse_tool_json(tool.json, origin + ": tool '" + tool.name + "'")));
  return out += kQwenToolsTail;
}

// One call as Qwen writes it: the arguments object through tojson.
std::string qwen_call(const ToolCall& call, const std::string& origin) {
  return "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": " +
         python_json(parse_tool_json(call.arguments, origin + ": the arguments of call '" + call.id + "'")) +
         "}\n</tool_call>";
}

// A tool result: consecutive ones share one user turn.
void qwen_tool_response(std::span<const ChatMessage> m, size_t i, std::string& out) {
  if (i == 0 || m[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n" + m[i].content + "\n</tool_response>";
  if (i + 1 == m.size() || m[i + 1].role != "tool") out += "<|im_end|>\n";
}

// Qwen 2.5's template when it has tools or tool history (its other path is plain ChatML).
std::string qwen2_5_tools(const std::string& origin, std::span<const ChatMessage> m, bool add_generation_prompt,
                          std::span<const ChatTool> tools, const std::string& default_system) {
  std::string out;
  const bool has_system = m[0].role == "system";
  if (!tools.empty())
    out.append("<|im_start|>system\n")
        .append(has_system ? m[0].content : default_system)
        .append("\n\n")
        .append(qwen_tools(tools, origin));
  else if (has_system)
    out += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";
  else
    out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
  for (size_t i = 0; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "user" || (msg.role == "system" && i != 0) || (msg.role == "assistant" && msg.tool_calls.empty())) {
      out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
    } else if (msg.role == "assistant") {
      out += "<|im_start|>assistant";
      if (!msg.content.empty()) out += "\n" + msg.content;
      for (const ToolCall& call : msg.tool_calls) out.append("\n").append(qwen_call(call, origin));
      out += "<|im_end|>\n";
    } else if (msg.role == "tool") {
      qwen_tool_response(m, i, out);
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace

std::string ChatRender::chatml(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                               std::span<const ChatTool> tools) {
  if (t.takes_tools_) {
    check_roles(m, t.origin_, true);
    if (!tools.empty() || has_tool_history(m))
      return qwen2_5_tools(t.origin_, m, add_generation_prompt, tools, t.default_system_);
  }
  std::string out;
  const bool has_system = m[0].role == "system";
  if (t.known_roles_only_) check_roles(m, t.origin_);
  if (!has_system && t.has_default_system_) out += "<|im_start|>system\n" + t.default_system_ + "<|im_end|>\n";
  for (const auto& msg : m) out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string ChatRender::gemma(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                              std::span<const ChatTool>) {
  std::string out;
  const bool has_system = m[0].role == "system";
  if (has_system && !t.system_role_)
    raise(t.origin_, "this Gemma template has no system role; drop the system message");
  const size_t first = has_system ? 1 : 0;
  check_alternation(m, first, t.origin_);
  if (t.writes_bos_) out += t.bos_;
  for (size_t i = first; i < m.size(); ++i) {
    out += "<start_of_turn>" + std::string(m[i].role == "assistant" ? "model" : m[i].role) + "\n";
    if (i == first && has_system) out += m[0].content + t.system_separator_;
    out += strip(m[i].content) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

std::string ChatRender::llama3(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                               std::span<const ChatTool>) {
  std::string out;
  for (size_t i = 0; i < m.size(); ++i) {
    if (i == 0 && t.writes_bos_) out += t.bos_;
    out += "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n" + strip(m[i].content) + "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// The reply follows "[/INST]" directly: the template has no generation prompt.
std::string ChatRender::llama2(const ChatTemplate& t, std::span<const ChatMessage> m, bool, std::span<const ChatTool>) {
  std::string out;
  const bool has_system = m[0].role == "system";
  const size_t first = has_system ? 1 : 0;
  check_alternation(m, first, t.origin_);
  for (size_t i = first; i < m.size(); ++i) {
    std::string content = m[i].content;
    if (i == first && has_system) content = "<<SYS>>\n" + m[0].content + "\n<</SYS>>\n\n" + content;
    if (m[i].role == "user") out += t.bos_ + "[INST] " + strip(content) + " [/INST]";
    else out += " " + strip(content) + " " + t.eos_;
  }
  return out;
}

std::string ChatRender::llama3_1(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                                 std::span<const ChatTool> tools) {
  std::string out;
  const bool has_system = m[0].role == "system";
  check_roles(m, t.origin_, t.takes_tools_);
  if (t.writes_bos_) out += t.bos_;
  out += "<|start_header_id|>system<|end_header_id|>\n\n";
  // tools = none unless given; the template's tools_in_user_message defaults to true.
  if (!tools.empty()) out += "Environment: ipython\n";
  out += "Cutting Knowledge Date: December 2023\nToday Date: ";
  out += t.date_string_.empty() ? format_date(t.today_ ? *t.today_ : local_today(), false) : t.date_string_;
  out += "\n\n";
  if (has_system) out += strip(m[0].content);
  out += "<|eot_id|>";
  size_t i = has_system ? 1 : 0;
  if (!tools.empty()) {
    // The tools go into the first message after the system message, whatever its role.
    if (i == m.size())
      raise(t.origin_, "Cannot put tools in the first user message when there's no first user message!");
    out +=
        "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for "
        "a function call with its proper arguments that best answers the given prompt.\n\nRespond in the format "
        "{\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use "
        "variables.\n\n";
    for (const ChatTool& tool : tools)
      out.append(python_json(parse_tool_json(tool.json, t.origin_ + ": tool '" + tool.name + "'"), 4)).append("\n\n");
    out += strip(m[i++].content) + "<|eot_id|>";
  }
  for (; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (!msg.tool_calls.empty()) {
      if (msg.tool_calls.size() != 1) raise(t.origin_, "This model only supports single tool-calls at once!");
      const ToolCall& call = msg.tool_calls[0];
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"" + call.name + "\", \"parameters\": " +
             python_json(parse_tool_json(call.arguments, t.origin_ + ": the arguments of call '" + call.id + "'")) +
             "}<|eot_id|>";
    } else if (msg.role == "tool" || msg.role == "ipython") {
      // A string is iterable to Jinja, so the template writes the result through tojson: as a JSON string.
      out += "<|start_header_id|>ipython<|end_header_id|>\n\n" + python_json(msg.content) + "<|eot_id|>";
    } else {
      out += "<|start_header_id|>" + msg.role + "<|end_header_id|>\n\n" + strip(msg.content) + "<|eot_id|>";
    }
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string ChatRender::qwen3(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                              std::span<const ChatTool> tools) {
  std::string out;
  check_roles(m, t.origin_, true);
  if (!tools.empty())
    out.append("<|im_start|>system\n")
        .append(m[0].role == "system" ? m[0].content + "\n\n" : "")
        .append(qwen_tools(tools, t.origin_));
  else if (m[0].role == "system")
    out += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";
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
      const Thought thought = split_thought(m[i].content);
      if (i > last_query && (i + 1 == m.size() || !thought.reasoning.empty()))
        out += "<|im_start|>assistant\n<think>\n" +
               std::string(rstrip_char(lstrip_char(thought.reasoning, '\n'), '\n')) + "\n</think>\n\n" +
               std::string(lstrip_char(thought.content, '\n'));
      else
        out += "<|im_start|>assistant\n" + thought.content;
      for (size_t k = 0; k < m[i].tool_calls.size(); ++k) {
        if (k > 0 || !thought.content.empty()) out += "\n";
        out += qwen_call(m[i].tool_calls[k], t.origin_);
      }
      out += "<|im_end|>\n";
    } else if (m[i].role == "tool") {
      qwen_tool_response(m, i, out);
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (t.thinking_ == false) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string ChatRender::smollm3(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                                std::span<const ChatTool> tools) {
  std::string out;
  const bool has_system = m[0].role == "system";
  check_roles(m, t.origin_, t.takes_tools_);
  bool think = t.thinking_.value_or(true);
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
    const ChatDate today = t.today_ ? *t.today_ : local_today();
    out += "## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: " + format_date(today, true) +
           "\nReasoning Mode: " + (think ? "/think" : "/no_think") + "\n\n## Custom Instructions\n\n";
    out += !instructions.empty() ? instructions + "\n\n" : think ? t.think_instructions_ : t.plain_instructions_;
    if (!tools.empty()) {
      // The template's xml_tools, each written with Python's str(): the system turn then closes.
      out +=
          "### Tools\n\nYou may call one or more functions to assist with the user query.\nYou are provided with "
          "function signatures within <tools></tools> XML tags:\n\n<tools>\n";
      for (const ChatTool& tool : tools)
        out.append(python_str(parse_tool_json(tool.json, t.origin_ + ": tool '" + tool.name + "'"))).append("\n");
      out +=
          "</tools>\n\nFor each function call, return a json object with function name and arguments within "
          "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
          "<args-json-object>}\n</tool_call>\n\n<|im_end|>\n";
    }
  }
  for (const auto& msg : m) {
    if (msg.role == "user") {
      out += "<|im_start|>user\n" + msg.content + "<|im_end|>\n";
    } else if (msg.role == "assistant") {
      out += "<|im_start|>assistant\n";
      if (!think) out += "<think>\n\n</think>\n";
      out += std::string(lstrip_char(msg.content, '\n')) + "<|im_end|>\n";
    } else if (msg.role == "tool") {
      // A result as a user turn; the template writes no calls (an assistant message's tool_calls).
      out += "<|im_start|>user\n" + msg.content + "<|im_end|>\n";
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!think) out += "<think>\n\n</think>\n";
  }
  return out;
}

// The reply follows "[/INST]" directly: the template has no generation prompt.
// The reply follows "[/INST]" directly: the template has no generation prompt.  Tools go before the last
// user message, calls and results as [TOOL_CALLS] / [TOOL_RESULTS] with mistralai's 9-character ids.
std::string ChatRender::mistral(const ChatTemplate& t, std::span<const ChatMessage> m, bool,
                                std::span<const ChatTool> tools) {
  std::string out;
  const bool has_system = m[0].role == "system";
  const size_t first = has_system ? 1 : 0;
  // The alternation the template checks skips tool results and messages with calls.
  size_t turn = 0;
  for (size_t i = first; i < m.size(); ++i) {
    if (m[i].role == "tool" || m[i].role == "tool_results" || !m[i].tool_calls.empty()) continue;
    if ((m[i].role == "user") != (turn++ % 2 == 0))
      raise(t.origin_, "message " + std::to_string(i + 1) + " has role '" + m[i].role +
                           "': after the optional system message, conversation roles must alternate "
                           "user/assistant/user/assistant/...");
  }
  // The template compares messages by value: every user message equal to the last one gets the tools.
  const ChatMessage* last_user = nullptr;
  for (size_t i = first; i < m.size(); ++i)
    if (m[i].role == "user") last_user = &m[i];
  const std::string inst = t.inst_space_ ? "[INST] " : "[INST]";
  const std::string sp = t.inst_space_ ? " " : "";
  auto check_id = [&](const std::string& id) {
    if (id.size() != 9) raise(t.origin_, "Tool call IDs should be alphanumeric strings with length 9!");
  };
  out += t.bos_;
  for (size_t i = first; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "user") {
      if (!tools.empty() && msg.content == last_user->content && msg.tool_calls.empty() && msg.tool_call_id.empty() &&
          msg.name == last_user->name) {
        // Each tool's function, its string values written raw (not escaped), the others through tojson.
        out += "[AVAILABLE_TOOLS]" + sp + "[";
        for (size_t k = 0; k < tools.size(); ++k) {
          const auto tool = parse_tool_json(tools[k].json, t.origin_ + ": tool '" + tools[k].name + "'");
          out += "{\"type\": \"function\", \"function\": {";
          bool first_key = true;
          if (tool.contains("function") && tool["function"].is_object())
            for (auto it = tool["function"].begin(); it != tool["function"].end(); ++it) {
              if (it.key() == "return") continue;
              if (!first_key) out += ", ";
              first_key = false;
              out += it.value().is_string() ? "\"" + it.key() + "\": \"" + it.value().get<std::string>() + "\""
                                            : "\"" + it.key() + "\": " + python_json(it.value());
            }
          out += "}}";
          out += k + 1 < tools.size() ? ", " : "]";
        }
        out += "[/AVAILABLE_TOOLS]";
      }
      // The system message goes into the last message, when it is a user message.
      out += inst + (i + 1 == m.size() && has_system ? m[0].content + "\n\n" : "") + msg.content + "[/INST]";
    } else if (!msg.tool_calls.empty()) {
      out += "[TOOL_CALLS]" + sp + "[";
      for (size_t k = 0; k < msg.tool_calls.size(); ++k) {
        const ToolCall& call = msg.tool_calls[k];
        // tojson of the call's function ({"name", "arguments"}) less its closing brace, then the id.
        nlohmann::ordered_json fn = {{"name", call.name}};
        fn["arguments"] = parse_tool_json(call.arguments, t.origin_ + ": the arguments of call '" + call.id + "'");
        std::string j = python_json(fn);
        j.pop_back();
        out += j;
        check_id(call.id);
        out += ", \"id\": \"" + call.id + "\"}";
        out += k + 1 < msg.tool_calls.size() ? ", " : "]" + t.eos_;
      }
    } else if (msg.role == "assistant") {
      out += (t.assistant_trim_ ? " " + strip(msg.content) : msg.content) + t.eos_;
    } else if (msg.role == "tool" || msg.role == "tool_results") {
      out += "[TOOL_RESULTS]" + sp + "{\"content\": " + msg.content + ", ";
      check_id(msg.tool_call_id);
      out += "\"call_id\": \"" + msg.tool_call_id + "\"}[/TOOL_RESULTS]";
    } else {
      raise(t.origin_, "message " + std::to_string(i + 1) + " has role '" + msg.role +
                           "': the template supports user and assistant roles after an optional first system "
                           "message");
    }
  }
  return out;
}

std::string ChatRender::phi(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                            bool newlines) {
  std::string out;
  check_roles(m, t.origin_);
  for (const auto& msg : m) {
    if (newlines && t.skip_empty_system_ && msg.role == "system" && msg.content.empty()) continue;
    out += "<|" + msg.role + "|>" + (newlines ? "\n" : "") + msg.content + "<|end|>" + (newlines ? "\n" : "");
  }
  out += add_generation_prompt ? (newlines ? "<|assistant|>\n" : "<|assistant|>") : t.eos_;
  return out;
}

std::string ChatRender::phi3(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                             std::span<const ChatTool>) {
  return phi(t, m, add_generation_prompt, true);
}

// Tools go in the system message's "tools" field, the list of their functions through json.dumps with its
// defaults (Phi-4-mini's model card: non-ASCII escaped); without a system message, an empty one carries them.  Results
// are <|tool|> turns; the template writes no past calls.
std::string ChatRender::phi4(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                             std::span<const ChatTool> tools) {
  if (tools.empty()) {
    if (t.takes_tools_)
      check_roles(m, t.origin_, true);
    else
      check_roles(m, t.origin_);
    std::string out;
    for (const auto& msg : m) out += "<|" + msg.role + "|>" + msg.content + "<|end|>";
    return out + (add_generation_prompt ? "<|assistant|>" : t.eos_);
  }
  check_roles(m, t.origin_, true);
  nlohmann::ordered_json functions = nlohmann::ordered_json::array();
  for (const ChatTool& tool : tools) {
    const auto j = parse_tool_json(tool.json, t.origin_ + ": tool '" + tool.name + "'");
    functions.push_back(j.contains("function") ? j["function"] : j);
  }
  std::string out = "<|system|>" + (m[0].role == "system" ? m[0].content : std::string()) + "<|tool|>" +
                    python_json(functions, -1, true) + "<|/tool|><|end|>";
  for (size_t i = m[0].role == "system" ? 1 : 0; i < m.size(); ++i)
    out += "<|" + m[i].role + "|>" + m[i].content + "<|end|>";
  return out + (add_generation_prompt ? "<|assistant|>" : t.eos_);
}

std::string ChatRender::olmo2(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                              std::span<const ChatTool>) {
  std::string out;
  check_roles(m, t.origin_);
  if (t.writes_bos_) out += t.bos_;
  for (size_t i = 0; i < m.size(); ++i) {
    out += "<|" + m[i].role + "|>\n" + m[i].content;
    if (m[i].role == "assistant") out += t.eos_;
    if (m[i].role != "assistant" || i + 1 < m.size()) out += "\n";
  }
  if (add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

std::string ChatRender::harmony(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                                std::span<const ChatTool> tools) {
  std::string out;
  const ChatDate today = t.today_ ? *t.today_ : local_today();
  out += "<|start|>system<|message|>" + t.model_identity_ + "\nKnowledge cutoff: 2024-06\nCurrent date: " +
         iso_date(today) + "\n\nReasoning: " + t.reasoning_effort_.value_or("medium") +
         "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (!tools.empty()) out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  out += "<|end|>";
  const bool developer = m[0].role == "system" || m[0].role == "developer";
  if ((developer && !m[0].content.empty()) || !tools.empty()) {
    out += "<|start|>developer<|message|>";
    if (developer && !m[0].content.empty()) out += "# Instructions\n\n" + m[0].content + "\n\n";
    if (!tools.empty()) out += "# Tools\n\n" + chat::harmony_tools(tools, t.origin_);
    out += "<|end|>";
  }
  // The function of the latest call: a tool message is its result (the template assumes one call per
  // assistant message and writes only the first).
  std::optional<std::string> last_call;
  const size_t first = developer ? 1 : 0;
  for (size_t i = first; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "assistant") {
      if (has(msg.content, "<|channel|>analysis<|message|>") || has(msg.content, "<|channel|>final<|message|>"))
        raise(t.origin_, "message " + std::to_string(i + 1) +
                             " has <|channel|> tags in its content: pass the final channel's text only");
      if (!msg.tool_calls.empty()) {
        // Text beside a call is its analysis, kept only while no later answer (an assistant message
        // without calls) follows.
        bool answered = false;
        for (size_t k = i + 1; k < m.size(); ++k) answered |= m[k].role == "assistant" && m[k].tool_calls.empty();
        if (!msg.content.empty() && !answered)
          out += "<|start|>assistant<|channel|>analysis<|message|>" + msg.content + "<|end|>";
        const ToolCall& call = msg.tool_calls[0];
        out += "<|start|>assistant to=functions." + call.name + "<|channel|>commentary json<|message|>" +
               python_json(parse_tool_json(call.arguments, t.origin_ + ": message " + std::to_string(i + 1) +
                                                               " tool call '" + call.name + "' arguments")) +
               "<|call|>";
        last_call = call.name;
        continue;
      }
      // <|return|> ends a reply (training data); a turn the conversation continues after ends in <|end|>.
      const bool last = i + 1 == m.size() && !add_generation_prompt;
      out += "<|start|>assistant<|channel|>final<|message|>" + msg.content + (last ? "<|return|>" : "<|end|>");
      if (!last) last_call.reset();
    } else if (msg.role == "user") {
      out += "<|start|>user<|message|>" + msg.content + "<|end|>";
    } else if (msg.role == "tool") {
      if (!last_call)
        raise(t.origin_, "message " + std::to_string(i + 1) +
                             " has role 'tool' but no assistant tool call comes before it");
      out += "<|start|>functions." + *last_call + " to=assistant<|channel|>commentary<|message|>" +
             python_json(nlohmann::ordered_json(msg.content)) + "<|end|>";
    }
    // The template writes nothing for other roles (a system message after the first).
  }
  if (add_generation_prompt) out += "<|start|>assistant";
  return out;
}

}  // namespace reach
