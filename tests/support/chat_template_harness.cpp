// The jinja2 side of the chat-template suite (tests/support/chat_template_harness.hpp).
#include "tests/support/chat_template_harness.hpp"

#include <doctest/doctest.h>

#include <fstream>

#include "base/error.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"

namespace reach::test::chat_ref {

namespace fs = std::filesystem;
using reach::ErrorCode;
using reach::test::error_of;
using reach::test::read_text;
using reach::test::source_root;
using reach::test::TempDir;

fs::path templates_dir() { return source_root() / "tests" / "data" / "chat_templates"; }

// A path printed by a command (its last line), or nullopt when it fails or the file is absent.
std::optional<fs::path> path_from(const std::string& cmd) {
  Command c = run(cmd + " 2>/dev/null");
  while (!c.out.empty() && (c.out.back() == '\n' || c.out.back() == '\r')) c.out.pop_back();
  if (c.status != 0 || c.out.empty()) return std::nullopt;
  fs::path p = c.out.substr(c.out.rfind('\n') == std::string::npos ? 0 : c.out.rfind('\n') + 1);
  if (!fs::exists(p)) return std::nullopt;
  return p;
}

std::vector<std::vector<ChatMessage>> conversations() {
  return {
      {{"user", "What is the capital of France?"}},
      {{"system", "You are a terse assistant."}, {"user", "Name three primes."}},
      {{"user", "Hi!"}, {"assistant", "Hello! How can I help?"}, {"user", "Tell me a joke."}},
      {{"system", "Answer in French."},
       {"user", "Good morning"},
       {"assistant", "Bonjour"},
       {"user", "Thank you"},
       {"assistant", "De rien"},
       {"user", "Bye"}},
      // Whitespace the Gemma and Llama templates trim (Python's str.strip: also U+00A0, U+3000).
      {{"system", "  spaced system \n"}, {"user", " \t padded\nmessage \n\n"}},
      {{"user", "\xC2\xA0non-breaking\xE3\x80\x80 and \xE4\xB8\x96\xE7\x95\x8C "}},
      {{"user", ""}},
      // Roles out of order: Gemma and Llama 2 raise.
      {{"user", "one"}, {"user", "two"}},
      {{"assistant", "first"}},
  };
}

// Conversations for the families added with Llama 3.1: reasoning in assistant messages (Qwen3
// keeps it after the last user message), SmolLM3's /think, /no_think and /system_override system
// flags, a tool response in a user message (Qwen3 does not count it as the last query), a second
// system message (Mistral raises), a system message alone, an empty one.
std::vector<std::vector<ChatMessage>> reasoning_conversations() {
  return {
      {{"system", "Think it through. /think"}, {"user", "2+2?"}},
      {{"system", "Be quick /no_think  \n"}, {"user", "Hi"}, {"assistant", "\n\nHello"}, {"user", "Bye"}},
      {{"system", "/system_override Only this. /no_think"}, {"user", "Hi"}},
      {{"system", "/think"}, {"user", "Hi"}},
      {{"user", "Why?"}, {"assistant", "<think>\nBecause.\n</think>\n\nThat is why."}},
      {{"user", "Q1"},
       {"assistant", "<think>r1</think>A1"},
       {"user", "Q2"},
       {"assistant", "<think>\n\nr2\n\n</think>\n\nA2"},
       {"user", "Q3"}},
      {{"user", "What is 6*7?"},
       {"assistant", "<think>use the tool</think>calling"},
       {"user", "<tool_response>\n42\n</tool_response>"},
       {"assistant", "<think>\nit said 42\n</think>It is 42."}},
      {{"user", "Q"}, {"assistant", "no reasoning </think> after"}, {"user", "R"}, {"assistant", "A</think>\n\nB"}},
      {{"system", "S"}, {"user", "u1"}, {"system", "S2"}, {"user", "u2"}},
      {{"system", "only a system message"}},
      {{"system", ""}, {"user", "x"}},
  };
}

json to_json(const std::vector<ChatMessage>& conv) {
  json a = json::array();
  for (const auto& m : conv) {
    json j = {{"role", m.role}, {"content", m.content}};
    // Tool history as transformers takes it: each call's arguments a parsed object (ordered_json keeps
    // the keys' order through to the template's tojson).
    if (!m.tool_calls.empty()) {
      json calls = json::array();
      for (const auto& c : m.tool_calls)
        calls.push_back({{"id", c.id}, {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", json::parse(c.arguments)}}}});
      j["tool_calls"] = calls;
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) j["name"] = m.name;
    a.push_back(j);
  }
  return a;
}



// Renders every conversation with and without the generation prompt on both sides and compares.
// Returns false (with a message) when the reference cannot run.
// tools[i] (where given): the tools of convs[i], on both sides.
bool compare_with_jinja(const std::vector<Subject>& subjects, const std::vector<std::vector<ChatMessage>>& convs,
                        const std::vector<std::vector<reach::ChatTool>>& tools) {
  static const std::vector<reach::ChatTool> no_tools;
  auto tools_of = [&](size_t i) -> const std::vector<reach::ChatTool>& { return i < tools.size() ? tools[i] : no_tools; };
  json cases = json::array();
  for (const auto& s : subjects)
    for (size_t ci = 0; ci < convs.size(); ++ci)
      for (bool gen : {true, false}) {
        const auto& conv = convs[ci];
        json c = s.source;
        json tool_list = json::array();
        for (const auto& t : tools_of(ci)) tool_list.push_back(json::parse(t.json));
        if (!tool_list.empty() && s.tools_variable == "tools") c["tools"] = tool_list;
        if (!tool_list.empty() && s.tools_variable == "system_tools") c["system_tools"] = tool_list;
        c["bos_token"] = s.bos;
        c["eos_token"] = s.eos;
        c["messages"] = to_json(conv);
        c["add_generation_prompt"] = gen;
        c["variables"] = s.variables;
        if (!tool_list.empty() && s.tools_variable == "xml_tools") c["variables"]["xml_tools"] = tool_list;
        cases.push_back(c);
      }
  TempDir tmp("chat_template");
  const fs::path req = tmp / "request.json";
  std::ofstream(req) << json{{"cases", cases}}.dump();
  const Command c =
      run("python3 " + (source_root() / "tests/python/chat_template_ref.py").string() + " '" + req.string() + "'");
  if (c.status == 3) {
    MESSAGE("SKIP: python3 cannot import jinja2 (tools/setup.sh installs it)");
    return false;
  }
  REQUIRE_MESSAGE(c.status == 0, "chat_template_ref.py failed: " << c.out);
  const json ref = json::parse(c.out);
  REQUIRE(ref.size() == cases.size());
  size_t k = 0, compared = 0, raised = 0;
  for (const auto& s : subjects)
    for (size_t ci = 0; ci < convs.size(); ++ci)
      for (bool gen : {true, false}) {
        const auto& conv = convs[ci];
        const json& r = ref[k++];
        INFO(s.name << ", messages " << to_json(conv).dump() << ", add_generation_prompt " << gen);
        if (r.contains("error")) {
          ++raised;
          error_of([&] { (void)s.tmpl.render(conv, gen, tools_of(ci)); }, ErrorCode::invalid_argument);
          continue;
        }
        std::string got;
        try {
          got = s.tmpl.render(conv, gen, tools_of(ci));
        } catch (const std::exception& e) {
          FAIL_CHECK("reach threw where jinja2 rendered: " << e.what());
          continue;
        }
        CHECK(json(got).dump() == json(r["text"]).dump());
        ++compared;
      }
  MESSAGE(compared << " renderings equal jinja2's, " << raised << " raised on both sides");
  return true;
}

Subject from_file(const std::string& file, const std::string& bos, const std::string& eos) {
  const fs::path p = templates_dir() / file;
  Subject s{file, ChatTemplate::from_jinja(read_text(p), p.string(), bos, eos), json{{"template_file", p.string()}},
            bos, eos};
  s.tmpl.set_today(kFixedDate);
  return s;
}

// The template rendered with enable_thinking false, on both sides.
Subject without_thinking(Subject s) {
  s.name += " (enable_thinking false)";
  s.tmpl.set_thinking(false);
  s.variables["enable_thinking"] = false;
  return s;
}

// The families added with Llama 3.1, with the special-token texts of their models.
std::vector<Subject> newer_subjects() {
  return {from_file("llama3_1.jinja", "<|begin_of_text|>", "<|eot_id|>"),
          from_file("llama3_2.jinja", "<|begin_of_text|>", "<|eot_id|>"),
          from_file("qwen2_5.jinja", "", "<|im_end|>"),
          from_file("qwen3.jinja", "", "<|im_end|>"),
          without_thinking(from_file("qwen3.jinja", "", "<|im_end|>")),
          from_file("smollm3.jinja", "", "<|im_end|>"),
          without_thinking(from_file("smollm3.jinja", "", "<|im_end|>")),
          from_file("phi3.jinja", "<s>", "<|endoftext|>"),
          from_file("phi4_mini.jinja", "<|endoftext|>", "<|endoftext|>"),
          from_file("mistral.jinja", "<s>", "</s>"),
          from_file("mistral_nemo.jinja", "<s>", "</s>"),
          from_file("olmo2.jinja", "<|endoftext|>", "<|endoftext|>")};
}

}  // namespace reach::test::chat_ref
