// The C API's text side (include/reach.h): reach_reply's harmony channels and stop strings, the chat
// template through reach_chat_tokenize and reach_chat_end_tokens, reach_embed against the fixture's
// float64 embeddings, and tool calls (reach_chat_tokenize_tools, reach_session_set_tools,
// reach_reply_tool_calls_json).
#include <doctest/doctest.h>
#include <reach.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/capi_check.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach::test::capi;

TEST_CASE("capi: reach_reply splits a gpt-oss reply into its channels and stops in the final one") {
  const std::filesystem::path fixture = reach::test::source_root() / "tests/data/families/gpt_oss/hf";
  reach::test::TempDir dir("capi_reply");
  for (const auto& e : std::filesystem::directory_iterator(fixture))
    std::filesystem::copy_file(e.path(), dir.path / e.path().filename());
  {
    // The fixture's tokenizer_config.json with gpt-oss's template in it, as the harmony serve test does.
    std::string config = reach::test::read_text(fixture / "tokenizer_config.json");
    std::string tmpl = reach::test::read_text(reach::test::source_root() / "tests/data/chat_templates/gpt_oss.jinja");
    std::string quoted = "\"";
    for (char c : tmpl) {
      if (c == '"' || c == '\\') quoted += '\\', quoted += c;
      else if (c == '\n') quoted += "\\n";
      else if (c == '\t') quoted += "\\t";
      else quoted += c;
    }
    quoted += "\"";
    const size_t brace = config.rfind('}');
    REQUIRE(brace != std::string::npos);
    config = config.substr(0, brace) + ", \"chat_template\": " + quoted + "}\n";
    std::ofstream(dir.path / "tokenizer_config.json") << config;
  }
  reach_device* dev = nullptr;
  reach_model* m = nullptr;
  REQUIRE_OK(reach_device_create(nullptr, &dev));
  REQUIRE_OK(reach_model_load(dev, dir.path.string().c_str(), nullptr, &m));

  const std::string reply_text =
      "<|channel|>analysis<|message|>Think: the answer is 4. STOP? No.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4. STOP here, not shown.";
  size_t n = 0;
  REQUIRE_OK(reach_tokenize(m, reply_text.data(), reply_text.size(), 0, nullptr, 0, &n));
  std::vector<int32_t> ids(n);
  REQUIRE_OK(reach_tokenize(m, reply_text.data(), reply_text.size(), 0, ids.data(), ids.size(), &n));

  struct Got {
    std::string content, reasoning;
    bool stopped = false;
  };
  auto run = [&](int32_t channels, std::vector<const char*> stops) {
    reach_reply_params rp = reach_reply_default_params();
    rp.channels = channels;
    rp.stop = stops.data();
    rp.n_stop = stops.size();
    reach_reply* r = nullptr;
    REQUIRE_OK(reach_reply_create(m, &rp, &r));
    Got g;
    reach_reply_text t{};
    t.size = sizeof t;
    for (int32_t id : ids) {
      REQUIRE_OK(reach_reply_push(r, id, &t));
      g.content.append(t.content, t.content_len);
      g.reasoning.append(t.reasoning, t.reasoning_len);
      g.stopped = t.stopped != 0;
    }
    REQUIRE_OK(reach_reply_finish(r, &t));
    g.content.append(t.content, t.content_len);
    g.reasoning.append(t.reasoning, t.reasoning_len);
    REQUIRE_OK(reach_reply_free(r));
    return g;
  };
  Got g = run(REACH_REPLY_CHANNELS_AUTO, {"STOP"});
  CHECK(g.reasoning == "Think: the answer is 4. STOP? No.");   // stops are not looked for in the analysis
  CHECK(g.content == "2 + 2 = 4. ");
  CHECK(g.stopped);
  g = run(1, {"final", "assistant"});   // header words are not the reply's text
  CHECK(g.content == "2 + 2 = 4. STOP here, not shown.");
  CHECK(!g.stopped);
  g = run(0, {});   // no channels: the decoded text (special tokens dropped) is all content
  CHECK(g.reasoning.empty());
  CHECK(g.content.find("2 + 2 = 4.") != std::string::npos);
  CHECK(g.content.find("<|channel|>") == std::string::npos);

  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(dev));
}

TEST_CASE("capi: reach_chat_tokenize applies the model's chat template; reach_chat_end_tokens ends its turn") {
  // Qwen2's fixture: ChatML (its tokenizer_config.json's template), EOS </s> (2), <|im_end|> (5) not an EOS id.
  const std::string dir = (reach::test::source_root() / "tests/data/families/qwen2/hf").string();
  reach_device* dev = nullptr;
  reach_model* m = nullptr;
  REQUIRE_OK(reach_device_create(env_params(), &dev));
  REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &m));

  auto ids_of = [&](const std::string& text) {
    size_t n = 0;
    REQUIRE_OK(reach_tokenize(m, text.data(), text.size(), 1, nullptr, 0, &n));
    std::vector<int32_t> ids(n);
    REQUIRE_OK(reach_tokenize(m, text.data(), text.size(), 1, ids.data(), ids.size(), &n));
    return ids;
  };
  auto chat_ids = [&](const std::vector<reach_chat_message>& chat) {
    size_t n = 0;
    REQUIRE_OK(reach_chat_tokenize(m, chat.data(), chat.size(), nullptr, 0, &n));
    std::vector<int32_t> ids(n);
    REQUIRE_OK(reach_chat_tokenize(m, chat.data(), chat.size(), ids.data(), ids.size(), &n));
    CHECK(n == ids.size());
    return ids;
  };
  // The ChatML text written out by hand (Qwen 2.5's template: its default system turn when none is given).
  CHECK(chat_ids({{"system", "You are Brom, the smith."}, {"user", "Hello!"}}) ==
        ids_of("<|im_start|>system\nYou are Brom, the smith.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
               "<|im_start|>assistant\n"));
  CHECK(chat_ids({{"user", "Hi"}, {"assistant", "Well met."}, {"user", "Wares?"}}) ==
        ids_of("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
               "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nWell met.<|im_end|>\n"
               "<|im_start|>user\nWares?<|im_end|>\n<|im_start|>assistant\n"));

  // The end tokens: <|im_end|> and the EOS; is_eos knows only the latter.
  size_t n_end = 0;
  REQUIRE_OK(reach_chat_end_tokens(m, nullptr, 0, &n_end));
  std::vector<int32_t> ends(n_end);
  REQUIRE_OK(reach_chat_end_tokens(m, ends.data(), ends.size(), &n_end));
  CHECK(ends == std::vector<int32_t>{5, 2});
  int eos = -1;
  REQUIRE_OK(reach_model_is_eos(m, 5, &eos));
  CHECK(eos == 0);
  int32_t one = 0;
  CHECK_FAILS(reach_chat_end_tokens(m, &one, 1, &n_end), REACH_ERROR_BUFFER_TOO_SMALL);
  CHECK(n_end == 2);

  // Misuse: a code and a message, nothing written.
  const reach_chat_message hello[] = {{"user", "Hello!"}};
  size_t n = 0;
  int32_t small[2] = {-1, -1};
  CHECK_FAILS(reach_chat_tokenize(m, hello, 1, small, 2, &n), REACH_ERROR_BUFFER_TOO_SMALL);
  CHECK(n > 2);
  CHECK(small[0] == -1);
  CHECK_FAILS(reach_chat_tokenize(m, hello, 0, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_chat_tokenize(m, nullptr, 1, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_chat_tokenize(m, hello, 1, nullptr, 0, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  const reach_chat_message no_role[] = {{nullptr, "Hello!"}};
  CHECK_FAILS(reach_chat_tokenize(m, no_role, 1, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(reach_last_error()).find("messages[0].role") != std::string::npos);
  const reach_chat_message no_content[] = {{"user", nullptr}};
  CHECK_FAILS(reach_chat_tokenize(m, no_content, 1, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_chat_tokenize(nullptr, hello, 1, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_chat_end_tokens(nullptr, nullptr, 0, &n), REACH_ERROR_INVALID_ARGUMENT);
  REQUIRE_OK(reach_model_free(m));

  // Token ids only (no tokenizer): no template to apply.
  reach_model_params mp = reach_model_default_params();
  mp.require_tokenizer = 0;
  reach::test::TempDir bare("capi_chat_bare");
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(std::filesystem::path(dir) / f, bare.path / f);
  REQUIRE_OK(reach_model_load(dev, bare.path.string().c_str(), &mp, &m));
  CHECK_FAILS(reach_chat_tokenize(m, hello, 1, nullptr, 0, &n), REACH_ERROR_UNSUPPORTED);
  CHECK_FAILS(reach_chat_end_tokens(m, nullptr, 0, &n), REACH_ERROR_UNSUPPORTED);
  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(dev));
}

TEST_CASE("capi: reach_embed gives the fixture's float64 embeddings; mean and CLS on request; bad calls fail") {
  const auto fixture = reach::test::source_root() / "tests/data/embedding";
  const nlohmann::json ref = nlohmann::json::parse(reach::test::read_text(fixture / "reference.json"));
  reach_device* dev = nullptr;
  REQUIRE_OK(reach_device_create(env_params(), &dev));
  reach_model* m = nullptr;
  REQUIRE_OK(reach_model_load(dev, fixture.string().c_str(), nullptr, &m));
  size_t dims = 0;
  REQUIRE_OK(reach_embedding_dims(m, &dims));
  REQUIRE(dims == ref["dims"].get<size_t>());
  auto cosine = [&](const std::vector<float>& a, const nlohmann::json& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < dims; ++i) {
      const double y = b[i].get<double>();
      ab += a[i] * y, aa += double(a[i]) * a[i], bb += y * y;
    }
    return ab / std::sqrt(aa * bb);
  };
  std::vector<float> v(dims);
  for (const auto& in : ref["inputs"]) {
    CAPTURE(in["text"].get<std::string>());
    const std::vector<int32_t> ids = in["ids"].get<std::vector<int32_t>>();
    REQUIRE_OK(reach_embed(m, ids.data(), ids.size(), v.data(), dims, nullptr));
    CHECK(cosine(v, in["embedding"]) >= 0.9999);
    reach_embed_params p = reach_embed_default_params();
    p.pooling = REACH_POOLING_MEAN;
    REQUIRE_OK(reach_embed(m, ids.data(), ids.size(), v.data(), dims, &p));
    CHECK(cosine(v, in["mean_normalized"]) >= 0.9999);
    p.pooling = REACH_POOLING_CLS;
    p.normalize = 0;
    REQUIRE_OK(reach_embed(m, ids.data(), ids.size(), v.data(), dims, &p));
    CHECK(cosine(v, in["cls_normalized"]) >= 0.9999);
  }
  const int32_t one = 5, outside = 384;
  CHECK_FAILS(reach_embed(m, &one, 1, v.data(), dims - 1, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  CHECK(std::strstr(reach_last_error(), "reach_embedding_dims") != nullptr);
  CHECK_FAILS(reach_embed(m, &one, 0, v.data(), dims, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_embed(m, &outside, 1, v.data(), dims, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_embed(m, &one, 1, nullptr, dims, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_embed(nullptr, &one, 1, v.data(), dims, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  reach_embed_params bad = reach_embed_default_params();
  bad.pooling = 7;
  CHECK_FAILS(reach_embed(m, &one, 1, v.data(), dims, &bad), REACH_ERROR_INVALID_ARGUMENT);
  REQUIRE_OK(reach_embed(m, &one, 1, v.data(), dims, nullptr));   // still usable after the failures
  REQUIRE_OK(reach_model_free(m));
  REQUIRE_OK(reach_device_free(dev));
}

namespace {

const char* const kCapiTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "The weather for a city", )"
    R"("parameters": {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, )"
    R"("days": {"type": "integer"}, "alerts": {"type": "boolean"}}, "required": ["unit", "days"], )"
    R"("additionalProperties": false}}}, {"type": "function", "function": {"name": "clock", "description": )"
    R"("The time", "parameters": {"type": "object", "properties": {"zone": {"enum": ["utc", "local"]}}, )"
    R"("required": ["zone"]}}}])";

// The tools' schemas checked by hand (an independent reading of kCapiTools): why `arguments` breaks
// the named tool's schema, "" when it does not.
std::string schema_violation(const std::string& name, const std::string& arguments) {
  const nlohmann::json a = nlohmann::json::parse(arguments, nullptr, false);
  if (!a.is_object()) return "not a JSON object";
  if (name == "get_weather") {
    for (const auto& [k, v] : a.items())
      if (k != "unit" && k != "days" && k != "alerts") return "an extra key " + k;
    if (!a.contains("unit") || !a.contains("days")) return "a required key missing";
    if (a["unit"] != "celsius" && a["unit"] != "fahrenheit") return "unit out of its enum";
    if (!a["days"].is_number_integer()) return "days not an integer";
    if (a.contains("alerts") && !a["alerts"].is_boolean()) return "alerts not a boolean";
    return "";
  }
  if (name == "clock") {
    if (!a.contains("zone") || (a["zone"] != "utc" && a["zone"] != "local")) return "zone missing or out of its enum";
    return "";
  }
  return "no tool named " + name;
}

struct ToolReply {
  std::string content;
  nlohmann::json calls;
};

// One chat reply through the C API with the tools: prompt, constraint and reply parsing, sampled at
// temperature 1 with `seed` until an end token (or 300 tokens).
ToolReply tool_reply(reach_model* m, const char* choice, uint64_t seed) {
  const reach_chat_message chat[] = {{"user", "Weather in Paris for two days?"}};
  size_t n = 0;
  REQUIRE_OK(reach_chat_tokenize_tools(m, chat, 1, kCapiTools, choice, nullptr, 0, &n));
  std::vector<int32_t> ids(n);
  REQUIRE_OK(reach_chat_tokenize_tools(m, chat, 1, kCapiTools, choice, ids.data(), ids.size(), &n));
  size_t n_end = 0;
  REQUIRE_OK(reach_chat_end_tokens(m, nullptr, 0, &n_end));
  std::vector<int32_t> ends(n_end);
  REQUIRE_OK(reach_chat_end_tokens(m, ends.data(), ends.size(), &n_end));

  reach_session_params sp = reach_session_default_params();
  sp.context = 2048;
  sp.sampling.temperature = 1;
  sp.sampling.seed = seed;
  reach_session* s = nullptr;
  REQUIRE_OK(reach_session_create(m, &sp, &s));
  REQUIRE_OK(reach_session_set_tools(s, kCapiTools, choice));
  reach_reply_params rp = reach_reply_default_params();
  rp.channels = REACH_REPLY_CHANNELS_AUTO;
  reach_reply* r = nullptr;
  REQUIRE_OK(reach_reply_create(m, &rp, &r));
  REQUIRE_OK(reach_reply_set_tools(r, kCapiTools, choice));

  ToolReply out;
  reach_reply_text t{};
  t.size = sizeof t;
  REQUIRE_OK(reach_session_prefill(s, ids.data(), ids.size()));
  int32_t tok = 0;
  int eos = 0;
  REQUIRE_OK(reach_session_sample(s, &tok, &eos));
  for (int i = 0; i < 300 && !eos && std::find(ends.begin(), ends.end(), tok) == ends.end(); ++i) {
    REQUIRE_OK(reach_reply_push(r, tok, &t));
    out.content.append(t.content, t.content_len);
    REQUIRE_OK(reach_session_step(s, tok, &tok, &eos));
  }
  REQUIRE_OK(reach_reply_finish(r, &t));
  out.content.append(t.content, t.content_len);
  size_t len = 0;
  REQUIRE_OK(reach_reply_tool_calls_json(r, nullptr, 0, &len));
  std::string json(len + 1, '\0');
  REQUIRE_OK(reach_reply_tool_calls_json(r, json.data(), json.size(), &len));
  json.resize(len);
  out.calls = nlohmann::json::parse(json);
  REQUIRE_OK(reach_reply_free(r));
  REQUIRE_OK(reach_session_free(s));
  return out;
}

}  // namespace

TEST_CASE("capi: tools: a forced call parses and follows its schema; auto's calls do too; misuse is named") {
  reach_device* dev = nullptr;
  REQUIRE_OK(reach_device_create(env_params(), &dev));
  // Qwen3's template (<tool_call>) and gpt-oss's harmony (its vocabulary's format).
  for (const char* family : {"qwen3", "gpt_oss"}) {
    INFO(family);
    const std::string dir = (reach::test::source_root() / "tests/data/families" / family / "hf").string();
    reach_model* m = nullptr;
    REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &m));
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      for (const char* choice : {"required", "clock"}) {
        INFO(choice << " seed " << seed);
        const ToolReply r = tool_reply(m, choice, seed);
        CAPTURE(r.calls.dump());
        REQUIRE(r.calls.size() == 1);
        const std::string name = r.calls[0]["name"].get<std::string>();
        CHECK(name == (std::string(choice) == "clock" ? "clock" : name));
        CHECK(schema_violation(name, r.calls[0]["arguments"].get<std::string>()) == "");
      }
      // auto: the random model seldom calls; whatever it calls validates.
      const ToolReply a = tool_reply(m, "auto", seed);
      for (const auto& c : a.calls)
        CHECK(schema_violation(c["name"].get<std::string>(), c["arguments"].get<std::string>()) == "");
    }
    // "required" with one tool named: get_weather via the prompt's header / tag.
    const ToolReply w = tool_reply(m, "get_weather", 7);
    REQUIRE(w.calls.size() == 1);
    CHECK(w.calls[0]["name"] == "get_weather");
    CHECK(schema_violation("get_weather", w.calls[0]["arguments"].get<std::string>()) == "");

    // Misuse: a code and a message naming what is wrong.
    reach_session_params sp = reach_session_default_params();
    sp.context = 64;
    reach_session* s = nullptr;
    REQUIRE_OK(reach_session_create(m, &sp, &s));
    CHECK_FAILS(reach_session_set_tools(s, "{}", "auto"), REACH_ERROR_INVALID_ARGUMENT);
    CHECK_FAILS(reach_session_set_tools(s, kCapiTools, "sometimes"), REACH_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(reach_last_error()).find("tool_choice 'sometimes'") != std::string::npos);
    CHECK_FAILS(reach_session_set_tools(s, R"([{"type": "function", "function": {"name": "f", "parameters": )"
                                           R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "a"}}}}}])",
                                        "required"),
                REACH_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(reach_last_error()).find("tools_json[0].function.parameters") != std::string::npos);
    REQUIRE_OK(reach_session_set_tools(s, nullptr, nullptr));   // removed
    REQUIRE_OK(reach_session_free(s));
    reach_reply* r = nullptr;
    REQUIRE_OK(reach_reply_create(m, nullptr, &r));
    if (std::string(family) == "gpt_oss")   // harmony's calls need the reply's channels
      CHECK_FAILS(reach_reply_set_tools(r, kCapiTools, "auto"), REACH_ERROR_INVALID_ARGUMENT);
    size_t len = 0;
    CHECK_FAILS(reach_reply_tool_calls_json(r, nullptr, 0, nullptr), REACH_ERROR_INVALID_ARGUMENT);
    REQUIRE_OK(reach_reply_tool_calls_json(r, nullptr, 0, &len));
    CHECK(len == 2);   // "[]"
    char one[2];
    CHECK_FAILS(reach_reply_tool_calls_json(r, one, sizeof one, &len), REACH_ERROR_BUFFER_TOO_SMALL);
    REQUIRE_OK(reach_reply_free(r));
    REQUIRE_OK(reach_model_free(m));
  }
  // A template without tool calls (Gemma 2's fixture): UNSUPPORTED, named.
  reach_model* g = nullptr;
  REQUIRE_OK(reach_model_load(dev, (reach::test::source_root() / "tests/data/families/gemma2/hf").string().c_str(),
                              nullptr, &g));
  const reach_chat_message hi[] = {{"user", "Hi"}};
  size_t n = 0;
  CHECK_FAILS(reach_chat_tokenize_tools(g, hi, 1, kCapiTools, "auto", nullptr, 0, &n), REACH_ERROR_UNSUPPORTED);
  REQUIRE_OK(reach_chat_tokenize_tools(g, hi, 1, kCapiTools, "none", nullptr, 0, &n));   // none: no tools written
  REQUIRE_OK(reach_model_free(g));
  REQUIRE_OK(reach_device_free(dev));
}
