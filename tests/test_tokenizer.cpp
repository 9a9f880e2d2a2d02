// Tokenizer tests against the Hugging Face `tokenizers` oracle: the expected
// ids and decodes in tests/data/tokenizer/*.expect.json were written by
// tools/gen_tokenizer_tests.py (rerun it to regenerate; CI only reads them).
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/text/utf8.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/tokenizer_cases.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using reach::test::json_quoted;
using reach::test::read_json;
using reach::test::show_ids;
using reach::test::tokenizer_data_dir;
using reach::test::error_of;
using reach::test::read_text;
using reach::test::source_root;
using reach::test::TempDir;

namespace {

const char* const tokenizer_names[] = {"llama3_bpe", "gpt4o_bpe", "smollm_bpe", "smollm2", "gpt2_bpe", "roberta_bpe", "llama2_sp", "mistral_sp", "edge_bpe", "edge_sp"};

struct Fixture {
  reach::Tokenizer tok;
  json expect;
};

Fixture load_fixture(const std::string& name) {
  fs::path dir = tokenizer_data_dir();
  return {reach::Tokenizer::load(dir / (name + ".json")), read_json(dir / (name + ".expect.json"))};
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

}  // namespace

TEST_CASE("tokenizer: ids and decodes match the tokenizers oracle") {
  std::vector<std::string> names(std::begin(tokenizer_names), std::end(tokenizer_names));
  // The real SmolLM2 tokenizer, when its data (written by the model-conversion tooling) is there.
  if (fs::exists(tokenizer_data_dir() / "smollm2.expect.json") && fs::exists(tokenizer_data_dir() / "smollm2.json"))
    names.push_back("smollm2");
  for (const std::string& name : names) {
    CAPTURE(name);
    Fixture f = load_fixture(name);
    int cases = 0, failures = 0;
    auto report = [&](const std::string& what) {
      if (++failures <= 8) MESSAGE(name << ": " << what);
    };
    for (const json& c : f.expect["cases"]) {
      std::string text = c["text"].get<std::string>();
      auto want = c["ids"].get<std::vector<int32_t>>();
      auto want_sp = c["ids_special"].get<std::vector<int32_t>>();
      auto got = f.tok.encode(text, false);
      auto got_sp = f.tok.encode(text, true);
      ++cases;
      if (got != want)
        report("encode " + json_quoted(text) + "\n  expected " + show_ids(want) + "\n  actual   " + show_ids(got));
      if (got_sp != want_sp)
        report("encode(add_special) " + json_quoted(text) + "\n  expected " + show_ids(want_sp) + "\n  actual   " +
               show_ids(got_sp));
      // Absent decodes equal the text / the decode with specials skipped.
      std::string want_dec = c.value("decoded", text);
      std::string want_keep = c.value("decoded_keep_special", want_dec);
      std::string dec = f.tok.decode(want_sp, true), dec_keep = f.tok.decode(want_sp, false);
      if (dec != want_dec)
        report("decode " + show_ids(want_sp) + " of " + json_quoted(text) + "\n  expected " + json_quoted(want_dec) + "\n  actual   " +
               json_quoted(dec));
      if (dec_keep != want_keep)
        report("decode(keep special) " + show_ids(want_sp) + "\n  expected " + json_quoted(want_keep) + "\n  actual   " +
               json_quoted(dec_keep));
    }
    for (const json& c : f.expect["decode_cases"]) {
      auto ids = c["ids"].get<std::vector<int32_t>>();
      ++cases;
      std::string skip = f.tok.decode(ids, true), keep = f.tok.decode(ids, false);
      if (skip != c["skip"].get<std::string>())
        report("decode " + show_ids(ids) + "\n  expected " + json_quoted(c["skip"]) + "\n  actual   " + json_quoted(skip));
      if (keep != c["keep"].get<std::string>())
        report("decode(keep special) " + show_ids(ids) + "\n  expected " + json_quoted(c["keep"]) + "\n  actual   " +
               json_quoted(keep));
    }
    MESSAGE(name << ": " << cases << " cases, " << failures << " mismatches");
    CHECK(cases > 300);
    CHECK(failures == 0);
  }
}

TEST_CASE("tokenizer: streaming decode never splits a character") {
  for (std::string name : tokenizer_names) {
    CAPTURE(name);
    Fixture f = load_fixture(name);
    int held_back = 0, failures = 0;
    for (const json& c : f.expect["cases"]) {
      auto ids = c["ids_special"].get<std::vector<int32_t>>();
      for (bool skip : {true, false}) {
        reach::Tokenizer::StreamDecoder stream(f.tok, skip);
        std::string total;
        bool ok = true;
        for (int32_t id : ids) {
          std::string piece = stream.push(id);
          if (piece.empty() && !f.tok.is_special(id)) ++held_back;
          ok = ok && reach::utf8::is_valid(piece) && !reach::utf8::ends_incomplete(piece);
          total += piece;
        }
        total += stream.flush();
        std::string whole = f.tok.decode(ids, skip);
        if (!ok || total != whole) {
          if (++failures <= 5)
            MESSAGE(name << ": stream " << show_ids(ids) << " of " << json_quoted(c["text"]) << "\n  decode " << json_quoted(whole)
                         << "\n  stream " << json_quoted(total) << (ok ? "" : " (a push split a character)"));
        }
      }
    }
    CHECK(failures == 0);
    CHECK(held_back > 0);  // the data has characters split across tokens (emoji, CJK via bytes)
  }
}

TEST_CASE("tokenizer: streaming a CJK + emoji string byte by byte") {
  Fixture f = load_fixture("llama2_sp");
  // 𠀀 and the ZWJ family are not in the vocab: byte fallback, one byte per token.
  std::string text = "你好 𠀀 👨\u200d👩\u200d👧 ok";
  auto ids = f.tok.encode(text, true);
  reach::Tokenizer::StreamDecoder stream(f.tok);
  std::string total;
  for (int32_t id : ids) {
    std::string piece = stream.push(id);
    CHECK(reach::utf8::is_valid(piece));
    total += piece;
  }
  total += stream.flush();
  CHECK(total == text);
  CHECK(f.tok.decode(ids) == text);
}

TEST_CASE("tokenizer: special tokens, vocab and post-processor flags") {
  fs::path dir = tokenizer_data_dir();
  auto l3 = reach::Tokenizer::load(dir / "llama3_bpe.json");
  auto bot = l3.find("<|begin_of_text|>");
  REQUIRE(bot);
  CHECK(l3.bos_id() == bot);
  CHECK(l3.adds_bos());
  CHECK(l3.is_special(*bot));
  CHECK(l3.token_text(*bot) == "<|begin_of_text|>");
  CHECK(l3.vocab_size() == 3007);
  CHECK(l3.eos_id() == l3.find("<|end_of_text|>"));
  CHECK_FALSE(l3.is_special(*l3.find("<think>")));  // non-special added token
  CHECK(l3.encode("hi", true).front() == *bot);
  CHECK(l3.encode("hi", false).front() != *bot);
  CHECK(l3.token_text(-1).empty());
  CHECK(l3.token_text(1 << 30).empty());
  CHECK_FALSE(l3.find("no such token here"));

  auto smol = reach::Tokenizer::load(dir / "smollm_bpe.json");
  CHECK_FALSE(smol.adds_bos());
  CHECK(smol.special_suffix().empty());
  CHECK(smol.find("<|endoftext|>") == 0);
  CHECK(smol.eos_id() == 0);

  auto roberta = reach::Tokenizer::load(dir / "roberta_bpe.json");
  CHECK(roberta.special_prefix().size() == 1);
  CHECK(roberta.special_suffix().size() == 1);
  CHECK(roberta.bos_id() == roberta.find("<s>"));
  CHECK(roberta.eos_id() == roberta.find("</s>"));

  auto l2 = reach::Tokenizer::load(dir / "llama2_sp.json");
  CHECK(l2.bos_id() == 1);
  CHECK(l2.eos_id() == 2);
  CHECK(l2.find("<0x0A>") == 3 + 10);
  auto nl = l2.encode("\xF0\xA0\x80\x80", false);  // not in the vocab: byte fallback
  CHECK(nl.size() == 5);                           // "▁" + 4 bytes
  CHECK(l2.decode(nl) == "\xF0\xA0\x80\x80");
  // Invalid UTF-8 input is replaced, not rejected.
  CHECK(l3.decode(l3.encode("a\xFF" "b", false)) == "a\xEF\xBF\xBD" "b");
}

TEST_CASE("tokenizer: load errors name the file and say what to do") {
  const TempDir tmp("tokenizer");
  const fs::path& dir = tmp.path;
  SUBCASE("missing file") {
    fs::path p = dir / "nope" / "tokenizer.json";
    const std::string m = error_of([&] { reach::Tokenizer::load(p); }, reach::ErrorCode::io);
    CHECK_HAS(m, p.string());
    CHECK_HAS(m, "Hugging Face");
  }
  SUBCASE("directory without tokenizer.json") {
    CHECK_HAS(error_of([&] { reach::Tokenizer::load(dir); }, reach::ErrorCode::io), (dir / "tokenizer.json").string());
  }
  auto expect_error = [&](const std::string& file, const std::string& text, reach::ErrorCode code,
                          std::initializer_list<const char*> words) {
    fs::path p = dir / file;
    write_file(p, text);
    CAPTURE(file);
    const std::string m = error_of([&] { reach::Tokenizer::load(p); }, code);
    CHECK_HAS(m, p.string());
    for (const char* w : words) CHECK_HAS(m, w);
  };
  std::string good = read_json(tokenizer_data_dir() / "gpt2_bpe.json").dump();
  expect_error("malformed.json", "{\"model\": {\"type\": \"BPE\", ", reach::ErrorCode::format, {"malformed JSON"});
  expect_error("truncated.json", good.substr(0, good.size() / 2), reach::ErrorCode::format, {"malformed JSON"});
  expect_error("empty.json", "", reach::ErrorCode::format, {"malformed JSON"});
  expect_error("array.json", "[1, 2, 3]", reach::ErrorCode::format, {});
  expect_error("nomodel.json", "{\"version\": \"1.0\"}", reach::ErrorCode::format, {"model"});
  expect_error("wordpiece.json",
               R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0}}})",
               reach::ErrorCode::unsupported, {"WordPiece", "BPE"});
  expect_error("unigram.json", R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})",
               reach::ErrorCode::unsupported, {"Unigram", "BPE"});
  expect_error("badmerge.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})",
               reach::ErrorCode::format, {"merges[0]", "ab"});
  expect_error("badvocab.json", R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})",
               reach::ErrorCode::format, {"vocab"});
  expect_error("badregex.json",
               R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                   "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})",
               reach::ErrorCode::format, {"pre_tokenizer", "(unclosed"});
  expect_error("badtype.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "byte_fallback": "yes"}})",
               reach::ErrorCode::format, {});
  expect_error("hugeid.json", R"({"model": {"type": "BPE", "vocab": {"a": 2000000000}, "merges": []}})",
               reach::ErrorCode::format, {"2000000000"});
  expect_error("badnorm.json",
               R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "BertNormalizer"}})",
               reach::ErrorCode::unsupported, {"BertNormalizer"});
}

TEST_CASE("tokenizer: encoding a few hundred KB is fast") {
  // Texts from the oracle data (prose, CJK, code, unicode soup), repeated to ~300 KB.
  std::string text;
  json expect = read_json(tokenizer_data_dir() / "llama3_bpe.expect.json");
  std::string all;
  for (const json& c : expect["cases"]) all += c["text"].get<std::string>() + "\n";
  while (text.size() < 300 * 1024) text += all;
  for (std::string name : {"llama3_bpe", "llama2_sp"}) {
    auto tok = reach::Tokenizer::load(tokenizer_data_dir() / (name + ".json"));  // cold cache
    auto t0 = std::chrono::steady_clock::now();
    auto ids = tok.encode(text, false);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(name << ": encoded " << text.size() / 1024 << " KB into " << ids.size() << " tokens in " << s * 1e3
                 << " ms");
    CHECK(s < 5.0);  // well under 1 s in an optimized build; loose for debug / sanitizer builds
    CHECK(tok.decode(ids, false) == text);
  }
}
