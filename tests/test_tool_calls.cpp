// Tool calls parsed from a reply (runtime/serve/tool_calls.*): every split of the reply into pieces
// gives the same calls and text as the whole reply at once, arguments stream as written, and what is
// not a call stays text.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/serve/tool_calls.hpp"
#include "runtime/text/chat_template.hpp"
#include "tests/support/files.hpp"

namespace fs = std::filesystem;
using reach::serve::ToolCallStream;
using reach::serve::ToolPiece;
using reach::serve::ToolSyntax;
using reach::test::read_text;
using reach::test::source_root;

namespace {

const ToolSyntax kQwen{"<tool_call>", "</tool_call>"};

struct Parsed {
  std::string content;
  std::vector<std::string> names, arguments;
  size_t argument_pieces = 0;
};

void add(Parsed& p, const ToolPiece& piece) {
  p.content += piece.content;
  for (const auto& c : piece.calls) {
    if (c.index >= p.names.size()) {
      REQUIRE(c.index == p.names.size());  // calls open in order, each with its name first
      REQUIRE(!c.name.empty());
      p.names.push_back(c.name);
      p.arguments.emplace_back();
    } else {
      CHECK(c.name.empty());
    }
    p.arguments[c.index] += c.arguments;
    if (!c.arguments.empty()) ++p.argument_pieces;
  }
}

const ToolSyntax kLlama{"", "", "parameters"};

// The reply fed `step` bytes at a time (0: at once).
Parsed parse(const std::string& reply, size_t step, bool in_call = false, size_t max_calls = 8,
             const ToolSyntax& syntax = kQwen) {
  ToolCallStream s(syntax, in_call, max_calls);
  Parsed p;
  if (step == 0)
    add(p, s.push(reply));
  else
    for (size_t i = 0; i < reply.size(); i += step) add(p, s.push(reply.substr(i, step)));
  add(p, s.finish());
  CHECK(s.calls() == p.names.size());
  return p;
}

// Every piece size gives what the whole reply gives.
Parsed parse_all_ways(const std::string& reply, bool in_call = false, size_t max_calls = 8,
                      const ToolSyntax& syntax = kQwen) {
  const Parsed whole = parse(reply, 0, in_call, max_calls, syntax);
  for (size_t step = 1; step <= reply.size(); ++step) {
    INFO("pieces of " << step << " bytes");
    const Parsed p = parse(reply, step, in_call, max_calls, syntax);
    CHECK(p.content == whole.content);
    CHECK(p.names == whole.names);
    CHECK(p.arguments == whole.arguments);
  }
  return whole;
}

}  // namespace

TEST_CASE("Qwen tool calls: text, one call, parallel calls, whatever the pieces") {
  const Parsed plain = parse_all_ways("Just text, <tool no call.\n");
  CHECK(plain.content == "Just text, <tool no call.\n");
  CHECK(plain.names.empty());

  const Parsed one = parse_all_ways(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris<\", \"n\": [1, "
      "{}]}}\n"
      "</tool_call>");
  CHECK(one.content == "Let me check.");
  REQUIRE(one.names == std::vector<std::string>{"get_weather"});
  CHECK(one.arguments[0] == "{\"city\": \"Pa}ris<\", \"n\": [1, {}]}");
  CHECK(nlohmann::json::parse(one.arguments[0])["city"] == "Pa}ris<");
  // Streamed byte by byte, the arguments come in many pieces, not once at the end.
  CHECK(parse("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", 1).argument_pieces > 3);

  const Parsed two = parse_all_ways(
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\":\"b\",\"arguments\":"
      "{\"x\":\"\\\"}\"}}\n</tool_call>\n");
  CHECK(two.content.empty());
  CHECK(two.names == std::vector<std::string>{"a", "b"});
  CHECK(two.arguments == std::vector<std::string>{"{}", "{\"x\":\"\\\"}\"}"});

  // parallel_tool_calls false: the first call only.
  const Parsed first = parse_all_ways(
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {}}"
      "</tool_call>",
      false, 1);
  CHECK(first.names == std::vector<std::string>{"a"});
}

TEST_CASE("Qwen tool calls: another key order, not a call, an unclosed call, a call the prompt opened") {
  const Parsed reordered =
      parse_all_ways("<tool_call>\n{\"arguments\": {\"b\": 2, \"a\": 1}, \"name\": \"f\"}\n</tool_call>");
  CHECK(reordered.names == std::vector<std::string>{"f"});
  CHECK(reordered.arguments == std::vector<std::string>{"{\"b\":2,\"a\":1}"});

  const Parsed junk = parse_all_ways("x <tool_call>not json</tool_call> y");
  CHECK(junk.names.empty());
  CHECK(junk.content == "x <tool_call>not json</tool_call> y");

  // The reply ended (an end token, a stop) inside the call: the call is what arrived.
  const Parsed open = parse_all_ways("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2");
  CHECK(open.names == std::vector<std::string>{"f"});
  CHECK(open.arguments == std::vector<std::string>{"{\"a\": [1, 2"});

  // tool_choice required: the prompt ends with "<tool_call>\n", the reply is the call object.
  const Parsed forced = parse_all_ways("{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}", true);
  CHECK(forced.names == std::vector<std::string>{"f"});
  CHECK(forced.arguments == std::vector<std::string>{"{\"q\": \"x\"}"});
}

TEST_CASE("Llama 3.1 tool calls: the reply is one call object, or text") {
  const Parsed call =
      parse_all_ways(" \n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", false, 8, kLlama);
  CHECK(call.content.empty());
  CHECK(call.names == std::vector<std::string>{"get_weather"});
  CHECK(call.arguments == std::vector<std::string>{"{\"city\": \"Paris\"}"});

  const Parsed text = parse_all_ways("The weather {is} fine.", false, 8, kLlama);
  CHECK(text.names.empty());
  CHECK(text.content == "The weather {is} fine.");

  // A JSON object that is not a call stays text; a call in another key order is sent whole.
  CHECK(parse_all_ways("{\"a\": 1}", false, 8, kLlama).content == "{\"a\": 1}");
  const Parsed reordered = parse_all_ways("{\"parameters\": {\"x\": [1]}, \"name\": \"f\"}", false, 8, kLlama);
  CHECK(reordered.names == std::vector<std::string>{"f"});
  CHECK(reordered.arguments == std::vector<std::string>{"{\"x\":[1]}"});
}

TEST_CASE("Mistral tool calls: [TOOL_CALLS] (or its dropped token) then an array, sent at its end") {
  const ToolSyntax mistral{"[TOOL_CALLS]", "", "arguments", true, true};
  for (const char* reply :
       {"[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]",
        " [{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]"}) {
    INFO(reply);
    const Parsed p = parse_all_ways(reply, false, 8, mistral);
    CHECK(p.content.empty());
    CHECK(p.names == std::vector<std::string>{"a", "b"});
    CHECK(p.arguments == std::vector<std::string>{"{\"x\":1}", "{}"});
  }
  CHECK(parse_all_ways("[1, 2] are numbers", false, 8, mistral).content == "[1, 2] are numbers");
  // Phi-4-mini: the tags around the array, written out or dropped.
  const ToolSyntax phi{"<|tool_call|>", "<|/tool_call|>", "arguments", true};
  for (const char* reply : {"<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}]<|/tool_call|>",
                            "[{\"name\": \"a\", \"arguments\": {}}]"}) {
    INFO(reply);
    CHECK(parse_all_ways(reply, false, 8, phi).names == std::vector<std::string>{"a"});
  }
  CHECK(parse_all_ways("Plain [TOOL_CALLS] text", false, 8, mistral).content == "Plain [TOOL_CALLS] text");
  // Forced: the prompt ends with "[TOOL_CALLS] ", the reply is the array.
  CHECK(parse_all_ways("[{\"name\": \"a\", \"arguments\": {}}]", true, 8, mistral).names ==
        std::vector<std::string>{"a"});
}

TEST_CASE("each family's syntax and forced prefix come from its template") {
  struct Want {
    const char* file;
    const char* open;
    const char* key;
    bool list;
    const char* forced;
  };
  for (const Want& w : {Want{"qwen2_5.jinja", "<tool_call>", "arguments", false, "<tool_call>\n"},
                        Want{"qwen3.jinja", "<tool_call>", "arguments", false, "<tool_call>\n"},
                        Want{"llama3_1.jinja", "", "parameters", false, ""},
                        Want{"mistral.jinja", "[TOOL_CALLS]", "arguments", true, "[TOOL_CALLS] "},
                        Want{"mistral_nemo.jinja", "[TOOL_CALLS]", "arguments", true, "[TOOL_CALLS]"},
                        Want{"smollm3.jinja", "<tool_call>", "arguments", false, "<tool_call>\n"},
                        Want{"phi4_mini.jinja", "<|tool_call|>", "arguments", true, "<|tool_call|>"}}) {
    INFO(w.file);
    const fs::path p = source_root() / "tests" / "data" / "chat_templates" / w.file;
    const auto s = ToolSyntax::for_template(reach::ChatTemplate::from_jinja(read_text(p), w.file, "<s>", "</s>"));
    REQUIRE(s);
    CHECK(s->open == w.open);
    CHECK(s->arguments_key == w.key);
    CHECK(s->list == w.list);
    CHECK(s->forced_prefix() == w.forced);
  }
  const fs::path smol = source_root() / "tests" / "data" / "chat_templates" / "gemma3.jinja";
  CHECK(!ToolSyntax::for_template(reach::ChatTemplate::from_jinja(read_text(smol), "gemma3", "<bos>", "<eos>")));
}
