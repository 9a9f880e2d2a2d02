// Hostile tokenizer.json files, generated here: parameters that would stop a
// scanning loop from advancing, steps that grow the text without end, unbounded
// nesting and ids out of range.  Each case runs in a child process with a time
// limit and an address-space ceiling (tests/support/isolated_run.hpp): a hang,
// a runaway allocation or a stack overflow fails it promptly.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "runtime/text/tokenizer.hpp"
#include "tests/support/isolated_run.hpp"
#include "tests/support/tokenizer_cases.hpp"

using nlohmann::json;
using reach::test::json_quoted;
using reach::test::read_json;
using reach::test::show_ids;
using reach::test::tokenizer_data_dir;
using reach::ErrorCode;
using reach::Tokenizer;
using reach::test::Outcome;
using reach::test::run_isolated;

namespace {

// A BPE model with a few tokens; each case adds the hostile part.
json base() {
  return json::parse(R"({"version": "1.0", "model": {"type": "BPE",
    "vocab": {"a": 0, "b": 1, "ab": 2, "\u2581": 3, " ": 4, "x": 5, "aab": 6, "<s>": 7},
    "merges": ["a b"]}})");
}

json with(const char* key, const json& value) {
  json j = base();
  j[key] = value;
  return j;
}

// Loads, encodes and decodes a little: a load-time check must stop a hostile
// file before either runs.  Returns "ids|decoded text".
std::string exercise(const std::string& text, const std::string& input = "ab ab a b") {
  Tokenizer tok = Tokenizer::from_json(text, "hostile.json");
  std::vector<int32_t> ids = tok.encode(input, true);
  return show_ids(ids) + "|" + tok.decode(ids, false);
}

void expect_error(const Outcome& o, ErrorCode code, std::initializer_list<std::string> words) {
  INFO(o.describe());
  CHECK(o.kind == Outcome::error);
  if (o.kind != Outcome::error) return;  // one failure per case, the cases after it still run
  CHECK(reach::error_code_name(o.code) == std::string(reach::error_code_name(code)));
  for (const std::string& w : words) CHECK_MESSAGE(o.message.find(w) != std::string::npos, "missing: " << w);
}

void expect_error(const json& j, ErrorCode code, std::initializer_list<std::string> words) {
  const std::string text = j.dump();
  expect_error(run_isolated([&] { return exercise(text); }), code, words);
}

std::string expect_result(const std::function<std::string()>& f) {
  Outcome o = run_isolated(f);
  INFO(o.describe());
  REQUIRE(o.kind == Outcome::returned);
  return o.message;
}

// `levels` Sequences of `key` around `leaf` ({"type": "Sequence", key: [...]}), as
// text: building (or dumping) a deep nlohmann value would itself recurse per level.
std::string nest_text(const char* key, const json& leaf, int levels) {
  std::string open = R"({"type": "Sequence", ")" + std::string(key) + "\": [", close = "]}", out;
  out.reserve((open.size() + close.size()) * size_t(levels) + 64);
  for (int i = 0; i < levels; ++i) out += open;
  out += leaf.dump();
  for (int i = 0; i < levels; ++i) out += close;
  return out;
}
json nest(const char* key, const json& leaf, int levels) { return json::parse(nest_text(key, leaf, levels)); }

// base() with `key` set to the JSON `text`.
std::string with_text(const char* key, const std::string& text) {
  std::string b = base().dump();
  return b.substr(0, b.size() - 1) + ",\"" + key + "\":" + text + "}";
}

json template_with_ids(const json& ids) {
  json t = json::parse(R"({"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [], "special_tokens": {"<s>": {"id": "<s>", "tokens": ["<s>"]}}})");
  t["special_tokens"]["<s>"]["ids"] = ids;
  return t;
}

const char* const kMaxU64 = "18446744073709551615";

}  // namespace

// ---------------------------------------------------------------- loops that cannot advance

TEST_CASE("tokenizer_hostile: Metaspace replacement must be one character") {
  // "" made every encode loop forever (the split on "" never advances) while memory grew.
  json ms = json::parse(R"({"type": "Metaspace", "replacement": "", "prepend_scheme": "always", "split": true})");
  expect_error(with("pre_tokenizer", ms), ErrorCode::format,
               {"hostile.json", "pre_tokenizer.replacement", "one character"});
  ms["replacement"] = "ab";  // tokenizers reads a char: "ab" does not load there either
  expect_error(with("pre_tokenizer", ms), ErrorCode::format, {"pre_tokenizer.replacement", "\"ab\""});
  ms["replacement"] = "";
  expect_error(with("pre_tokenizer", nest("pretokenizers", ms, 1)), ErrorCode::format,
               {"pre_tokenizer.pretokenizers[0].replacement"});
  expect_error(with("decoder", ms), ErrorCode::format, {"decoder.replacement", "one character"});
  // One multi-byte character is fine.
  ms["replacement"] = "\u2581";
  CHECK(expect_result([&] { return exercise(with("pre_tokenizer", ms).dump(), "a b"); }) ==
        "[3,0,3,1]|\u2581 a \u2581 b");
}

TEST_CASE("tokenizer_hostile: Strip decoder content and counts") {
  // content "" with a huge start spun ~2^64 times per decode.
  json strip = json::parse(std::string(R"({"type": "Strip", "content": "", "start": )") + kMaxU64 + R"(, "stop": 0})");
  expect_error(with("decoder", strip), ErrorCode::format, {"decoder.content", "one character"});
  strip["content"] = "ab";
  expect_error(with("decoder", strip), ErrorCode::format, {"decoder.content"});
  strip["content"] = " ";
  strip["start"] = -1;  // was converted to 2^64 - 1
  expect_error(with("decoder", strip), ErrorCode::format, {"decoder.start", "non-negative integer", "-1"});
  strip["start"] = 1e30;  // a float converted to an integer: undefined behaviour
  expect_error(with("decoder", strip), ErrorCode::format, {"decoder.start"});
  strip["start"] = 0;
  strip["stop"] = 2.5;
  expect_error(with("decoder", strip), ErrorCode::format, {"decoder.stop"});
  // A huge count with a real character loads (tokenizers accepts it) and stops at the token's end.
  strip = json::parse(std::string(R"({"type": "Strip", "content": "a", "start": )") + kMaxU64 + ", \"stop\": " +
                      kMaxU64 + "}");
  const std::string text = with("decoder", strip).dump();
  CHECK(expect_result([&] {
          Tokenizer t = Tokenizer::from_json(text);
          return t.decode(std::vector<int32_t>{6, 0, 1}, false);  // "aab" "a" "b"
        }) == "bb");
}

TEST_CASE("tokenizer_hostile: empty patterns advance (ids as the tokenizers library gives them)") {
  // Expected ids from the tokenizers package for "ab ab".
  for (const char* pattern : {R"({"String": ""})", R"({"Regex": ""})"}) {
    CAPTURE(pattern);
    json replace = {{"type", "Replace"}, {"pattern", json::parse(pattern)}, {"content", "x"}};
    CHECK(expect_result([&] { return exercise(with("normalizer", replace).dump(), "ab ab"); }) ==
          "[5,0,5,1,5,4,5,0,5,1,5]|x a x b x   x a x b x");
    json split = {{"type", "Split"}, {"pattern", json::parse(pattern)}, {"behavior", "Isolated"}, {"invert", false}};
    CHECK(expect_result([&] { return exercise(with("pre_tokenizer", split).dump(), "ab ab"); }) ==
          "[0,1,4,0,1]|a b   a b");
    json dec = {{"type", "Replace"}, {"pattern", json::parse(pattern)}, {"content", "x"}};
    CHECK(expect_result([&] {
            return Tokenizer::from_json(with("decoder", dec).dump()).decode(std::vector<int32_t>{0, 1}, false);
          }) == "xaxxbx");
  }
  // And over a long text, within the time limit.
  json j = base();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", ""}}}, {"content", "x"}};
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", ""}}}, {"behavior", "Removed"}, {"invert", true}};
  const std::string text = j.dump();
  CHECK(expect_result([&] {
          return std::to_string(Tokenizer::from_json(text).encode(std::string(1 << 20, 'a'), false).size());
        }) == "0");  // Removed + invert drops every piece, as in tokenizers
}

// ---------------------------------------------------------------- steps that grow the text

TEST_CASE("tokenizer_hostile: chained steps cannot grow the text without bound") {
  json doubling = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}};
  // 64 doublings: 2^64 bytes; now stopped at 32x + 64 KiB of the input.
  json norm = {{"type", "Sequence"}, {"normalizers", json::array()}};
  for (int i = 0; i < 64; ++i) norm["normalizers"].push_back(doubling);
  expect_error(with("normalizer", norm), ErrorCode::format, {"hostile.json", "normalizer.normalizers[", "grows"});
  json dec = {{"type", "Sequence"}, {"decoders", json::array()}};
  for (int i = 0; i < 64; ++i) dec["decoders"].push_back(doubling);
  expect_error(with("decoder", dec), ErrorCode::format, {"decoder.decoders[", "(Replace) grows"});
  // ByteLevel maps a byte to up to 2: 40 of them in a row double the text 40 times.
  json pre = {{"type", "Sequence"}, {"pretokenizers", json::array()}};
  for (int i = 0; i < 40; ++i)
    pre["pretokenizers"].push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  expect_error(with("pre_tokenizer", pre), ErrorCode::format, {"pre_tokenizer.pretokenizers[", "(ByteLevel) grows"});
  // One step with a huge replacement: an empty pattern matches between all characters.
  const std::string mib(1 << 20, 'x');
  expect_error(with("normalizer", {{"type", "Replace"}, {"pattern", {{"String", ""}}}, {"content", mib}}),
               ErrorCode::format, {"normalizer (Replace) grows"});
  expect_error(with("decoder", {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", mib}}),
               ErrorCode::format, {"decoder (Replace) grows"});
  expect_error(with("normalizer", {{"type", "Prepend"}, {"prepend", mib}}), ErrorCode::format,
               {"normalizer (Prepend) grows"});
  // What real tokenizers do stays well inside: " " -> "\u2581" on a text of spaces (3x).
  json llama = json::parse(R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})");
  CHECK(expect_result([&] {
          return std::to_string(Tokenizer::from_json(with("normalizer", llama).dump()).encode(std::string(100000, ' '),
                                                                                              false).size());
        }) == "100001");
}

// ---------------------------------------------------------------- nesting

TEST_CASE("tokenizer_hostile: deep nesting is refused before it can exhaust the stack") {
  const int deep = 1000000;
  const std::string arrays = std::string(deep, '[') + std::string(deep, ']');
  for (const std::string& text :
       {arrays, R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": )" + arrays + "}",
        R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "added_tokens": )" + arrays + "}"}) {
    expect_error(run_isolated([&] { return exercise(text); }), ErrorCode::format,
                 {"hostile.json", "nests deeper than 64 levels"});
  }
  // Many small values: each costs a parsed node (~60 bytes for "[]").  The ceiling
  // on the child's address space shows the parse stays bounded.
  std::string many = R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "x": [)";
  for (int i = 0; i < (8 << 20); ++i) many += "[],";
  many += "[]]}";
  expect_error(run_isolated([&] { return exercise(many); }, 20, size_t{1} << 30), ErrorCode::format,
               {"hostile.json", "holds more than 8388608 values"});
  // Nested Sequences: the builders recurse once per level.
  const json leaf_norm = {{"type", "NFC"}};
  const json leaf_pre = {{"type", "WhitespaceSplit"}};
  const json leaf_dec = {{"type", "Fuse"}};
  const json leaf_post = {{"type", "ByteLevel"}};
  for (const std::string& text : {with_text("normalizer", nest_text("normalizers", leaf_norm, 100000)),
                                  with_text("decoder", nest_text("decoders", leaf_dec, 100000))})
    expect_error(run_isolated([&] { return exercise(text); }), ErrorCode::format, {"nests deeper"});
  expect_error(with("normalizer", nest("normalizers", leaf_norm, 20)), ErrorCode::format,
               {"normalizer.normalizers[0]", "Sequence nested deeper than 16"});
  expect_error(with("pre_tokenizer", nest("pretokenizers", leaf_pre, 20)), ErrorCode::format,
               {"pre_tokenizer.pretokenizers[0]", "Sequence nested deeper than 16"});
  expect_error(with("decoder", nest("decoders", leaf_dec, 20)), ErrorCode::format,
               {"decoder.decoders[0]", "Sequence nested deeper than 16"});
  expect_error(with("post_processor", nest("processors", leaf_post, 20)), ErrorCode::format,
               {"post_processor.processors[0]", "Sequence nested deeper than 16"});
  // 16 levels load.
  CHECK(expect_result([&] { return exercise(with("normalizer", nest("normalizers", leaf_norm, 16)).dump()); }) ==
        "[2,4,2,4,0,4,1]|ab   ab   a   b");
  // A Sequence whose list is not an array.
  expect_error(with("decoder", {{"type", "Sequence"}, {"decoders", 5}}), ErrorCode::format,
               {"decoder.decoders", "expected an array"});
}

// ---------------------------------------------------------------- ids out of range

TEST_CASE("tokenizer_hostile: post-processor ids are integers in [0, 2^31)") {
  const std::string key = R"(post_processor.special_tokens["<s>"].ids[0])";
  // 1e30 became INT_MIN, -1 and 2^32 were taken as they came (tokenizers refuses all four).
  for (const std::string bad : {"1e30", "-1", "4294967296", "1.0", "2147483648", "\"7\"", "null"}) {
    CAPTURE(bad);
    expect_error(with("post_processor", template_with_ids(json::array({json::parse(bad)}))), ErrorCode::format,
                 {key, "token id"});
  }
  // ids that are not a list were iterated as a one-element list.
  expect_error(with("post_processor", template_with_ids(1e30)), ErrorCode::format,
               {R"(special_tokens["<s>"].ids)", "expected an array"});
  expect_error(with("post_processor", nest("processors", template_with_ids(json::array({-5})), 1)), ErrorCode::format,
               {R"(post_processor.processors[0].special_tokens["<s>"].ids[0])"});
  // An id in range but past the vocabulary is refused too (tokenizers would emit
  // it; the model's embedding table has no such row).
  expect_error(with("post_processor", template_with_ids(json::array({2147483647}))), ErrorCode::format,
               {"post_processor", "not in the vocabulary"});

  for (const std::string type : {"RobertaProcessing", "BertProcessing"}) {
    CAPTURE(type);
    json p = {{"type", type}, {"cls", {"<s>", 7}}, {"sep", {"<s>", 7}}};
    CHECK(expect_result([&] { return exercise(with("post_processor", p).dump(), "ab"); }) == "[7,2,7]|<s> ab <s>");
    p["cls"] = {"<s>", 1e30};
    expect_error(with("post_processor", p), ErrorCode::format, {"post_processor.cls[1]", "token id"});
    p["cls"] = {"<s>", 7};
    p["sep"] = {"</s>", -2};
    expect_error(with("post_processor", p), ErrorCode::format, {"post_processor.sep[1]", "-2"});
    p["sep"] = {"</s>", 4294967296};
    expect_error(with("post_processor", p), ErrorCode::format, {"post_processor.sep[1]"});
    p["sep"] = 7;
    expect_error(with("post_processor", p), ErrorCode::format, {"post_processor.sep", "[\"token\", id]"});
  }
}

TEST_CASE("tokenizer_hostile: vocab and added-token ids, flags") {
  for (const std::string bad : {"1e30", "-1", "4294967296", "1.5", "18446744073709551615"}) {
    CAPTURE(bad);
    json j = base();
    j["model"]["vocab"]["b"] = json::parse(bad);
    expect_error(j, ErrorCode::format, {R"(model.vocab["b"])", "token id"});
    j = base();
    j["added_tokens"] = json::array({{{"id", json::parse(bad)}, {"content", "<x>"}, {"special", true}}});
    expect_error(j, ErrorCode::format, {"added_tokens[0].id", "token id"});
  }
  // A flag of the wrong type names its key.
  json j = base();
  j["model"]["byte_fallback"] = "yes";
  expect_error(j, ErrorCode::format, {"model.byte_fallback", "true or false"});
  j = base();
  j["added_tokens"] = json::array({{{"id", 8}, {"content", "<x>"}, {"special", 1}}});
  expect_error(j, ErrorCode::format, {"added_tokens[0].special"});
  j = with("pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", "no"}});
  expect_error(j, ErrorCode::format, {"pre_tokenizer.add_prefix_space"});
}

// ---------------------------------------------------------------- added-token matching

TEST_CASE("tokenizer_hostile: added-token matching is linear in the text") {
  // 50k tokens sharing a 100-byte prefix with the text: every position compared
  // against all of them (an hour for the Bible); now one automaton pass.
  json j = base();
  j["added_tokens"] = json::array();
  for (int k = 0; k < 50000; ++k)
    j["added_tokens"].push_back(
        {{"id", 8 + k}, {"content", std::string(100, 'a') + std::to_string(k)}, {"special", true}});
  // And one long token that the text follows for 1 MB before it differs.
  j["added_tokens"].push_back({{"id", 60000}, {"content", std::string(1 << 20, 'a') + "b"}, {"special", true}});
  const std::string text = j.dump();
  const std::string input = std::string(1 << 20, 'a') + std::string(100, 'a') + "49999";
  CHECK(expect_result([&] {
          std::vector<int32_t> ids = Tokenizer::from_json(text).encode(input, false);
          return std::to_string(ids.size()) + " " + std::to_string(ids.back());
        }) == std::to_string((1 << 20) + 1) + " 50007");
  // Their total content is bounded (real ones: ~100 kB).
  j = base();
  j["added_tokens"] = json::array();
  for (int k = 0; k < 17; ++k)
    j["added_tokens"].push_back({{"id", 8 + k}, {"content", std::string(1 << 20, char('a' + k))}, {"special", true}});
  expect_error(j, ErrorCode::format, {"hostile.json", "added_tokens hold", "more than 16 MiB"});
}

TEST_CASE("tokenizer_hostile: added-token matching is leftmost-longest (against a brute-force reference)") {
  std::mt19937 rng(7);
  // Characters sharing bytes: "\u00e9" and "\u00fc" both start with 0xC3.
  const std::vector<std::string> chars = {"a", "b", "\u00e9", "\u00fc"};
  for (int round = 0; round < 300; ++round) {
    // Tokens of 1-5 characters: many are prefixes or suffixes of others, some repeat.
    json j = json::parse(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\u00e9": 2, "\u00fc": 3},
                            "merges": []}})");
    std::vector<std::string> contents;
    const int n = 1 + int(rng() % 12);
    for (int k = 0; k < n; ++k) {
      std::string c;
      for (int len = 1 + int(rng() % 5); len > 0; --len) c += chars[rng() % chars.size()];
      contents.push_back(c);
      j["added_tokens"].push_back({{"id", 4 + k}, {"content", c}, {"special", true}});
    }
    std::vector<int> text;  // character indices
    for (int len = int(rng() % 60); len > 0; --len) text.push_back(int(rng() % chars.size()));
    std::string input;
    std::vector<size_t> at;  // byte offset of each character
    for (int c : text) {
      at.push_back(input.size());
      input += chars[c];
    }
    // Reference: at each character the longest content (the first of equal ones), else the character.
    std::vector<int32_t> want;
    for (size_t i = 0; i < text.size();) {
      int best = -1;
      for (int k = 0; k < n; ++k)
        if (input.compare(at[i], contents[k].size(), contents[k]) == 0 &&
            (best < 0 || contents[k].size() > contents[best].size()))
          best = k;
      if (best < 0) {
        want.push_back(text[i]);
        ++i;
      } else {
        want.push_back(4 + best);
        const size_t end = at[i] + contents[best].size();
        while (i < text.size() && at[i] < end) ++i;
      }
    }
    CAPTURE(j.dump());
    CAPTURE(input);
    CHECK(show_ids(Tokenizer::from_json(j.dump()).encode(input, false)) == show_ids(want));
  }
}

TEST_CASE("tokenizer_hostile: a pattern that backtracks without end is a format error naming its key") {
  // PCRE2's limits stop it; the error was "internal" (a bug in reach) and named no key.
  json split = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}, {"invert", false}};
  const std::string text = with("pre_tokenizer", split).dump();
  Outcome o = run_isolated([&] {
    Tokenizer::from_json(text, "hostile.json").encode(std::string(40, 'a') + "b", false);
    return std::string();
  });
  expect_error(o, ErrorCode::format, {"hostile.json: pre_tokenizer.pattern", "gives up", "match limit"});
  CHECK(o.seconds < 10);
}
