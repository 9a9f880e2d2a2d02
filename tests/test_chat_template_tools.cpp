// Chat templates with tools (runtime/chat_template.*, runtime/text/tool_json.*): tools and tool history
// rendered as jinja2 renders the model's own template (tests/python/chat_template_ref.py), for Qwen 2.5,
// Qwen3, Llama 3.1/3.2, Mistral v3 / Nemo, SmolLM3 and Phi-4-mini; gpt-oss's harmony template with each
// reasoning effort, with tools, calls and their results, and the harmony system message's parts.
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
#include "tests/support/chat_template_harness.hpp"
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

using namespace reach::test::chat_ref;

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

