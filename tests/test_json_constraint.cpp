// Constrained sampling to JSON (runtime/constrain/): schema compile errors, the byte automaton against
// an independent reference (Python's json + jsonschema, tests/data/json_constraint/cases.json from
// tools/gen_json_constraint_cases.py), the token mask against a brute-force check of every token, random
// walks over the mask whose documents the reference validates, and the bytes each token appends
// checked against the tokenizer's own decode.
#include <doctest/doctest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "runtime/constrain/json_constraint.hpp"
#include "runtime/session/generation.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/text/utf8.hpp"
#include "tests/support/files.hpp"
#include "tests/support/model_fixture.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using reach::ConstrainedReply;
using reach::JsonConstraint;
using reach::JsonGrammar;
using reach::JsonState;
using reach::Tokenizer;
using reach::TokenTrie;
using reach::test::read_text;
using reach::test::source_root;
using reach::test::TempDir;

namespace {

std::string compile_error(const std::string& schema) {
  try {
    JsonGrammar::from_schema_text(schema);
  } catch (const reach::Error& e) {
    CHECK(e.code() == reach::ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

bool accepts(const JsonGrammar& g, const std::string& text) {
  JsonState s(&g);
  for (char c : text)
    if (!s.feed(uint8_t(c))) return false;
  return s.can_end();
}

// Ordered: the schemas' properties keep their order (the order the sampler writes them in).
const nlohmann::ordered_json& cases() {
  static const nlohmann::ordered_json j = nlohmann::ordered_json::parse(read_text(source_root() / "tests/data/json_constraint/cases.json"));
  return j;
}

Tokenizer load_tokenizer(const char* name) { return Tokenizer::load(source_root() / "tests/data/tokenizer" / name); }

// An id that ends a reply: the tokenizer's EOS, else its first special token.
int32_t end_id(const Tokenizer& tk) {
  if (auto e = tk.eos_id()) return *e;
  for (int32_t id = 0; id < tk.vocab_size(); ++id)
    if (tk.is_special(id)) return id;
  FAIL("the tokenizer has no special token");
  return -1;
}

using Command = reach::test::CommandResult;
Command run(const std::string& cmd) { return reach::test::capture_command(cmd); }

}  // namespace

TEST_CASE("schema errors name the keyword and where it is") {
  struct Case {
    const char* schema;
    std::vector<std::string> says;
  };
  const std::vector<Case> table = {
      {R"({"type":"string","pattern":"^a"})", {"'pattern'", " at #:", "not supported"}},
      {R"({"properties":{"a":{"type":"string","minLength":2}}})", {"'minLength'", "#/properties/a:"}},
      {R"({"type":"object","properties":{"x":{"oneOf":[{"type":"string"}]}}})", {"'oneOf'", "#/properties/x:"}},
      {R"({"type":"array","items":{"type":"string","format":"date"}})", {"'format'", "#/items:"}},
      {R"({"allOf":[{"type":"string"}]})", {"'allOf'", " at #:"}},
      {R"({"not":{"type":"string"}})", {"'not'", " at #:"}},
      {R"({"type":"object","patternProperties":{"^a":{}}})", {"'patternProperties'", " at #:"}},
      {R"({"if":{"type":"string"},"then":{}})", {"'if'"}},
      {R"({"type":"number","minimum":0})", {"'minimum'"}},
      {R"({"$defs":{"a":{"type":"string","maxLength":3}},"$ref":"#/$defs/a"})", {"'maxLength'", "#/$defs/a:"}},
      {R"({"type":"object","properties":{"a/b":{"type":"string","pattern":"x"}}})", {"'pattern'", "#/properties/a~1b:"}},
      {R"({"$ref":"#/$defs/missing"})", {"does not exist", "#/$ref:"}},
      {R"({"$ref":"http://example.com/s.json"})", {"#/$defs/NAME"}},
      {R"({"anyOf":[{"type":"object"},{"type":"object","properties":{"a":{}}}]})", {"start with '{'", "#/anyOf:"}},
      {R"({"type":["object","string"],"properties":{"k":{"type":"strin"}}})", {"'strin'", "#/properties/k/type:"}},
      {R"({"required":["a"],"properties":{"b":{}}})", {"'a'", "#/required:"}},
      {R"({"enum":[]})", {"#/enum:"}},
      {R"({"type":"string","enum":[1,2]})", {"#/enum:", "type"}},
      {R"({"additionalProperties":{"type":"string"}})", {"additionalProperties", "#/additionalProperties:"}},
      {R"({"type":"array","minItems":3,"maxItems":2})", {"minItems above maxItems", " at #:"}},
      {R"({"type":"array","items":[{"type":"string"}]})", {"#/items:"}},
      {R"({"type":"object","properties":{"a":false}})", {"false", "#/properties/a:"}},
      {R"({"type":"array","maxItems":-1})", {"maxItems", "#/maxItems:"}},
      {R"({"type":"object")", {"not valid JSON"}},
  };
  for (const Case& c : table) {
    CAPTURE(c.schema);
    const std::string msg = compile_error(c.schema);
    REQUIRE(!msg.empty());
    CAPTURE(msg);
    CHECK(msg.rfind("JSON schema: ", 0) == 0);
    for (const std::string& s : c.says) CHECK(msg.find(s) != std::string::npos);
  }
  // What is supported compiles, annotations included.
  for (const auto& schema : cases()["schemas"]) CHECK_NOTHROW(JsonGrammar::from_schema_text(schema.dump()));
}

TEST_CASE("the automaton agrees with json + jsonschema on the reference documents") {
  // Each document against the compact grammar and the pretty one: the indented canonical documents
  // (json.dumps indent=2) are pretty JSON, the others compact.
  std::vector<std::shared_ptr<const JsonGrammar>> grammars, pretty;
  for (const auto& schema : cases()["schemas"]) {
    grammars.push_back(JsonGrammar::from_schema_text(schema.dump()));
    pretty.push_back(JsonGrammar::from_schema_text(schema.dump(), reach::JsonWhitespace::pretty));
  }
  size_t accepted = 0, rejected = 0, canonical = 0;
  for (const auto& c : cases()["cases"]) {
    const std::string doc = c["doc"].get<std::string>();
    const bool valid = c["valid"].get<bool>();
    const size_t si = c["schema"].get<size_t>();
    const bool compact_ok = accepts(*grammars[si], doc), ok = accepts(*pretty[si], doc);
    CAPTURE(si);
    CAPTURE(doc);
    if (compact_ok) CHECK(ok);   // compact JSON is pretty JSON too
    if (doc.find('\n') == std::string::npos && valid && c["canonical"].get<bool>()) CHECK(compact_ok);
    // Sound: nothing the reference rejects gets through.  Complete on the canonical form.
    if (ok) CHECK(valid);
    if (valid && c["canonical"].get<bool>()) {
      CHECK(ok);
      ++canonical;
    }
    (ok ? accepted : rejected)++;
  }
  MESSAGE(accepted << " accepted, " << rejected << " rejected, " << canonical << " canonical valid documents");
  CHECK(canonical >= 150);
  CHECK(rejected >= 500);
}

TEST_CASE("a number or an enum value that a longer one extends ends where the text ends") {
  auto g = JsonGrammar::from_schema_text(R"({"enum":[1,12]})");
  CHECK(accepts(*g, "1"));
  CHECK(accepts(*g, "12"));
  CHECK_FALSE(accepts(*g, "123"));
  CHECK_FALSE(accepts(*g, "1 "));   // nothing after the document, not even whitespace
  auto n = JsonGrammar::from_schema_text(R"({"type":"integer"})");
  CHECK(accepts(*n, "-0"));
  CHECK(accepts(*n, "123456789012345"));
  CHECK_FALSE(accepts(*n, "1234567890123456"));   // 15 digits at most
  CHECK_FALSE(accepts(*n, "1.0"));
}

TEST_CASE("whitespace: compact by default, pretty on request and bounded; nesting is bounded") {
  auto any = JsonGrammar::any_object();
  CHECK(any->whitespace() == reach::JsonWhitespace::compact);
  // Compact: one space after ':' and ',' and nowhere else; no newline, tab or carriage return at all.
  CHECK(accepts(*any, R"({"a":1,"b":[1,2]})"));
  CHECK(accepts(*any, R"({"a": 1, "b": [1, 2]})"));
  for (const char* refused : {R"({"a":  1})", R"({"a":1,  "b":2})", R"({ "a":1})", R"({"a":1 })", R"({"a" :1})",
                              R"({"a":[ 1]})", R"({"a":[1 ]})", "{\"a\":\n1}", "{\n\"a\":1}", "{\"a\":\t1}",
                              R"( {"a":1})", "{}\n"})
    CHECK_MESSAGE(!accepts(*any, refused), refused);
  // Pretty: json.dumps(indent=2 or 4) and compact both pass; a newline takes at most 4 spaces per level.
  auto pretty = JsonGrammar::any_object(reach::JsonWhitespace::pretty);
  const std::string indented = "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    {\n      \"c\": null\n    }\n  ]\n}";
  CHECK(accepts(*pretty, indented));
  CHECK_FALSE(accepts(*any, indented));
  CHECK(accepts(*pretty, "{\n    \"a\": [\n        1\n    ]\n}"));
  CHECK(accepts(*pretty, R"({"a": 1, "b": [1, 2]})"));
  CHECK(accepts(*pretty, "{\n" + std::string(4, ' ') + "}"));
  CHECK_FALSE(accepts(*pretty, "{\n" + std::string(5, ' ') + "}"));
  CHECK(accepts(*pretty, "{\"a\":[\n" + std::string(8, ' ') + "1]}"));
  CHECK_FALSE(accepts(*pretty, "{\"a\":[\n" + std::string(9, ' ') + "1]}"));
  for (const char* refused : {"{\n\n}", "{ \n}", "{\"a\":\n1}", "{\"a\"\n:1}", "{\n\t\"a\":1}", "\n{}", "{}\n"})
    CHECK_MESSAGE(!accepts(*pretty, refused), refused);
  CHECK(reach::json_whitespace_from_name("pretty") == reach::JsonWhitespace::pretty);
  CHECK(reach::json_whitespace_from_name("compact") == reach::JsonWhitespace::compact);
  CHECK_THROWS_WITH_AS(reach::json_whitespace_from_name("loose"), doctest::Contains("'loose'"), reach::Error);
  std::string deep = "{\"a\":", close = "}";
  for (int i = 1; i < reach::kMaxNesting; ++i) { deep += "["; close = "]" + close; }
  CHECK(accepts(*any, deep + "1" + close));
  CHECK_FALSE(accepts(*any, deep + "[1]" + "]" + close));
}

TEST_CASE("token bytes match the tokenizer's decode") {
  for (const char* name : {"smollm2.json", "llama2_sp.json", "mistral_sp.json", "gpt2_bpe.json"}) {
    CAPTURE(name);
    const Tokenizer tk = load_tokenizer(name);
    const std::vector<std::string> bytes = tk.token_bytes();
    REQUIRE(bytes.size() == size_t(tk.vocab_size()));
    std::vector<int32_t> normal;
    for (int32_t id = 0; id < tk.vocab_size(); ++id) {
      if (tk.is_special(id)) CHECK(bytes[size_t(id)].empty());
      else if (!bytes[size_t(id)].empty()) normal.push_back(id);
    }
    REQUIRE(normal.size() > 100);
    // Any run of tokens after a first one decodes to the first one's text and then the run's bytes,
    // wherever those bytes are whole UTF-8 (else decode writes U+FFFD).
    const int32_t first = tk.encode("x", false).at(0);
    const std::string head = tk.decode(std::vector<int32_t>{first});
    std::mt19937 rng(7);
    size_t compared = 0;
    for (int k = 0; k < 3000; ++k) {
      std::vector<int32_t> ids = {first};
      std::string expect;
      for (int i = 0; i < 4; ++i) {
        const int32_t id = normal[rng() % normal.size()];
        ids.push_back(id);
        expect += bytes[size_t(id)];
      }
      if (!reach::utf8::is_valid(expect)) continue;
      CAPTURE(ids.back());
      CHECK(tk.decode(ids) == head + expect);
      ++compared;
    }
    CHECK(compared > 1000);
  }
}

TEST_CASE("the mask is every token the automaton takes whole, and the end id once the document is whole") {
  const Tokenizer tk = load_tokenizer("smollm2.json");
  const auto trie = TokenTrie::for_tokenizer(tk);
  CHECK(TokenTrie::for_tokenizer(tk) == trie);   // built once per tokenizer
  const int32_t eos = end_id(tk);
  const std::vector<int32_t> stops = {eos};
  auto c = std::make_shared<JsonConstraint>(JsonGrammar::any_object(), trie);
  ConstrainedReply reply(c);
  std::vector<uint8_t> allowed;
  reply.allowed(stops, size_t(tk.vocab_size()), allowed);
  CHECK(allowed[size_t(eos)] == 0);
  for (char ch : std::string("{}")) {
    const auto id = tk.find(std::string(1, ch));
    REQUIRE(id);
    reply.advance(*id, false);
  }
  reply.allowed(stops, size_t(tk.vocab_size()) + 5, allowed);   // more logits than ids: the rest refused
  size_t n = 0;
  for (uint8_t a : allowed) n += a;
  CHECK(n == 1);
  CHECK(allowed[size_t(eos)] == 1);
  reply.advance(eos, true);
  CHECK(reply.ended());
  CHECK_THROWS_AS(reply.advance(*tk.find("{"), false), reach::Error);
}

TEST_CASE("random walks over the mask write documents that json + jsonschema accept") {
  const auto& schemas = cases()["schemas"];
  nlohmann::ordered_json request = {{"schemas", schemas}, {"docs", json::array()}};
  size_t brute_checked = 0;
  for (const char* name : {"smollm2.json", "llama2_sp.json"}) {
    CAPTURE(name);
    const Tokenizer tk = load_tokenizer(name);
    const auto trie = TokenTrie::for_tokenizer(tk);
    const std::vector<int32_t> stops = {end_id(tk)};
    const size_t vocab = size_t(tk.vocab_size());
    std::mt19937 rng(11);
    for (size_t si = 0; si < schemas.size(); ++si) {
      // Odd walks write pretty JSON: its newlines and indentation through the same checks.
      auto compact = std::make_shared<JsonConstraint>(JsonGrammar::from_schema_text(schemas[si].dump()), trie);
      auto pretty = std::make_shared<JsonConstraint>(
          JsonGrammar::from_schema_text(schemas[si].dump(), reach::JsonWhitespace::pretty), trie);
      for (int walk = 0; walk < 10; ++walk) {
        ConstrainedReply reply(walk % 2 ? pretty : compact);
        std::string doc;
        std::vector<uint8_t> allowed;
        std::vector<int32_t> ids, closing;
        for (int step = 0; step < 5000 && !reply.ended(); ++step) {
          reply.allowed(stops, vocab, allowed);
          if (walk < 2) {
            // Brute force: each token's bytes through a copy of the state.
            for (size_t id = 0; id < vocab; ++id) {
              const std::string& b = trie->bytes(int32_t(id));
              bool ok = !b.empty();
              JsonState s = reply.state();
              for (size_t i = 0; ok && i < b.size(); ++i) ok = s.feed(uint8_t(b[i]));
              if (int32_t(id) == stops[0]) ok = reply.state().can_end();
              if (ok != bool(allowed[id])) {
                CAPTURE(doc);
                CAPTURE(id);
                FAIL_CHECK("the mask and the brute force differ");
              }
            }
            ++brute_checked;
          }
          ids.clear();
          closing.clear();
          for (size_t id = 0; id < vocab; ++id) {
            if (!allowed[id]) continue;
            ids.push_back(int32_t(id));
            const std::string& b = trie->bytes(int32_t(id));
            if (b.find_first_of("\"}]") != std::string::npos) closing.push_back(int32_t(id));
          }
          REQUIRE(!ids.empty());
          // Lean towards an end, or the walk writes strings for ever.
          const bool can_stop = allowed[size_t(stops[0])];
          int32_t pick;
          if (can_stop && rng() % 2) pick = stops[0];
          else if (!closing.empty() && rng() % 10 < 3) pick = closing[rng() % closing.size()];
          else pick = ids[rng() % ids.size()];
          const bool stop = pick == stops[0];
          reply.advance(pick, stop);
          if (!stop) doc += trie->bytes(pick);
        }
        CAPTURE(doc);
        REQUIRE(reply.ended());
        CHECK(json::accept(doc));   // nlohmann's parser as a second opinion
        request["docs"].push_back({si, doc});
      }
    }
  }
  MESSAGE(request["docs"].size() << " documents; " << brute_checked << " masks checked against every token");
  TempDir dir("json_walks");
  { std::ofstream(dir / "walks.json") << request.dump(); }
  const Command ref = run("python3 " + (source_root() / "tests/python/json_schema_ref.py").string() + " " +
                          (dir / "walks.json").string());
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

namespace {

// A game's NPC as a small model at temperature 1 writes it: the aim is documents that end.
const char* kNpcSchema = R"({"type": "object", "properties": {
  "name": {"enum": ["Ada", "Bram", "Cyra", "Dov"]},
  "role": {"enum": ["guard", "smith", "thief"]},
  "level": {"type": "integer"},
  "hostile": {"type": "boolean"},
  "items": {"type": "array", "items": {"enum": ["sword", "bread"]}, "maxItems": 2}},
  "required": ["name", "role", "level", "hostile", "items"],
  "additionalProperties": false})";

struct NpcRun {
  std::vector<std::string> finished;
  int unfinished = 0;
};

// Eight replies to the NPC schema, 96 tokens each at most, from the random qwen3 family fixture.
NpcRun npc_documents(reach::Model& model, reach::JsonWhitespace ws) {
  reach::GenerationOptions o;
  o.session.context = 160;
  o.session.chunk = 64;
  o.sampling.temperature = 1;
  o.sampling.top_k = 0;
  o.sampling.top_p = 1;
  reach::Generation gen(model, o);
  const auto trie = TokenTrie::for_tokenizer(*model.tokenizer());
  gen.set_constraint(std::make_shared<JsonConstraint>(JsonGrammar::from_schema_text(kNpcSchema, ws), trie));
  const std::vector<int32_t> prompt = model.tokenizer()->encode("An NPC as JSON:", true);
  NpcRun run;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    reach::SamplerParams p = o.sampling;
    p.seed = seed;
    gen.restart(p, {});
    gen.session().prefill(prompt);
    std::string doc;
    bool ended = false;
    for (int i = 0; i < 96 && !ended; ++i) {
      const reach::GeneratedToken t = gen.next();
      ended = t.stop;
      if (!ended) {
        doc += t.text;
        gen.session().decode(t.id);
      }
    }
    doc += gen.flush();
    if (ended) run.finished.push_back(doc);
    else ++run.unfinished;
  }
  return run;
}

}  // namespace

TEST_CASE("a random small model at temperature 1 finishes compact NPC documents within 96 tokens") {
  auto model = reach::test::load_model(source_root() / "tests/data/families/qwen3/hf");
  REQUIRE(model->tokenizer());
  nlohmann::ordered_json request = {{"schemas", json::array({json::parse(kNpcSchema)})}, {"docs", json::array()}};
  for (auto ws : {reach::JsonWhitespace::compact, reach::JsonWhitespace::pretty}) {
    const bool pretty = ws == reach::JsonWhitespace::pretty;
    const NpcRun run = npc_documents(*model, ws);
    MESSAGE(std::string(pretty ? "pretty" : "compact") << ": " << run.finished.size() << " of 8 documents finished within 96 tokens");
    for (const std::string& doc : run.finished) {
      CAPTURE(doc);
      CHECK(json::accept(doc));
      if (!pretty) {
        CHECK(doc.find('\n') == std::string::npos);
        CHECK(doc.find("  ") == std::string::npos);   // at most one space in a gap
      }
      request["docs"].push_back({0, doc});
    }
    if (!pretty) CHECK(run.finished.size() >= 6);
  }
  TempDir dir("json_npc");
  { std::ofstream(dir / "npc.json") << request.dump(); }
  const Command ref = run("python3 " + (source_root() / "tests/python/json_schema_ref.py").string() + " " +
                          (dir / "npc.json").string());
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
