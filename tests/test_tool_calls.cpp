// Tool calls parsed from a reply (runtime/serve/tool_calls.*): every split of the reply into pieces
// gives the same calls and text as the whole reply at once, arguments stream as written, and what is
// not a call stays text.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/platform/process.hpp"
#include "runtime/constrain/json_constraint.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/harmony_reply.hpp"
#include "runtime/text/tokenizer.hpp"
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

namespace {

// Two tools as the server's tests declare them.
const char* const kWeatherSchema =
    R"({"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}, )"
    R"("alerts": {"type": "boolean"}}, "required": ["unit", "days"], "additionalProperties": false})";
const char* const kClockSchema =
    R"({"type": "object", "properties": {"zone": {"enum": ["utc", "local"]}}, "required": ["zone"]})";

struct Walked {
  std::string reply;  // the reply's text, special tokens written out
  bool opened = false;
};

// One reply sampled uniformly among the tokens the constraint allows (temperature "infinity": the
// hardest case for a constraint), steered into a call at times: in free text, now and then the opener's
// tokens are written (each checked allowed first).  Stops when an end token is drawn.
Walked walk(reach::ConstrainedReply& reply, const reach::Tokenizer& tk, const reach::TokenTrie& trie,
            const std::vector<int32_t>& opener, bool at_start, int32_t stop, std::mt19937& rng) {
  Walked w;
  std::vector<uint8_t> allowed;
  std::vector<int32_t> queue;
  for (int step = 0; step < 400; ++step) {
    reply.allowed(std::span<const int32_t>(&stop, 1), trie.vocab(), allowed);
    const bool free = !reply.tools()->in_call();
    // A family whose call is the reply opens one only at its start.
    if (free && queue.empty() && (at_start ? step == 0 && rng() % 2 : rng() % 6 == 0))
      queue.assign(opener.rbegin(), opener.rend());
    int32_t pick = -1;
    if (!queue.empty()) {
      pick = queue.back();
      queue.pop_back();
      REQUIRE(allowed[size_t(pick)]);   // free text: the opener's tokens are allowed
    } else if (free && allowed[size_t(stop)] && rng() % 3 == 0) {
      pick = stop;
    } else {
      std::vector<int32_t> ids;
      for (size_t i = 0; i < allowed.size(); ++i)
        if (allowed[i] && int32_t(i) != stop) ids.push_back(int32_t(i));
      REQUIRE((!ids.empty() || allowed[size_t(stop)]));
      pick = ids.empty() ? stop : ids[rng() % ids.size()];   // after a call that is the reply: only the end
    }
    const bool is_stop = pick == stop;
    reply.advance(pick, is_stop);
    if (is_stop) break;
    w.opened |= reply.tools()->in_call();
    w.reply += trie.bytes(pick).empty() ? tk.token_text(pick) : trie.bytes(pick);
  }
  return w;
}

struct Cmd {
  int status = -1;
  std::string out;
};
Cmd run_cmd(const std::string& cmd) {
  Cmd c;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) c.out.append(buf, n);
    c.status = reach::platform::command_exit_code(pclose(p));
  }
  return c;
}

}  // namespace

TEST_CASE("tool_choice auto: a call, once the model opens one, follows the schema of the tool it names") {
  using nlohmann::json;
  const std::vector<std::string> names{"get_weather", "clock"};
  const std::vector<json> schemas{json::parse(kWeatherSchema), json::parse(kClockSchema)};
  const std::vector<std::shared_ptr<const reach::JsonGrammar>> grammars{
      reach::JsonGrammar::from_schema(nlohmann::ordered_json::parse(kWeatherSchema)),
      reach::JsonGrammar::from_schema(nlohmann::ordered_json::parse(kClockSchema))};
  json request = {{"schemas", schemas}, {"docs", json::array()}};
  // Each family's fixture tokenizer (its template from tokenizer_config.json; gpt-oss's from its
  // vocabulary), the text that opens a call there, and the end token.
  struct Family {
    const char* dir;
    const char* opener;
    const char* stop;
  };
  size_t replies = 0, with_calls = 0, calls = 0, text_only = 0, forced_calls = 0;
  for (const Family& fam : {Family{"qwen3", "<tool_call>", "<|im_end|>"}, Family{"smollm3", "<tool_call>", "<|im_end|>"},
                            Family{"llama3", "{", "<|eot_id|>"}, Family{"mistral", "[TOOL_CALLS]", "</s>"},
                            Family{"phi3", "<|tool_call|>", "<|end|>"},
                            Family{"gpt_oss", "<|channel|>commentary to=functions.", "<|return|>"}}) {
    INFO(fam.dir);
    const reach::Tokenizer tk = reach::Tokenizer::load(source_root() / "tests/data/families" / fam.dir / "hf");
    const reach::ChatTemplate t = reach::ChatTemplate::for_tokenizer(tk, fam.dir);
    const auto syntax = ToolSyntax::for_template(t);
    REQUIRE(syntax);
    const auto trie = reach::TokenTrie::for_tokenizer(tk);
    const auto forms = syntax->call_forms(names, grammars, tk, false);
    auto constraint = std::make_shared<reach::JsonConstraint>(forms, trie);
    const auto stop = tk.find(fam.stop);
    REQUIRE(stop);
    const std::vector<int32_t> opener = tk.encode(fam.opener, false);
    {
      // Free text at the start: every token but those that would open a call wrongly.
      reach::ConstrainedReply r(constraint);
      std::vector<uint8_t> allowed;
      r.allowed(std::span<const int32_t>(&*stop, 1), trie->vocab(), allowed);
      size_t n = 0;
      for (uint8_t a : allowed) n += a;
      CHECK(n + 24 > trie->vocab());
    }
    for (uint32_t seed = 0; seed < 40; ++seed) {
      std::mt19937 rng(seed);
      INFO("seed " << seed);
      reach::ConstrainedReply reply(constraint);
      const Walked w = walk(reply, tk, *trie, opener, forms->at_start, *stop, rng);
      ++replies;
      CAPTURE(w.reply);
      // The reply as the server parses it (harmony: its calls apart from its channels).
      std::string text = w.reply;
      if (syntax->harmony) {
        reach::HarmonyReply h;
        text = h.push(w.reply).calls;
        text += h.flush().calls;
      }
      ToolCallStream stream(*syntax, false, SIZE_MAX);
      Parsed p;
      add(p, stream.push(text));
      add(p, stream.finish());
      if (!w.opened) {
        ++text_only;
        continue;
      }
      ++with_calls;
      // A call still open when the walk stopped (400 tokens) is not checked; every closed one is.
      CHECK(p.names.size() == reply.tools()->calls() + (reply.tools()->in_call() ? 1 : 0));
      const size_t closed = reply.tools()->calls();
      REQUIRE(p.names.size() >= closed);
      for (size_t i = 0; i < closed; ++i) {
        const auto at = std::find(names.begin(), names.end(), p.names[i]);
        REQUIRE(at != names.end());
        request["docs"].push_back({size_t(at - names.begin()), p.arguments[i]});
        ++calls;
      }
    }
    // "required" among the two: the prompt opened the call (the family's forced prefix); the reply is
    // one call, of either tool, whose arguments follow that tool's schema, then only the end.
    const auto forced = syntax->call_forms(names, grammars, tk, true);
    auto forced_constraint = std::make_shared<reach::JsonConstraint>(forced, trie);
    for (uint32_t seed = 0; seed < 20; ++seed) {
      std::mt19937 rng(1000 + seed);
      reach::ConstrainedReply reply(forced_constraint);
      const Walked w = walk(reply, tk, *trie, {}, false, *stop, rng);
      if (reply.tools()->calls() == 0) continue;   // the walk's 400 tokens ran out inside the call
      CAPTURE(w.reply);
      std::string text = w.reply;
      if (syntax->harmony) {
        reach::HarmonyReply h;
        text = h.push(syntax->forced_prefix()).calls;
        text += h.push(w.reply).calls;
        text += h.flush().calls;
      }
      ToolCallStream stream(*syntax, !syntax->harmony, SIZE_MAX);
      Parsed p;
      add(p, stream.push(text));
      add(p, stream.finish());
      REQUIRE(p.names.size() == 1);
      CHECK(p.content.empty());
      const auto at = std::find(names.begin(), names.end(), p.names[0]);
      REQUIRE(at != names.end());
      request["docs"].push_back({size_t(at - names.begin()), p.arguments[0]});
      ++forced_calls;
    }
  }
  MESSAGE(replies << " replies: " << with_calls << " opened calls (" << calls << " calls closed), " << text_only
                  << " text only; " << forced_calls << " forced calls");
  CHECK(forced_calls >= 60);
  CHECK(calls >= 60);
  CHECK(text_only >= 10);
  reach::test::TempDir dir("tool_walks");
  { std::ofstream(dir / "walks.json") << request.dump(); }
  const Cmd ref =
      run_cmd("python3 " + (source_root() / "tests/python/json_schema_ref.py").string() + " " + (dir / "walks.json").string());
  if (ref.status == 77) {
    MESSAGE("SKIP the jsonschema check: " << ref.out);
    return;
  }
  REQUIRE(ref.status == 0);
  const json verdicts = json::parse(ref.out);
  REQUIRE(verdicts.size() == request["docs"].size());
  for (size_t i = 0; i < verdicts.size(); ++i) {
    CAPTURE(request["docs"][i].dump());
    CHECK(verdicts[i].get<bool>());
  }
}

TEST_CASE("harmony: only a header's recipient opens a call; the text of a message never does") {
  const reach::Tokenizer tk = reach::Tokenizer::load(source_root() / "tests/data/families/gpt_oss/hf");
  const auto syntax = ToolSyntax::for_template(reach::ChatTemplate::for_tokenizer(tk, "gpt_oss"));
  REQUIRE(syntax);
  const std::vector<std::string> names{"f"};
  const std::vector<std::shared_ptr<const reach::JsonGrammar>> grammars{reach::JsonGrammar::any_object()};
  auto c = std::make_shared<reach::JsonConstraint>(syntax->call_forms(names, grammars, tk, false),
                                                   reach::TokenTrie::for_tokenizer(tk));
  reach::ConstrainedReply r(c);
  auto write = [&](const std::string& text) {
    for (int32_t id : tk.encode(text, false)) r.advance(id, false);
  };
  write("<|channel|>analysis<|message|>I will say to=functions.f now");
  CHECK(!r.tools()->in_call());
  write("<|end|><|start|>assistant<|channel|>commentary to=functions.");
  CHECK(r.tools()->in_call());
  write("f <|constrain|>json<|message|>{}");
  CHECK(!r.tools()->in_call());
  CHECK(r.tools()->calls() == 1);
  write(" and to=functions.f again in the text");   // after the call: its message's text
  CHECK(!r.tools()->in_call());
}
