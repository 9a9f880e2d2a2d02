// config.json parsing: HF keys, rope_scaling / rope_parameters, reach keys,
// and one test per bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "runtime/config/model_config.hpp"
#include "runtime/config/position_schemes.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using reach::ErrorCode;
using reach::RopeType;
using reach::test::error_of;
using reach::test::TempDir;

namespace {

const fs::path kSrc = "/models/tiny/config.json";

json tiny_llama() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "max_position_embeddings": 256, "vocab_size": 100,
    "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "hidden_act": "silu"})");
}

std::string config_error(const json& j, ErrorCode code) {
  auto msg = error_of([&] { reach::parse_model_config(j, kSrc); }, code);
  CHECK_HAS(msg, kSrc.string());
  return msg;
}

reach::RopeScaling rope(const char* text) { return reach::parse_rope_scaling(json::parse(text), "test"); }

std::string rope_error(const char* text, ErrorCode code = ErrorCode::format) {
  return error_of([&] { reach::parse_rope_scaling(json::parse(text), "test rope"); }, code);
}

json with(json j, const char* key, json value) {
  j[key] = std::move(value);
  return j;
}

json without(json j, const char* key) {
  j.erase(key);
  return j;
}

}  // namespace

TEST_CASE("config: tiny llama parses") {
  auto c = reach::parse_model_config(tiny_llama(), kSrc);
  CHECK(c.architecture == "LlamaForCausalLM");
  CHECK(c.model_type == "llama");
  CHECK(c.hidden_size == 64);
  CHECK(c.intermediate_size == 128);
  CHECK(c.n_layers == 2);
  CHECK(c.n_heads == 4);
  CHECK(c.n_kv_heads == 2);
  CHECK(c.head_dim == 16);
  CHECK(c.rotary_dim == 16);
  CHECK(c.vocab_size == 100);
  CHECK(c.max_position_embeddings == 256);
  CHECK(c.rms_norm_eps == doctest::Approx(1e-5));
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.partial_rotary_factor == 1.0);
  CHECK(c.tie_word_embeddings);
  CHECK_FALSE(c.attention_bias);
  CHECK_FALSE(c.sliding_window);
  CHECK(c.bos_ids == std::vector<int32_t>{1});
  CHECK(c.eos_ids == std::vector<int32_t>{2});
  CHECK(c.torch_dtype == "bfloat16");
  CHECK(c.rope.type == RopeType::default_);
  CHECK(c.source == kSrc);
  CHECK_HAS(c.describe(), "LlamaForCausalLM");
  CHECK_HAS(c.describe(), "2 layers");
}

TEST_CASE("config: defaults for optional keys") {
  json j = tiny_llama();
  for (const char* k : {"num_key_value_heads", "rope_theta", "rms_norm_eps", "tie_word_embeddings", "bos_token_id",
                        "eos_token_id", "torch_dtype", "hidden_act"})
    j.erase(k);
  auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.n_kv_heads == 4);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rms_norm_eps == doctest::Approx(1e-6));
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.bos_ids.empty());
  CHECK(c.eos_ids.empty());
}

TEST_CASE("config: missing key") {
  auto msg = config_error(without(tiny_llama(), "hidden_size"), ErrorCode::format);
  CHECK_HAS(msg, "missing key 'hidden_size'");
  msg = config_error(without(tiny_llama(), "vocab_size"), ErrorCode::format);
  CHECK_HAS(msg, "'vocab_size'");
}

TEST_CASE("config: wrong type names the key and the value's type") {
  auto msg = config_error(with(tiny_llama(), "hidden_size", "64"), ErrorCode::format);
  CHECK_HAS(msg, "'hidden_size'");
  CHECK_HAS(msg, "string");
  msg = config_error(with(tiny_llama(), "num_hidden_layers", 2.5), ErrorCode::format);
  CHECK_HAS(msg, "'num_hidden_layers'");
  msg = config_error(with(tiny_llama(), "tie_word_embeddings", "yes"), ErrorCode::format);
  CHECK_HAS(msg, "'tie_word_embeddings'");
  msg = config_error(with(tiny_llama(), "rope_theta", json::array({1})), ErrorCode::format);
  CHECK_HAS(msg, "'rope_theta'");
  CHECK_HAS(msg, "array");
  // An integral float is accepted for an integer key.
  CHECK(reach::parse_model_config(with(tiny_llama(), "max_position_embeddings", 256.0), kSrc)
            .max_position_embeddings == 256);
}

TEST_CASE("config: unsupported architecture lists the supported ones") {
  auto msg = config_error(with(tiny_llama(), "architectures", {"GPT2LMHeadModel"}), ErrorCode::unsupported);
  CHECK_HAS(msg, "GPT2LMHeadModel");
  CHECK_HAS(msg, "LlamaForCausalLM");
  CHECK_HAS(msg, "MistralForCausalLM");
  CHECK_HAS(msg, "Qwen2ForCausalLM");
  msg = config_error(with(without(tiny_llama(), "architectures"), "model_type", "gpt2"), ErrorCode::unsupported);
  CHECK_HAS(msg, "gpt2");
  config_error(without(without(tiny_llama(), "architectures"), "model_type"), ErrorCode::format);
}

TEST_CASE("config: model_type alone selects the family; qwen2 defaults") {
  json j = with(without(tiny_llama(), "architectures"), "model_type", "qwen2");
  j["sliding_window"] = 4096;   // Qwen2 ships this with use_sliding_window=false: ignored
  auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.architecture == "Qwen2ForCausalLM");
  CHECK(c.attention_bias);
  CHECK_FALSE(c.sliding_window);
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 1;
  auto msg = config_error(j, ErrorCode::unsupported);
  CHECK_HAS(msg, "max_window_layers");
  CHECK_FALSE(reach::parse_model_config(with(tiny_llama(), "attention_bias", false), kSrc).attention_bias);
}

TEST_CASE("config: mistral sliding_window int or null") {
  json j = with(tiny_llama(), "architectures", {"MistralForCausalLM"});
  j["sliding_window"] = 4096;
  auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.model_type == "mistral");
  REQUIRE(c.sliding_window);
  CHECK(*c.sliding_window == 4096);
  j["sliding_window"] = nullptr;
  CHECK_FALSE(reach::parse_model_config(j, kSrc).sliding_window);
  j["sliding_window"] = -3;
  CHECK_HAS(config_error(j, ErrorCode::format), "sliding_window");
}

TEST_CASE("config: heads not divisible") {
  json j = tiny_llama();
  j["num_attention_heads"] = 5;
  j["num_key_value_heads"] = 5;
  auto msg = config_error(j, ErrorCode::format);
  CHECK_HAS(msg, "hidden_size 64");
  CHECK_HAS(msg, "num_attention_heads 5");
  msg = config_error(with(tiny_llama(), "num_key_value_heads", 3), ErrorCode::format);
  CHECK_HAS(msg, "num_key_value_heads 3");
}

TEST_CASE("config: non-positive sizes") {
  CHECK_HAS(config_error(with(tiny_llama(), "num_hidden_layers", 0), ErrorCode::format), "num_hidden_layers");
  CHECK_HAS(config_error(with(tiny_llama(), "intermediate_size", -1), ErrorCode::format), "intermediate_size");
  CHECK_HAS(config_error(with(tiny_llama(), "rms_norm_eps", 0), ErrorCode::format), "rms_norm_eps");
}

TEST_CASE("config: head_dim null or explicit") {
  auto c = reach::parse_model_config(with(tiny_llama(), "head_dim", nullptr), kSrc);
  CHECK(c.head_dim == 16);
  c = reach::parse_model_config(with(tiny_llama(), "head_dim", 32), kSrc);
  CHECK(c.head_dim == 32);
  json j = with(tiny_llama(), "head_dim", 24);   // hidden 64 / 5 heads is fine with explicit head_dim
  j["num_attention_heads"] = 5;
  j["num_key_value_heads"] = 1;
  CHECK(reach::parse_model_config(j, kSrc).head_dim == 24);
}

TEST_CASE("config: partial_rotary_factor") {
  auto c = reach::parse_model_config(with(tiny_llama(), "partial_rotary_factor", 0.5), kSrc);
  CHECK(c.rotary_dim == 8);
  CHECK_HAS(config_error(with(tiny_llama(), "partial_rotary_factor", 1.5), ErrorCode::format),
            "partial_rotary_factor");
}

TEST_CASE("config: eos as list, null, out of range") {
  auto c = reach::parse_model_config(with(tiny_llama(), "eos_token_id", {2, 7, 9}), kSrc);
  CHECK(c.eos_ids == std::vector<int32_t>{2, 7, 9});
  c = reach::parse_model_config(with(tiny_llama(), "eos_token_id", nullptr), kSrc);
  CHECK(c.eos_ids.empty());
  CHECK_HAS(config_error(with(tiny_llama(), "eos_token_id", 100), ErrorCode::format), "eos_token_id");
  CHECK_HAS(config_error(with(tiny_llama(), "bos_token_id", "<s>"), ErrorCode::format), "bos_token_id");
}

TEST_CASE("config: mlp_bias and hidden_act are refused clearly") {
  CHECK_HAS(config_error(with(tiny_llama(), "mlp_bias", true), ErrorCode::unsupported), "mlp_bias");
  CHECK_FALSE(reach::parse_model_config(with(tiny_llama(), "mlp_bias", false), kSrc).attention_bias);
  CHECK_HAS(config_error(with(tiny_llama(), "hidden_act", "gelu"), ErrorCode::unsupported), "gelu");
}

TEST_CASE("rope_scaling: default, null, linear, dynamic") {
  CHECK(rope("null").type == RopeType::default_);
  CHECK(rope(R"({"rope_type":"default"})").type == RopeType::default_);
  auto r = rope(R"({"rope_type":"linear","factor":4.0})");
  CHECK(r.type == RopeType::linear);
  CHECK(r.factor == 4.0);
  r = rope(R"({"type":"linear","factor":2})");   // legacy key
  CHECK(r.type == RopeType::linear);
  CHECK(r.factor == 2.0);
  r = rope(R"({"rope_type":"dynamic","factor":2.0})");
  CHECK(r.type == RopeType::dynamic);
  CHECK(r.original_max_position == 0);
  r = rope(R"({"rope_type":"dynamic","factor":3.0,"original_max_position_embeddings":4096})");
  CHECK(r.factor == 3.0);
  CHECK(r.original_max_position == 4096);
  CHECK_HAS(rope_error(R"({"rope_type":"linear"})"), "'factor'");
  CHECK_HAS(rope_error(R"({"rope_type":"linear","factor":-1})"), "factor");
  CHECK_HAS(rope_error(R"({"rope_type":"linear","type":"yarn","factor":2})"), "keep one");
}

TEST_CASE("rope_scaling: yarn with every key, and HF fallbacks") {
  auto r = rope(R"({"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768,
                    "beta_fast":16,"beta_slow":2,"attention_factor":1.2,"mscale":0.707,
                    "mscale_all_dim":1.0,"truncate":false,"some_future_key":1})");
  CHECK(r.type == RopeType::yarn);
  CHECK(r.factor == 4.0);
  CHECK(r.original_max_position == 32768);
  CHECK(r.beta_fast == 16);
  CHECK(r.beta_slow == 2);
  CHECK(r.attention_factor.value() == doctest::Approx(1.2));
  CHECK(r.mscale.value() == doctest::Approx(0.707));
  CHECK(r.mscale_all_dim.value() == 1.0);
  CHECK_FALSE(r.truncate);
  r = rope(R"({"type":"yarn","factor":2,"beta_fast":0,"beta_slow":null,"attention_factor":null})");
  CHECK(r.beta_fast == 32);
  CHECK(r.beta_slow == 1);
  CHECK_FALSE(r.attention_factor);
  CHECK(r.truncate);
}

TEST_CASE("rope_scaling: llama3 needs all keys") {
  auto r = rope(R"({"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
                    "original_max_position_embeddings":8192})");
  CHECK(r.type == RopeType::llama3);
  CHECK(r.factor == 8.0);
  CHECK(r.low_freq_factor == 1.0);
  CHECK(r.high_freq_factor == 4.0);
  CHECK(r.original_max_position == 8192);
  auto msg = rope_error(R"({"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0})");
  CHECK_HAS(msg, "original_max_position_embeddings");
  CHECK_HAS(msg, "test rope");
}

TEST_CASE("rope_scaling: reach types ntk, rerope, leaky_rerope, self_extend, none") {
  auto r = rope(R"({"rope_type":"ntk","factor":8})");
  CHECK(r.type == RopeType::ntk);
  CHECK(r.factor == 8.0);
  r = rope(R"({"rope_type":"rerope","window":512})");
  CHECK(r.type == RopeType::rerope);
  CHECK(r.window == 512);
  r = rope(R"({"rope_type":"leaky_rerope","window":256,"factor":16})");
  CHECK(r.type == RopeType::leaky_rerope);
  CHECK(r.window == 256);
  CHECK(r.leaky_k == 16.0);
  r = rope(R"({"rope_type":"self_extend","group":4,"window":1024})");
  CHECK(r.type == RopeType::self_extend);
  CHECK(r.group == 4);
  CHECK(r.window == 1024);
  CHECK(rope(R"({"rope_type":"none"})").type == RopeType::none_);
  CHECK_HAS(rope_error(R"({"rope_type":"rerope"})"), "'window'");
  CHECK_HAS(rope_error(R"({"rope_type":"rerope","window":512,"windw":1})"), "windw");
}

TEST_CASE("rope_scaling: self_extend window must be a multiple of group") {
  auto msg = rope_error(R"({"rope_type":"self_extend","group":3,"window":1024})");
  CHECK_HAS(msg, "window 1024");
  CHECK_HAS(msg, "group 3");
  CHECK_HAS(msg, "G divides W");
}

TEST_CASE("rope_scaling: unknown and unsupported types") {
  auto msg = rope_error(R"({"rope_type":"lienar","factor":2})", ErrorCode::unsupported);
  CHECK_HAS(msg, "lienar");
  CHECK_HAS(msg, "yarn");
  CHECK_HAS(msg, "self_extend");
  CHECK_HAS(rope_error(R"({"rope_type":"mrope"})", ErrorCode::unsupported), "\"mrope\" is not supported by reach yet");
  CHECK_HAS(rope_error(R"({"rope_type":"longrope","short_factor":[1]})"), "missing key 'long_factor'");
  CHECK_HAS(rope_error(R"({"rope_type":"longrope","short_factor":[1],"long_factor":[1,2]})"),
            "'short_factor' has 1 entries but 'long_factor' has 2");
  CHECK_HAS(rope_error(R"({"rope_type":"su","short_factor":[1],"long_factor":[0]})"), "expected numbers > 0");
  CHECK_HAS(rope_error(R"("linear")"), "object");
}

TEST_CASE("config: rope_scaling and v5 rope_parameters inside config.json") {
  json j = with(tiny_llama(), "rope_scaling", json::parse(R"({"type":"linear","factor":2.0})"));
  auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.rope.type == RopeType::linear);
  CHECK(c.rope_theta == 500000.0);
  j = without(tiny_llama(), "rope_theta");
  j["rope_parameters"] = json::parse(R"({"rope_type":"yarn","factor":4.0,"rope_theta":1000000.0,
                                          "original_max_position_embeddings":64,"partial_rotary_factor":0.5})");
  c = reach::parse_model_config(j, kSrc);
  CHECK(c.rope.type == RopeType::yarn);
  CHECK(c.rope_theta == 1000000.0);
  CHECK(c.rope.original_max_position == 64);
  CHECK(c.rotary_dim == 8);
  j["rope_parameters"] = json::parse(R"({"rope_type":"default","rope_theta":20000})");
  CHECK(reach::parse_model_config(j, kSrc).rope_theta == 20000.0);
  auto msg = config_error(with(tiny_llama(), "rope_scaling", json::parse(R"({"rope_type":"yarn"})")),
                          ErrorCode::format);
  CHECK_HAS(msg, "rope_scaling");
  CHECK_HAS(msg, "'factor'");
}

TEST_CASE("config: reach_attention keys") {
  json j = tiny_llama();
  j["reach_attention"] = json::parse(R"({"logn_train_len":4096,"qk_norm":"cos","cos_n":8.5,"window":128,
      "sinks":4,"alibi_max_bias":8,"layers":{"0":{"window":64,"rope":false},"1":{"logn":true}}})");
  auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.attn.logn_train_len == 4096);
  CHECK(c.attn.qk_norm == reach::QkNorm::cos);
  CHECK(c.attn.cos_n.value() == 8.5);
  CHECK(c.attn.window == 128);
  CHECK(c.attn.sinks == 4);
  CHECK(c.attn.alibi_max_bias.value() == 8.0);
  REQUIRE(c.attn.layers.size() == 2);
  CHECK(c.attn.layers.at(0).window.value() == 64);
  CHECK(c.attn.layers.at(0).rope.value() == false);
  CHECK_FALSE(c.attn.layers.at(0).logn);
  CHECK(c.attn.layers.at(1).logn.value() == true);
  CHECK_HAS(c.describe(), "logn_train_len 4096");
  j["reach_attention"] = json::parse(R"({"qk_norm":"key"})");
  CHECK(reach::parse_model_config(j, kSrc).attn.qk_norm == reach::QkNorm::key);
  j["reach_attention"] = json::parse(R"({"qk_norm":"query"})");
  CHECK(reach::parse_model_config(j, kSrc).attn.qk_norm == reach::QkNorm::query);
}

TEST_CASE("config: unknown reach_attention key is rejected") {
  json j = with(tiny_llama(), "reach_attention", json::parse(R"({"logn_train_length":4096})"));
  auto msg = config_error(j, ErrorCode::format);
  CHECK_HAS(msg, "logn_train_length");
  CHECK_HAS(msg, "reach_attention");
  CHECK_HAS(msg, "logn_train_len");   // the allowed spelling is listed
  j["reach_attention"] = json::parse(R"({"layers":{"0":{"windw":3}}})");
  CHECK_HAS(config_error(j, ErrorCode::format), "windw");
  j["reach_attention"] = json::parse(R"({"qk_norm":"l2"})");
  CHECK_HAS(config_error(j, ErrorCode::format), "qk_norm");
  j["reach_attention"] = json::parse(R"({"cos_n":4})");
  CHECK_HAS(config_error(j, ErrorCode::format), "cos_n");
}

TEST_CASE("config: reach_attention layer index out of range") {
  json j = with(tiny_llama(), "reach_attention", json::parse(R"({"layers":{"2":{"window":8}}})"));
  auto msg = config_error(j, ErrorCode::format);
  CHECK_HAS(msg, "\"2\"");
  CHECK_HAS(msg, "num_hidden_layers=2");
  j["reach_attention"] = json::parse(R"({"layers":{"first":{"window":8}}})");
  CHECK_HAS(config_error(j, ErrorCode::format), "first");
  j["reach_attention"] = json::parse(R"({"layers":{"-1":{"window":8}}})");
  config_error(j, ErrorCode::format);
}

TEST_CASE("config: load_model_config from a file or a directory") {
  TempDir dir;
  const fs::path p = dir.path / "config.json";
  std::ofstream(p) << tiny_llama().dump(2);
  auto c = reach::load_model_config(p);
  CHECK(c.hidden_size == 64);
  CHECK(c.source == p);
  c = reach::load_model_config(dir.path);
  CHECK(c.source == p);
  // The path in messages is the real file.
  std::ofstream(p) << without(tiny_llama(), "hidden_size").dump();
  auto msg = error_of([&] { reach::load_model_config(dir.path); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "hidden_size");
}

TEST_CASE("config: missing file and invalid JSON") {
  TempDir dir;
  auto msg = error_of([&] { reach::load_model_config(dir.path / "nope.json"); }, ErrorCode::io);
  CHECK_HAS(msg, "nope.json");
  const fs::path p = dir.path / "config.json";
  std::ofstream(p) << R"({"hidden_size": 64,)";
  msg = error_of([&] { reach::load_model_config(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  CHECK_HAS(msg, "JSON");
  std::ofstream(p) << std::string(100000, '[');
  msg = error_of([&] { reach::load_model_config(p); }, ErrorCode::format);
  CHECK_HAS(msg, p.string());
  std::ofstream(p) << "[1,2]";
  msg = error_of([&] { reach::load_model_config(p); }, ErrorCode::format);
  CHECK_HAS(msg, "object");
}

// ---------------------------------------------------------------------------
// The families beyond Llama: the features each config turns on (their forward is checked against
// transformers in test_families.cpp).

namespace {

json family(const char* arch, const char* model_type) {
  json j = tiny_llama();
  j["architectures"] = json::array({arch});
  j["model_type"] = model_type;
  return j;
}

}  // namespace

TEST_CASE("config: Qwen3 has per-head q/k norms and its own head_dim") {
  json j = with(family("Qwen3ForCausalLM", "qwen3"), "head_dim", 24);
  const auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.arch == reach::ModelArch::qwen3);
  CHECK(c.family() == "Qwen3");
  CHECK(c.qk_head_norm);
  CHECK(c.head_dim == 24);
  CHECK(!c.attention_bias);
}

TEST_CASE("config: Phi-3 LongRoPE, v4 ('su', top-level original context) and v5 spellings") {
  json j = family("Phi3ForCausalLM", "phi3");
  j["partial_rotary_factor"] = 0.75;   // 16 head dims -> 12 rotary -> 6 pairs
  j["original_max_position_embeddings"] = 64;
  j["rope_scaling"] = json::parse(R"({"type":"su","short_factor":[1,1,1,1,1,1],"long_factor":[1,2,3,4,5,6]})");
  auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.family() == "Phi-3");
  CHECK(c.fused_qkv);
  CHECK(c.fused_gate_up);
  CHECK(c.rotary_dim == 12);
  CHECK(c.rope.type == RopeType::longrope);
  CHECK(c.rope.original_max_position == 64);
  CHECK(c.rope.long_factor[5] == 6.0);
  json v5 = without(without(j, "rope_scaling"), "original_max_position_embeddings");
  v5["rope_parameters"] = json::parse(R"({"rope_type":"longrope","rope_theta":10000.0,"partial_rotary_factor":0.75,
      "original_max_position_embeddings":64,"short_factor":[1,1,1,1,1,1],"long_factor":[1,2,3,4,5,6]})");
  auto c5 = reach::parse_model_config(v5, kSrc);
  CHECK(c5.rope.original_max_position == 64);
  CHECK(c5.rope_theta == 10000.0);
  CHECK(c5.rotary_dim == 12);
  // The factors must cover the rotated pairs, and the trained context must be known.
  j["rope_scaling"]["short_factor"] = json::array({1, 1});
  j["rope_scaling"]["long_factor"] = json::array({1, 1});
  CHECK_HAS(config_error(j, ErrorCode::format), "they need 6");
  json no_orig = without(j, "original_max_position_embeddings");
  no_orig["rope_scaling"] = json::parse(R"({"type":"longrope","short_factor":[1,1,1,1,1,1],"long_factor":[1,1,1,1,1,1]})");
  CHECK_HAS(config_error(no_orig, ErrorCode::format), "missing key 'original_max_position_embeddings'");
}

TEST_CASE("config: Gemma 2 caps logits and alternates sliding and global layers") {
  json j = family("Gemma2ForCausalLM", "gemma2");
  j.erase("hidden_act");
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["attn_logit_softcapping"] = 50.0;
  j["final_logit_softcapping"] = 30.0;
  j["sliding_window"] = 32;
  j["query_pre_attn_scalar"] = 8;
  j["num_hidden_layers"] = 4;
  auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.family() == "Gemma 2");
  CHECK(c.attn_softcap == 50.0);
  CHECK(c.final_softcap == 30.0);
  CHECK(c.local_layers == std::vector<bool>{true, false, true, false});
  CHECK(c.local_window == 32);
  CHECK(c.rope_local_theta == c.rope_theta);
  CHECK(*c.query_scale == doctest::Approx(1.0 / std::sqrt(8.0)));
  CHECK(c.norm_weight_offset == 1);
  CHECK(c.post_norms);
  CHECK(!c.qk_head_norm);
  j["attn_logit_softcapping"] = nullptr;   // null: no cap, as transformers
  CHECK(reach::parse_model_config(j, kSrc).attn_softcap == 0);
  j["layer_types"] = json::array({"full_attention", "sliding_attention", "full_attention", "full_attention"});
  CHECK(reach::parse_model_config(j, kSrc).local_layers == std::vector<bool>{false, true, false, false});
}

TEST_CASE("config: OLMo 2 norms after attention and MLP only, q/k norm over the projection") {
  const auto c = reach::parse_model_config(family("Olmo2ForCausalLM", "olmo2"), kSrc);
  CHECK(c.family() == "OLMo 2");
  CHECK(!c.pre_norms);
  CHECK(c.post_norms);
  CHECK(c.qk_proj_norm);
  CHECK(!c.qk_head_norm);
}

TEST_CASE("config: SmolLM3's NoPE layers become per-layer rope = false") {
  json j = with(family("SmolLM3ForCausalLM", "smollm3"), "num_hidden_layers", 8);
  auto c = reach::parse_model_config(j, kSrc);   // no_rope_layer_interval 4: layers 3 and 7
  REQUIRE(c.attn.layers.size() == 2);
  CHECK(c.attn.layers.at(3).rope == false);
  CHECK(c.attn.layers.at(7).rope == false);
  j["no_rope_layers"] = json::array({1, 0, 1, 1, 1, 1, 1, 1});
  c = reach::parse_model_config(j, kSrc);
  REQUIRE(c.attn.layers.size() == 1);
  CHECK(c.attn.layers.at(1).rope == false);
  j["no_rope_layers"] = json::array({1, 2, 1, 1, 1, 1, 1, 1});
  CHECK_HAS(config_error(j, ErrorCode::format), "'no_rope_layers' entry 1 is a number (2)");
  j["no_rope_layers"] = json::array({1, 1});
  CHECK_HAS(config_error(j, ErrorCode::format), "a list of num_hidden_layers entries");
}

TEST_CASE("rope_freqs: LongRoPE divides by the short factors within the trained context, the long ones beyond") {
  json j = family("Phi3ForCausalLM", "phi3");   // 16 head dims, all rotary: 8 pairs
  j["max_position_embeddings"] = 256;
  j["rope_scaling"] = json::parse(R"({"type":"longrope","original_max_position_embeddings":64,
      "short_factor":[1,1.5,2,2.5,3,3.5,4,4.5],"long_factor":[2,3,4,5,6,7,8,9]})");
  const auto c = reach::parse_model_config(j, kSrc);
  const double base = 500000.0;   // tiny_llama's rope_theta
  for (const int64_t len : {int64_t(64), int64_t(65)}) {
    const reach::RopeFreqs f = reach::rope_freqs(c, len);
    const auto& ext = len > 64 ? c.rope.long_factor : c.rope.short_factor;
    INFO("length " << len);
    for (size_t jj = 0; jj < 8; ++jj)
      CHECK(f.inv_freq[jj] == doctest::Approx(1.0 / (ext[jj] * std::pow(base, 2.0 * double(jj) / 16.0))).epsilon(1e-13));
    // s = 256 / 64 = 4: sqrt(1 + ln 4 / ln 64) = sqrt(4/3), for both sets (transformers scales cos/sin always).
    CHECK(f.attention_factor == doctest::Approx(std::sqrt(4.0 / 3.0)).epsilon(1e-13));
  }
  j["rope_scaling"]["attention_factor"] = 1.25;
  CHECK(reach::rope_freqs(reach::parse_model_config(j, kSrc), 100).attention_factor == 1.25);
  j["max_position_embeddings"] = 64;   // s = 1: no attention factor
  j["rope_scaling"].erase("attention_factor");
  CHECK(reach::rope_freqs(reach::parse_model_config(j, kSrc), 100).attention_factor == 1.0);
}

TEST_CASE("config: Qwen3-MoE experts, dense layers from mlp_only_layers and decoder_sparse_step") {
  json j = family("Qwen3MoeForCausalLM", "qwen3_moe");
  j["num_hidden_layers"] = 4;
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 32;
  j["norm_topk_prob"] = true;
  j["decoder_sparse_step"] = 2;        // layers 1 and 3 sparse ((l + 1) % 2 == 0)
  j["mlp_only_layers"] = json::array({3});
  const auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.arch == reach::ModelArch::qwen3_moe);
  CHECK(c.family() == "Qwen3-MoE");
  CHECK(c.qk_head_norm);
  CHECK(c.n_experts == 8);
  CHECK(c.experts_per_token == 2);
  CHECK(c.expert_intermediate_size == 32);
  CHECK(c.norm_topk_prob);
  CHECK(!c.moe_layer(0));
  CHECK(c.moe_layer(1));
  CHECK(!c.moe_layer(2));
  CHECK(!c.moe_layer(3));
  CHECK_HAS(c.describe(), "experts: 8, top-2");
}

TEST_CASE("config: Mixtral always renormalises; OLMoE does not unless asked, and norms the whole q/k") {
  json m = family("MixtralForCausalLM", "mixtral");
  m["num_local_experts"] = 4;
  m["num_experts_per_tok"] = 2;
  const auto c = reach::parse_model_config(m, kSrc);
  CHECK(c.arch == reach::ModelArch::mixtral);
  CHECK(c.norm_topk_prob);
  CHECK(c.expert_intermediate_size == c.intermediate_size);
  CHECK(c.moe_layer(0));
  CHECK(c.moe_layer(1));
  json o = family("OlmoeForCausalLM", "olmoe");
  o["num_experts"] = 64;
  o["num_experts_per_tok"] = 8;
  const auto co = reach::parse_model_config(o, kSrc);
  CHECK(co.arch == reach::ModelArch::olmoe);
  CHECK(!co.norm_topk_prob);
  CHECK(co.qk_proj_norm);
  CHECK(co.experts_per_token == 8);
}

TEST_CASE("config: MoE errors name the key; shared-expert families are refused") {
  json j = family("MixtralForCausalLM", "mixtral");
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 5;
  CHECK_HAS(config_error(j, ErrorCode::format), "num_experts_per_tok 5 is more than num_local_experts 4");
  CHECK_HAS(config_error(without(j, "num_local_experts"), ErrorCode::format), "num_local_experts");
  json q = family("Qwen3MoeForCausalLM", "qwen3_moe");
  q["num_experts"] = 4;
  q["num_experts_per_tok"] = 2;
  CHECK_HAS(config_error(q, ErrorCode::format), "moe_intermediate_size");
  q["moe_intermediate_size"] = 16;
  q["mlp_only_layers"] = json::array({7});
  CHECK_HAS(config_error(q, ErrorCode::format), "mlp_only_layers");
  CHECK_HAS(config_error(family("Qwen2MoeForCausalLM", "qwen2_moe"), ErrorCode::unsupported), "shared expert");
  CHECK_HAS(config_error(family("DeepseekV3ForCausalLM", "deepseek_v3"), ErrorCode::unsupported), "DeepSeek-V3");
}

TEST_CASE("config: gpt-oss - sinks, clamped SwiGLU, alternating windows, YaRN on every layer") {
  json j = family("GptOssForCausalLM", "gpt_oss");
  j["num_hidden_layers"] = 4;
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["sliding_window"] = 16;
  j["swiglu_limit"] = 3.5;
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 150000.0}, {"factor", 32.0}, {"beta_fast", 32.0},
                          {"beta_slow", 1.0}, {"truncate", false}, {"original_max_position_embeddings", 4096}};
  const auto c = reach::parse_model_config(j, kSrc);
  CHECK(c.arch == reach::ModelArch::gpt_oss);
  CHECK(c.family() == "gpt-oss");
  CHECK(c.attention_bias);   // transformers' default for gpt-oss
  CHECK(c.attn_sinks);
  CHECK(c.activation == reach::Activation::swiglu_clamped);
  CHECK(c.swiglu_alpha == doctest::Approx(1.702));
  CHECK(c.swiglu_limit == 3.5);
  CHECK(c.norm_topk_prob);   // softmax over the chosen logits
  CHECK(c.expert_intermediate_size == c.intermediate_size);
  // transformers' default layer_types: even layers slide; the window is theirs, not a global one.
  CHECK(c.local_layers == std::vector<bool>{true, false, true, false});
  CHECK(c.local_window == 16);
  CHECK(!c.sliding_window);
  CHECK(c.rope_local_theta == 150000.0);
  CHECK(c.rope.type == reach::RopeType::yarn);
  CHECK(!c.rope.truncate);
  CHECK(c.local_rope.type == reach::RopeType::yarn);
  CHECK(c.local_rope.factor == 32.0);
  CHECK_HAS(c.describe(), "attention sink");
  CHECK_HAS(c.describe(), "clamped SwiGLU");
  // openai's MXFP4 experts are read; any other quantized checkpoint is refused, naming the method
  j["quantization_config"] = {{"quant_method", "mxfp4"}};
  CHECK_NOTHROW(reach::parse_model_config(j, kSrc));
  json g = family("LlamaForCausalLM", "llama");
  g["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  CHECK_HAS(config_error(g, ErrorCode::unsupported), "quant_method \"gptq\"");
  g["quantization_config"] = {{"quant_method", "mxfp4"}};
  CHECK_HAS(config_error(g, ErrorCode::unsupported), "mxfp4");
  // layer_types, when given, decides
  j["layer_types"] = json::array({"full_attention", "sliding_attention", "full_attention", "full_attention"});
  CHECK(reach::parse_model_config(j, kSrc).local_layers == std::vector<bool>{false, true, false, false});
}
