// Position schemes on the host: inv_freq / attention factors (EXTRAPOLATION.md
// §9 T1-T7, T9, T11), the cos/sin table, CLI overrides and per-layer
// AttentionSpecs.  No GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "runtime/config/flag_values.hpp"
#include "runtime/config/model_config.hpp"
#include "runtime/config/position_schemes.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/position_formulas.hpp"

using nlohmann::json;
using reach::ErrorCode;
using reach::RopeType;
using reach::test::error_of;

namespace {

// The §9 literals carry 6 significant digits (rounding up to 2.6e-6 relative for
// 0.19xxxx); formula-derived expectations use 1e-12.
void check_rel(double got, double want, double rel = 3e-6) {
  CHECK_MESSAGE(std::fabs(got - want) <= rel * std::fabs(want), "got " << got << " want " << want);
}

void check_vec(const std::vector<double>& got, const std::vector<double>& want, double rel = 3e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t j = 0; j < got.size(); ++j) {
    INFO("pair " << j);
    check_rel(got[j], want[j], rel);
  }
}

reach::RopeScaling rope(const char* text) { return reach::parse_rope_scaling(json::parse(text), "test"); }

reach::RopeFreqs freqs(const char* rope_json, int64_t d, double base, int64_t max_pos = 2048, int64_t seq_len = 0) {
  return reach::rope_freqs(rope(rope_json), d, base, max_pos, seq_len);
}

// head_dim 16, 4 layers, rope_theta 1e4, trained context 256.
json tiny(json extra = json::object()) {
  json j = json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rope_theta": 10000.0, "max_position_embeddings": 256, "vocab_size": 100})");
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

reach::ModelConfig cfg_of(json extra = json::object()) { return reach::parse_model_config(tiny(extra), "/m/config.json"); }

reach::SchemeOverrides flags(std::vector<std::string> args) {
  reach::SchemeOverrides o;
  for (size_t i = 0; i < args.size(); ++i) {
    const size_t before = i;
    REQUIRE_MESSAGE(reach::parse_scheme_flag(args, i, o), "not a scheme flag: " << args[before]);
  }
  return o;
}

std::string flag_error(std::vector<std::string> args) {
  return error_of(
      [&] {
        reach::SchemeOverrides o;
        for (size_t i = 0; i < args.size(); ++i) reach::parse_scheme_flag(args, i, o);
      },
      ErrorCode::invalid_argument);
}

}  // namespace

// ---------------------------------------------------------------------------
// Frequencies (§9)

TEST_CASE("T1 default and linear inv_freq, d=8") {
  auto f = freqs(R"({"rope_type":"default"})", 8, 1e4);
  check_vec(f.inv_freq, {1, 0.1, 0.01, 0.001});
  CHECK(f.attention_factor == 1.0);
  f = freqs(R"({"rope_type":"linear","factor":4})", 8, 1e4);
  check_vec(f.inv_freq, {0.25, 0.025, 0.0025, 0.00025});
  CHECK(f.attention_factor == 1.0);
  // "none" and the position-remapping schemes use the default table (tools/refmodel/rope.py).
  for (const char* t : {R"({"rope_type":"none"})", R"({"rope_type":"rerope","window":4})",
                        R"({"rope_type":"leaky_rerope","window":4,"factor":2})",
                        R"({"rope_type":"self_extend","window":4,"group":2})"}) {
    INFO(t);
    check_vec(freqs(t, 8, 1e4).inv_freq, {1, 0.1, 0.01, 0.001});
  }
}

TEST_CASE("T2 static NTK alpha=4, d=8") {
  auto f = freqs(R"({"rope_type":"ntk","factor":4})", 8, 1e4);
  check_vec(f.inv_freq, {1, 0.0629961, 0.00396850, 0.00025});
  CHECK(f.attention_factor == 1.0);
  // The lowest frequency is divided by exactly alpha.
  check_rel(f.inv_freq[3], 0.001 / 4, 1e-12);
}

TEST_CASE("T3 dynamic NTK (HF), d=8, s=2, Lorig=2048") {
  const char* j = R"({"rope_type":"dynamic","factor":2})";
  check_vec(freqs(j, 8, 1e4, 2048, 2048).inv_freq, {1, 0.1, 0.01, 0.001}, 1e-12);
  check_vec(freqs(j, 8, 1e4, 2048, 1000).inv_freq, {1, 0.1, 0.01, 0.001}, 1e-12);   // below Lorig: default
  check_vec(freqs(j, 8, 1e4, 2048, 0).inv_freq, {1, 0.1, 0.01, 0.001}, 1e-12);      // no length: default
  auto f = freqs(j, 8, 1e4, 2048, 4096);
  check_vec(f.inv_freq, {1, 0.0693361, 0.00480750, 0.000333333});
  check_rel(f.inv_freq[3], 0.001 / 3, 1e-12);
  CHECK(f.attention_factor == 1.0);
  // original_max_position_embeddings, when given, is the Lorig (refmodel rule).
  f = freqs(R"({"rope_type":"dynamic","factor":2,"original_max_position_embeddings":1024})", 8, 1e4, 4096, 2048);
  check_rel(f.inv_freq[3], 0.001 / 3, 1e-12);
}

TEST_CASE("T4 YaRN d=8, s=4, Lo=2048") {
  for (const char* j : {R"({"rope_type":"yarn","factor":4,"original_max_position_embeddings":2048})",
                        R"({"rope_type":"yarn","factor":4,"original_max_position_embeddings":4096})"}) {
    INFO(j);
    auto f = freqs(j, 8, 1e4, 8192);
    check_vec(f.inv_freq, {1, 0.1, 0.00625, 0.00025});
    check_rel(f.attention_factor, 1.1386294, 1e-7);
  }
  // Lo falls back to max_position_embeddings.
  auto f = freqs(R"({"rope_type":"yarn","factor":4})", 8, 1e4, 2048);
  check_vec(f.inv_freq, {1, 0.1, 0.00625, 0.00025});
  // cos/sin x af at p = 1000.
  std::vector<float> t(1001 * 4 * 2);
  reach::fill_rope_table(f, 1001, 4, t.data());
  const double want_cos[] = {0.640341, 0.981862, 1.138003, 1.103232};
  const double want_sin[] = {0.941509, -0.576563, -0.037779, 0.281701};
  for (int j = 0; j < 4; ++j) {
    INFO("pair " << j);
    CHECK(std::fabs(t[(1000 * 4 + j) * 2] - want_cos[j]) < 2e-6);
    CHECK(std::fabs(t[(1000 * 4 + j) * 2 + 1] - want_sin[j]) < 2e-6);
  }
  // truncate = false: fractional boundaries 1.00800 / 2.51315.
  f = freqs(R"({"rope_type":"yarn","factor":4,"original_max_position_embeddings":2048,"truncate":false})", 8, 1e4);
  check_rel(f.inv_freq[2], 0.00505697, 2e-6);
  check_rel(f.inv_freq[0], 1.0, 1e-12);
  check_rel(f.inv_freq[3], 0.00025, 1e-12);
  const double low = 8 * std::log(2048 / (32 * 2 * std::numbers::pi)) / (2 * std::log(1e4));
  const double high = 8 * std::log(2048 / (1 * 2 * std::numbers::pi)) / (2 * std::log(1e4));
  const double ext1 = 1 - std::clamp((1 - low) / (high - low), 0.0, 1.0);
  check_rel(f.inv_freq[1], 0.1 / 4 * (1 - ext1) + 0.1 * ext1, 1e-12);
}

TEST_CASE("T5 YaRN d=128 spot values") {
  auto f = freqs(R"({"rope_type":"yarn","factor":4,"original_max_position_embeddings":4096})", 128, 1e4);
  REQUIRE(f.inv_freq.size() == 64);
  auto theta = [](int j, double base) { return std::pow(base, -2.0 * j / 128.0); };
  for (int j = 0; j <= 20; ++j) check_rel(f.inv_freq[j], theta(j, 1e4), 1e-12);
  check_rel(f.inv_freq[20], 0.0562341);
  check_rel(f.inv_freq[21], 0.0472920);
  check_rel(f.inv_freq[33], 0.00541228);
  check_rel(f.inv_freq[45], 4.29403e-4);
  for (int j = 46; j < 64; ++j) check_rel(f.inv_freq[j], theta(j, 1e4) / 4, 1e-12);
  check_rel(f.inv_freq[63], 2.88695e-5);
  // Qwen-like: base 1e6, Lo 32768 -> low 23, high 40.
  f = freqs(R"({"rope_type":"yarn","factor":4,"original_max_position_embeddings":32768})", 128, 1e6);
  check_rel(f.inv_freq[23], theta(23, 1e6), 1e-12);
  CHECK(f.inv_freq[24] < theta(24, 1e6) * (1 - 1e-6));
  check_rel(f.inv_freq[24], theta(24, 1e6) * (1.0 - 0.75 / 17), 1e-12);   // ramp 1/17 -> ext 16/17
  check_rel(f.inv_freq[40], theta(40, 1e6) / 4, 1e-12);
  CHECK(f.inv_freq[39] > theta(39, 1e6) / 4 * (1 + 1e-6));
}

TEST_CASE("T6 YaRN attention factor") {
  const std::pair<double, double> table[] = {{2, 1.069315}, {4, 1.138629}, {8, 1.207944}, {16, 1.277259},
                                             {32, 1.346574}, {40, 1.368888}, {64, 1.415888}};
  for (auto [s, af] : table) {
    INFO("s = " << s);
    reach::RopeScaling r = rope(R"({"rope_type":"yarn","factor":2})");
    r.factor = s;
    auto f = reach::rope_freqs(r, 8, 1e4, 4096, 0);
    check_rel(f.attention_factor, af, 1e-6);
    check_rel(f.attention_factor * f.attention_factor, (0.1 * std::log(s) + 1) * (0.1 * std::log(s) + 1), 1e-12);
  }
  const double af2 = freqs(R"({"rope_type":"yarn","factor":2})", 8, 1e4, 4096).attention_factor;
  check_rel(af2 * af2, 1.143434, 1e-6);   // logit factor
  // DeepSeek-style mscale == mscale_all_dim -> exactly 1.
  CHECK(freqs(R"({"rope_type":"yarn","factor":40,"mscale":1,"mscale_all_dim":1})", 8, 1e4).attention_factor == 1.0);
  CHECK(freqs(R"({"rope_type":"yarn","factor":40,"mscale":0.707,"mscale_all_dim":0.707})", 8, 1e4).attention_factor ==
        1.0);
  // Ratio otherwise; 0 counts as unset (HF truthiness).
  check_rel(freqs(R"({"rope_type":"yarn","factor":40,"mscale":1,"mscale_all_dim":0.707})", 8, 1e4).attention_factor,
            (0.1 * std::log(40.0) + 1) / (0.0707 * std::log(40.0) + 1), 1e-12);
  check_rel(freqs(R"({"rope_type":"yarn","factor":40,"mscale":1,"mscale_all_dim":0})", 8, 1e4).attention_factor,
            1.368888, 1e-6);
  // Explicit attention_factor wins over everything.
  CHECK(freqs(R"({"rope_type":"yarn","factor":40,"attention_factor":0.5,"mscale":1,"mscale_all_dim":0.707})", 8, 1e4)
            .attention_factor == 0.5);
  // s <= 1: factor 1.
  CHECK(freqs(R"({"rope_type":"yarn","factor":1})", 8, 1e4).attention_factor == 1.0);
}

TEST_CASE("T7 llama3, d=8 and d=16") {
  const char* j =
      R"({"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":8192})";
  auto f = freqs(j, 8, 5e5);
  check_vec(f.inv_freq, {1, 0.0376060, 5.24846e-4, 6.64787e-6});
  CHECK(f.attention_factor == 1.0);
  // sm = 0.281283 for pair 2
  const double th2 = std::pow(5e5, -0.5), lam2 = 2 * std::numbers::pi / th2, sm = (8192 / lam2 - 1) / 3;
  check_rel(sm, 0.281283, 2e-6);
  check_rel(f.inv_freq[2], (1 - sm) * th2 / 8 + sm * th2, 1e-12);
  f = freqs(j, 16, 5e5);
  check_vec(f.inv_freq, {1, 0.193923, 0.0376060, 0.00729266, 5.24846e-4, 3.42810e-5, 6.64787e-6, 1.28917e-6});
  // Exact: pairs 0-2 have lambda < 8192/4 (kept), pair 4 is the medium one, 5-7 are divided by 8.
  for (int j : {0, 1, 2, 3}) check_rel(f.inv_freq[j], std::pow(5e5, -j / 8.0), 1e-12);
  for (int j : {5, 6, 7}) check_rel(f.inv_freq[j], std::pow(5e5, -j / 8.0) / 8, 1e-12);
}

TEST_CASE("T9 logn factor (the references') and T11 ALiBi slopes (the kernels' push parameters)") {
  using reach::test::logn_factor;
  CHECK(logn_factor(0, 4096) == 1.0);
  CHECK(logn_factor(4095, 4096) == 1.0);
  check_rel(logn_factor(8191, 4096), 1.0833333, 1e-6);
  check_rel(logn_factor(16383, 4096), 1.1666667, 1e-6);
  CHECK(logn_factor(100000, 0) == 1.0);
  auto a = reach::alibi_params(8, 8.0f);
  CHECK(a.n_head_log2 == 8);
  for (uint32_t h = 0; h < 8; ++h) CHECK(a.slope(h) == doctest::Approx(std::pow(0.5, h + 1)).epsilon(1e-6));
  // Non power of two: 12 heads -> 8 slopes of the 8-set, then every other slope of the 16-set.
  a = reach::alibi_params(12, 8.0f);
  CHECK(a.n_head_log2 == 8);
  for (uint32_t h = 0; h < 4; ++h)
    CHECK(a.slope(8 + h) == doctest::Approx(std::pow(2.0, -0.5 * (2 * h + 1))).epsilon(1e-6));
}

TEST_CASE("fill_rope_table: long positions vs long double, partial pairs, layout") {
  auto f = freqs(R"({"rope_type":"yarn","factor":4,"original_max_position_embeddings":4096})", 128, 1e4);
  const uint32_t P = 100001, pairs = 64;
  std::vector<float> t(static_cast<size_t>(P) * pairs * 2);
  reach::fill_rope_table(f, P, pairs, t.data());
  double worst = 0;
  for (uint32_t p : {0u, 1u, 4095u, 65535u, 99999u, 100000u}) {
    for (uint32_t j = 0; j < pairs; ++j) {
      const long double a = static_cast<long double>(p) * static_cast<long double>(f.inv_freq[j]);
      const long double af = f.attention_factor;
      const size_t k = (static_cast<size_t>(p) * pairs + j) * 2;
      worst = std::max(worst, static_cast<double>(std::fabs(t[k] - std::cos(a) * af)));
      worst = std::max(worst, static_cast<double>(std::fabs(t[k + 1] - std::sin(a) * af)));
    }
  }
  CHECK(worst <= 1e-6);
  // Fewer pairs than the table has: the first `pairs` only, rows packed.
  std::vector<float> small(3 * 2 * 2);
  reach::fill_rope_table(f, 3, 2, small.data());
  CHECK(small[(2 * 2 + 1) * 2] == t[(2 * 64 + 1) * 2]);
  CHECK(small[(2 * 2 + 1) * 2 + 1] == t[(2 * 64 + 1) * 2 + 1]);
  CHECK(reach::rope_table(f, 2).size() == 2 * 64 * 2);
  // More pairs than frequencies (kernel_rotary_dim's padding): the extra pairs are the identity (1, 0), without
  // the attention factor, and the real ones are unchanged.
  std::vector<float> wide(2 * 68 * 2, -7.0f);
  reach::fill_rope_table(f, 2, 68, wide.data());
  for (uint32_t j = 64; j < 68; ++j) {
    CHECK(wide[(68 + j) * 2] == 1.0f);
    CHECK(wide[(68 + j) * 2 + 1] == 0.0f);
  }
  CHECK(wide[(68 + 63) * 2] == t[(64 + 63) * 2]);
  CHECK(wide[(68 + 63) * 2 + 1] == t[(64 + 63) * 2 + 1]);
  CHECK(f.attention_factor != 1.0);   // yarn's: the identity pairs must not carry it
  CHECK(reach::kernel_rotary_dim(12) == 16);
  CHECK(reach::kernel_rotary_dim(96) == 96);
  CHECK(reach::kernel_rotary_dim(6) == 8);
}

// ---------------------------------------------------------------------------
// Flags and overrides

TEST_CASE("parse_scheme_flag: every flag, both spellings") {
  auto o = flags({"--rope-scaling", "yarn", "--rope-factor", "4", "--original-ctx=4096", "--rerope-window", "512",
                  "--leaky-k", "16", "--self-extend-group", "4", "--self-extend-window", "1024", "--logn", "4096",
                  "--qk-norm", "cos", "--cos-n=256", "--attn-window", "128", "--attn-sinks", "4"});
  CHECK(*o.rope_scaling == "yarn");
  CHECK(*o.rope_factor == 4.0);
  CHECK(*o.original_ctx == 4096);
  CHECK(*o.rerope_window == 512);
  CHECK(*o.leaky_k == 16.0);
  CHECK(*o.se_group == 4);
  CHECK(*o.se_window == 1024);
  CHECK(*o.logn == 4096);
  CHECK(*o.qk_norm == "cos");
  CHECK(*o.cos_n == 256.0);
  CHECK(*o.attn_window == 128);
  CHECK(*o.attn_sinks == 4);
  CHECK(!o.empty());
  CHECK(reach::SchemeOverrides{}.empty());
  CHECK_HAS(o.describe(), "--rope-scaling yarn");
  CHECK_HAS(o.describe(), "--attn-sinks 4");
  CHECK(*flags({"--rope-scaling", "leaky-rerope"}).rope_scaling == "leaky_rerope");

  // The caller's loop: i is left on the value, other options are not consumed.
  std::vector<std::string> args = {"-m", "dir", "--rope-factor", "2", "-n", "5"};
  reach::SchemeOverrides so;
  size_t i = 0;
  CHECK_FALSE(reach::parse_scheme_flag(args, i, so));
  CHECK(i == 0);
  i = 2;
  CHECK(reach::parse_scheme_flag(args, i, so));
  CHECK(i == 3);
  CHECK(*so.rope_factor == 2.0);
  i = 4;
  CHECK_FALSE(reach::parse_scheme_flag(args, i, so));

  const auto help = reach::scheme_flags_help();
  for (const char* f : {"--rope-scaling", "--rope-factor", "--original-ctx", "--rerope-window", "--leaky-k",
                        "--self-extend-group", "--self-extend-window", "--logn", "--qk-norm", "--cos-n",
                        "--attn-window", "--attn-sinks"})
    CHECK_HAS(help, f);
}

TEST_CASE("parse_scheme_flag: bad values name the flag") {
  CHECK_HAS(flag_error({"--rope-scaling", "lienar"}), "--rope-scaling");
  CHECK_HAS(flag_error({"--rope-factor", "0"}), "--rope-factor");
  CHECK_HAS(flag_error({"--rope-factor", "abc"}), "--rope-factor");
  CHECK_HAS(flag_error({"--rope-factor", "nan"}), "--rope-factor");
  CHECK_HAS(flag_error({"--original-ctx", "-1"}), "--original-ctx");
  CHECK_HAS(flag_error({"--original-ctx", "4096.5"}), "--original-ctx");
  CHECK_HAS(flag_error({"--rerope-window", "0"}), "--rerope-window");
  CHECK_HAS(flag_error({"--leaky-k", "-2"}), "--leaky-k");
  CHECK_HAS(flag_error({"--self-extend-group", "x"}), "--self-extend-group");
  CHECK_HAS(flag_error({"--self-extend-window", "99999999999"}), "--self-extend-window");
  CHECK_HAS(flag_error({"--logn", "1"}), "--logn");
  CHECK_HAS(flag_error({"--logn", "-5"}), "--logn");
  CHECK_HAS(flag_error({"--qk-norm", "l2"}), "--qk-norm");
  CHECK_HAS(flag_error({"--cos-n", "0"}), "--cos-n");
  CHECK_HAS(flag_error({"--attn-window", "-1"}), "--attn-window");
  CHECK_HAS(flag_error({"--attn-sinks", "1e3"}), "--attn-sinks");
  CHECK_HAS(flag_error({"--rope-factor"}), "--rope-factor");   // missing value
  CHECK_HAS(flag_error({"--attn-window="}), "--attn-window");
}

TEST_CASE("apply_overrides: rope flags") {
  auto c = cfg_of();
  reach::apply_overrides(c, flags({"--rope-scaling", "yarn", "--rope-factor", "4", "--original-ctx", "64"}));
  CHECK(c.rope.type == RopeType::yarn);
  CHECK(c.rope.factor == 4.0);
  CHECK(c.rope.original_max_position == 64);

  // Without --rope-scaling: overlay on the config's scheme (keeps beta_fast).
  c = cfg_of({{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 2}, {"beta_fast", 16}}}});
  reach::apply_overrides(c, flags({"--rope-factor", "8"}));
  CHECK(c.rope.type == RopeType::yarn);
  CHECK(c.rope.factor == 8.0);
  CHECK(c.rope.beta_fast == 16.0);
  // An explicit --rope-scaling starts afresh (as tools/reference_forward.py).
  reach::apply_overrides(c, flags({"--rope-scaling", "yarn", "--rope-factor", "8"}));
  CHECK(c.rope.beta_fast == 32.0);

  c = cfg_of();
  reach::apply_overrides(c, flags({"--rope-scaling", "linear", "--rope-factor", "2"}));
  CHECK(c.rope.type == RopeType::linear);
  reach::apply_overrides(c, flags({"--rope-scaling", "dynamic", "--rope-factor", "2"}));
  CHECK(c.rope.type == RopeType::dynamic);
  reach::apply_overrides(c, flags({"--rope-scaling", "ntk", "--rope-factor", "3"}));
  CHECK(c.rope.type == RopeType::ntk);
  CHECK(c.rope.factor == 3.0);
  reach::apply_overrides(c, flags({"--rope-scaling", "default"}));
  CHECK(c.rope.type == RopeType::default_);

  // llama3 keeps low/high and the original context (else max_position_embeddings).
  c = cfg_of();
  reach::apply_overrides(c, flags({"--rope-scaling", "llama3", "--rope-factor", "8"}));
  CHECK(c.rope.type == RopeType::llama3);
  CHECK(c.rope.low_freq_factor == 1.0);
  CHECK(c.rope.high_freq_factor == 4.0);
  CHECK(c.rope.original_max_position == 256);

  // Implied schemes.
  c = cfg_of();
  reach::apply_overrides(c, flags({"--rerope-window", "32"}));
  CHECK(c.rope.type == RopeType::rerope);
  CHECK(c.rope.window == 32);
  reach::apply_overrides(c, flags({"--leaky-k", "4"}));   // rerope + k -> leaky, window carried over
  CHECK(c.rope.type == RopeType::leaky_rerope);
  CHECK(c.rope.window == 32);
  CHECK(c.rope.leaky_k == 4.0);
  c = cfg_of();
  reach::apply_overrides(c, flags({"--rerope-window", "32", "--leaky-k", "4"}));
  CHECK(c.rope.type == RopeType::leaky_rerope);
  CHECK(c.rope.window == 32);
  CHECK(c.rope.leaky_k == 4.0);
  reach::apply_overrides(c, flags({"--rerope-window", "16"}));   // stays leaky, k kept
  CHECK(c.rope.type == RopeType::leaky_rerope);
  CHECK(c.rope.window == 16);
  CHECK(c.rope.leaky_k == 4.0);
  c = cfg_of();
  reach::apply_overrides(c, flags({"--self-extend-group", "4", "--self-extend-window", "64"}));
  CHECK(c.rope.type == RopeType::self_extend);
  CHECK(c.rope.group == 4);
  CHECK(c.rope.window == 64);
  reach::apply_overrides(c, flags({"--self-extend-window", "128"}));   // overlay keeps the group
  CHECK(c.rope.group == 4);
  CHECK(c.rope.window == 128);
}

TEST_CASE("apply_overrides: rope flags rejected with the flag named") {
  auto err = [](std::vector<std::string> a, json extra = json::object(), ErrorCode code = ErrorCode::invalid_argument) {
    auto c = cfg_of(extra);
    return error_of([&] { reach::apply_overrides(c, flags(a)); }, code);
  };
  CHECK_HAS(err({"--rope-scaling", "yarn"}), "'factor'");
  CHECK_HAS(err({"--rope-scaling", "yarn"}), "--rope-factor");
  CHECK_HAS(err({"--rope-scaling", "rerope", "--rope-factor", "2", "--rerope-window", "8"}), "--rope-factor");
  CHECK_HAS(err({"--rope-scaling", "leaky_rerope", "--rope-factor", "2", "--rerope-window", "8"}), "--leaky-k");
  CHECK_HAS(err({"--rope-scaling", "linear", "--rope-factor", "2", "--original-ctx", "64"}), "--original-ctx");
  CHECK_HAS(err({"--rope-scaling", "yarn", "--rope-factor", "2", "--leaky-k", "2"}), "--leaky-k");
  CHECK_HAS(err({"--rope-scaling", "yarn", "--rope-factor", "2", "--self-extend-group", "2"}), "--self-extend-group");
  CHECK_HAS(err({"--rope-scaling", "rerope"}), "--rerope-window");   // missing window
  CHECK_HAS(err({"--self-extend-group", "3", "--self-extend-window", "64"}), "group 3");
  CHECK_HAS(err({"--self-extend-window", "64"}), "'group'");
  CHECK_HAS(err({"--rerope-window", "8", "--self-extend-group", "2"}), "--self-extend-group");
  CHECK_HAS(err({"--rope-factor", "2"}), "--rope-factor");   // default has no factor
  CHECK_HAS(err({"--rope-scaling", "none", "--original-ctx", "64"}), "--original-ctx");
}

TEST_CASE("apply_overrides: reach_attention flags") {
  auto c = cfg_of({{"reach_attention", {{"layers", {{"3", {{"rope", false}}}}}}}});
  reach::apply_overrides(c, flags({"--logn", "256", "--qk-norm", "cos", "--cos-n", "128", "--attn-window", "64",
                                   "--attn-sinks", "4"}));
  CHECK(c.attn.logn_train_len == 256);
  CHECK(c.attn.qk_norm == reach::QkNorm::cos);
  CHECK(*c.attn.cos_n == 128.0);
  CHECK(c.attn.window == 64);
  CHECK(c.attn.sinks == 4);
  REQUIRE(c.attn.layers.count(3) == 1);   // per-layer entries survive the round trip
  CHECK(c.attn.layers[3].rope == false);
  // Switching away from cos drops cos_n instead of failing.
  reach::apply_overrides(c, flags({"--qk-norm", "key"}));
  CHECK(c.attn.qk_norm == reach::QkNorm::key);
  CHECK_FALSE(c.attn.cos_n.has_value());
  reach::apply_overrides(c, flags({"--logn", "0", "--attn-window", "0", "--attn-sinks", "0"}));
  CHECK(c.attn.logn_train_len == 0);
  CHECK(c.attn.window == 0);
  c = cfg_of();
  auto msg = error_of([&] { reach::apply_overrides(c, flags({"--cos-n", "64"})); }, ErrorCode::invalid_argument);
  CHECK_HAS(msg, "--cos-n");
  CHECK_HAS(msg, "cos_n");
}

// ---------------------------------------------------------------------------
// resolve_schemes

TEST_CASE("resolve_schemes: plain RoPE and the table schemes") {
  auto c = cfg_of();
  auto r = reach::resolve_schemes(c, 100, 0);
  REQUIRE(r.layers.size() == 4);
  for (const auto& s : r.layers) {
    CHECK(s.n_heads == 4);
    CHECK(s.n_kv_heads == 2);
    CHECK(s.head_dim == 16);
    CHECK(s.rotary_dim == 16);
    CHECK(s.rope);
    CHECK(s.cache == reach::KeyCacheMode::rotated);
    CHECK(s.scale == doctest::Approx(0.25));
    CHECK_FALSE(s.dual());
    CHECK(s.window == 0);
    CHECK(s.sinks == 0);
    CHECK(s.logn_train_len == 0);
    CHECK(s.norm == reach::QkNorm::none);
    CHECK(s.alibi_max_bias == 0);
  }
  CHECK(r.table1.inv_freq.size() == 8);
  CHECK(r.table1_positions == 100);
  CHECK_FALSE(r.table2.has_value());
  CHECK(r.table2_positions == 0);
  CHECK_HAS(r.describe(), "default");

  // dynamic: L_test feeds the table; cache stays rotated (fixed per request).
  c = cfg_of({{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2}}}});
  r = reach::resolve_schemes(c, 1024, 512);
  check_rel(r.table1.inv_freq.back(), std::pow(1e4, -14.0 / 16) / 3, 1e-12);
  CHECK(r.layers[0].cache == reach::KeyCacheMode::rotated);
  CHECK_HAS(r.describe(), "L_test 512");
  r = reach::resolve_schemes(c, 512, 0);   // l_test <= 0: the context
  check_rel(r.table1.inv_freq.back(), std::pow(1e4, -14.0 / 16) / 3, 1e-12);

  c = cfg_of({{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}}}});
  r = reach::resolve_schemes(c, 1024, 0);
  check_rel(r.table1.attention_factor, 1.1386294, 1e-7);
  CHECK(r.layers[0].scale == doctest::Approx(0.25));   // af lives in the table, not the scale
  CHECK_HAS(r.describe(), "yarn");

  // partial rotary.
  c = cfg_of({{"partial_rotary_factor", 0.5}});
  r = reach::resolve_schemes(c, 8, 0);
  CHECK(r.layers[0].rotary_dim == 8);
  CHECK(r.table1.inv_freq.size() == 4);
}

TEST_CASE("resolve_schemes: ReRoPE") {
  auto c = cfg_of({{"rope_scaling", {{"rope_type", "rerope"}, {"window", 32}}},
                   {"reach_attention", {{"logn_train_len", 256}}}});
  auto r = reach::resolve_schemes(c, 1000, 0);
  for (const auto& s : r.layers) {
    CHECK(s.rope);
    CHECK(s.dual());
    CHECK(s.branch_window == 32);
    CHECK(s.q2_mode == reach::Q2Pos::constant);
    CHECK(s.q2_const == 32);
    CHECK(s.k2_mode == reach::K2Pos::unrotated);
    CHECK_FALSE(s.branch2_table2);
    CHECK(s.cache == reach::KeyCacheMode::raw);
    CHECK(s.logn_train_len == 256.0f);
  }
  CHECK(r.table1_positions == 1000);
  CHECK_FALSE(r.table2.has_value());
  CHECK_HAS(r.describe(), "rerope");
  CHECK_HAS(r.describe(), "window 32");
  // The constant query position must be in the table even for a short context.
  CHECK(reach::resolve_schemes(c, 10, 0).table1_positions == 33);
}

TEST_CASE("resolve_schemes: Leaky ReRoPE") {
  auto c = cfg_of({{"rope_scaling", {{"rope_type", "leaky_rerope"}, {"window", 32}, {"factor", 16}}}});
  auto r = reach::resolve_schemes(c, 1000, 0);
  for (const auto& s : r.layers) {
    CHECK(s.branch_window == 32);
    CHECK(s.q2_mode == reach::Q2Pos::shifted);
    CHECK(s.q2_const == 32 * 15);
    CHECK(s.k2_mode == reach::K2Pos::same);
    CHECK(s.branch2_table2);
    CHECK(s.cache == reach::KeyCacheMode::raw);
  }
  REQUIRE(r.table2.has_value());
  CHECK(r.table2->attention_factor == 1.0);
  for (size_t j = 0; j < 8; ++j) check_rel(r.table2->inv_freq[j], r.table1.inv_freq[j] / 16, 1e-15);
  CHECK(r.table1_positions == 1000);
  CHECK(r.table2_positions == 1000 + 480);   // query rows up to (n-1) + w(k-1)
  CHECK_HAS(r.describe(), "leaky_rerope");
  CHECK_HAS(r.describe(), "table 2");
  // w(k-1) must be a whole number of positions.
  c = cfg_of({{"rope_scaling", {{"rope_type", "leaky_rerope"}, {"window", 3}, {"factor", 1.5}}}});
  CHECK_HAS(error_of([&] { reach::resolve_schemes(c, 100, 0); }, ErrorCode::unsupported), "whole");
  c = cfg_of({{"rope_scaling", {{"rope_type", "leaky_rerope"}, {"window", 4}, {"factor", 1.5}}}});
  CHECK(reach::resolve_schemes(c, 100, 0).layers[0].q2_const == 2);
}

TEST_CASE("resolve_schemes: Self-Extend") {
  auto c = cfg_of({{"rope_scaling", {{"rope_type", "self_extend"}, {"group", 4}, {"window", 64}}}});
  auto r = reach::resolve_schemes(c, 1000, 0);
  for (const auto& s : r.layers) {
    CHECK(s.branch_window == 64);
    CHECK(s.q2_mode == reach::Q2Pos::grouped);
    CHECK(s.q2_const == 64 - 16);
    CHECK(s.k2_mode == reach::K2Pos::grouped);
    CHECK(s.group == 4);
    CHECK_FALSE(s.branch2_table2);
    CHECK(s.cache == reach::KeyCacheMode::raw);
  }
  CHECK(r.table1_positions == 1000);
  CHECK_FALSE(r.table2.has_value());
  // Short context: grouped query positions reach floor((n-1)/G) + W - W/G.
  CHECK(reach::resolve_schemes(c, 40, 0).table1_positions == 9 + 48 + 1);
  CHECK_HAS(r.describe(), "self_extend");
  CHECK_HAS(r.describe(), "group 4");
}

TEST_CASE("resolve_schemes: KeyNorm / CosA / logn / window / sinks / Mistral / ALiBi") {
  auto c = cfg_of({{"reach_attention", {{"qk_norm", "key"}}}});
  auto r = reach::resolve_schemes(c, 64, 0);
  CHECK(r.layers[0].norm == reach::QkNorm::key);
  CHECK(r.layers[0].scale == 1.0f);
  c = cfg_of({{"reach_attention", {{"qk_norm", "query"}}}});
  CHECK(reach::resolve_schemes(c, 64, 0).layers[1].norm == reach::QkNorm::query);
  c = cfg_of({{"reach_attention", {{"qk_norm", "cos"}, {"cos_n", 128}, {"logn_train_len", 64}}}});
  r = reach::resolve_schemes(c, 64, 0);
  CHECK(r.layers[2].norm == reach::QkNorm::cos);
  CHECK(r.layers[2].cos_n == 128.0f);
  CHECK(r.layers[2].scale == 1.0f);
  CHECK(r.layers[2].logn_train_len == 64.0f);
  CHECK_HAS(r.describe(), "cos norm");

  c = cfg_of({{"reach_attention", {{"window", 16}, {"sinks", 4}}}});
  r = reach::resolve_schemes(c, 64, 0);
  for (const auto& s : r.layers) {
    CHECK(s.window == 16);
    CHECK(s.sinks == 4);
  }
  CHECK_HAS(r.describe(), "window 16 + 4 sinks");

  // Mistral sliding_window: a window only when smaller than the context.
  auto m = tiny({{"sliding_window", 32}});
  m["architectures"] = json::array({"MistralForCausalLM"});
  c = reach::parse_model_config(m, "/m/config.json");
  CHECK(reach::resolve_schemes(c, 64, 0).layers[0].window == 32);
  CHECK(reach::resolve_schemes(c, 32, 0).layers[0].window == 0);
  c.attn.window = 8;   // reach_attention.window / --attn-window wins
  CHECK(reach::resolve_schemes(c, 64, 0).layers[0].window == 8);

  c = cfg_of({{"reach_attention", {{"alibi_max_bias", 8}}}});
  r = reach::resolve_schemes(c, 64, 0);
  CHECK_FALSE(r.layers[0].rope);
  CHECK(r.layers[0].alibi_max_bias == 8.0f);
  CHECK_HAS(r.describe(), "ALiBi");
  c = cfg_of({{"reach_attention", {{"alibi_max_bias", 8}}}, {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2}}}});
  CHECK_HAS(error_of([&] { reach::resolve_schemes(c, 64, 0); }, ErrorCode::unsupported), "alibi_max_bias");

  CHECK_HAS(error_of([&] { reach::resolve_schemes(cfg_of(), 0, 0); }, ErrorCode::invalid_argument), "context");
}

TEST_CASE("resolve_schemes: HWFA layout per layer (refmodel layer_schemes overlay)") {
  // Layers 0..2: window 16 with RoPE, logn off; layer 3: full attention, no RoPE, logn.
  auto c = cfg_of({{"rope_scaling", {{"rope_type", "rerope"}, {"window", 8}}},
                   {"reach_attention",
                    {{"logn_train_len", 64},
                     {"sinks", 2},
                     {"layers",
                      {{"0", {{"window", 16}, {"logn", false}}},
                       {"1", {{"window", 16}, {"logn", false}}},
                       {"2", {{"window", 16}, {"logn", false}}},
                       {"3", {{"rope", false}, {"logn", true}}}}}}}});
  auto r = reach::resolve_schemes(c, 256, 0);
  for (int i = 0; i < 3; ++i) {
    INFO("layer " << i);
    const auto& s = r.layers[i];
    CHECK(s.rope);
    CHECK(s.window == 16);
    CHECK(s.sinks == 2);
    CHECK(s.logn_train_len == 0.0f);
    CHECK(s.dual());   // the global scheme (rerope) still applies to RoPE layers
    CHECK(s.cache == reach::KeyCacheMode::raw);
  }
  const auto& last = r.layers[3];
  CHECK_FALSE(last.rope);
  CHECK_FALSE(last.dual());
  CHECK_FALSE(last.branch2_table2);
  CHECK(last.window == 0);
  CHECK(last.sinks == 0);
  CHECK(last.logn_train_len == 64.0f);
  CHECK(last.scale == doctest::Approx(0.25));
  const auto d = r.describe();
  CHECK_HAS(d, "layers 0-2:");
  CHECK_HAS(d, "layer 3: no RoPE");
  CHECK_HAS(d, "window 16 + 2 sinks");

  // Global logn applies to every layer unless a layer says "logn": false (refmodel semantics);
  // a per-layer window of 0 turns a global window off.
  c = cfg_of({{"reach_attention",
               {{"logn_train_len", 64}, {"window", 16}, {"layers", {{"1", {{"window", 0}}}, {"2", {{"logn", false}}}}}}}});
  r = reach::resolve_schemes(c, 256, 0);
  CHECK(r.layers[0].logn_train_len == 64.0f);
  CHECK(r.layers[0].window == 16);
  CHECK(r.layers[1].window == 0);
  CHECK(r.layers[2].logn_train_len == 0.0f);
  CHECK(r.layers[3].logn_train_len == 64.0f);

  // "logn": true without logn_train_len is an error naming the layer.
  c = cfg_of({{"reach_attention", {{"layers", {{"3", {{"logn", true}}}}}}}});
  auto msg = error_of([&] { reach::resolve_schemes(c, 64, 0); }, ErrorCode::invalid_argument);
  CHECK_HAS(msg, "layers[3]");
  CHECK_HAS(msg, "logn_train_len");
}

TEST_CASE("flag values: one parser and one error style for the CLI and the scheme flags") {
  CHECK(reach::to_integer("42") == 42);
  CHECK(reach::to_integer("-7") == -7);
  CHECK_FALSE(reach::to_integer(""));
  CHECK_FALSE(reach::to_integer("4k"));
  CHECK_FALSE(reach::to_integer("1.5"));
  CHECK_FALSE(reach::to_integer("99999999999999999999"));   // outside int64
  CHECK(reach::to_number("0.25") == 0.25);
  CHECK_FALSE(reach::to_number("1.5x"));
  CHECK_FALSE(reach::to_number(""));

  CHECK(reach::flag_integer("-n", "16", 0, 100) == 16);
  CHECK(error_of([] { reach::flag_integer("-n", "abc", 0, 16777216); }, ErrorCode::invalid_argument) ==
        "option -n expects an integer in [0, 16777216], got 'abc'");
  CHECK(error_of([] { reach::flag_integer("--logn", "-5", 0, 10, "0 (off) or a length"); },
                 ErrorCode::invalid_argument) == "option --logn expects 0 (off) or a length, got '-5'");
  CHECK(reach::flag_number("--temp", "-0.5") == -0.5);
  CHECK(error_of([] { reach::flag_number("--temp", "1.5x"); }, ErrorCode::invalid_argument) ==
        "option --temp expects a number, got '1.5x'");
  CHECK(reach::flag_positive_number("--leaky-k", "16", "a number > 0") == 16);
  for (const char* bad : {"0", "-1", "inf", "nan"}) {
    auto positive = [&] { reach::flag_positive_number("--leaky-k", bad, "a number > 0"); };
    CHECK(error_of(positive, ErrorCode::invalid_argument) == "option --leaky-k expects a number > 0, got '" +
                                                                 std::string(bad) + "'");
  }
  CHECK(error_of([] { reach::missing_flag_value("--ctx"); }, ErrorCode::invalid_argument) ==
        "option --ctx needs a value");
}

TEST_CASE("apply_overrides: --rope-scaling longrope runs the model's own factors, and only where it has them") {
  auto plain = cfg_of();
  const std::string msg =
      error_of([&] { reach::apply_overrides(plain, flags({"--rope-scaling", "longrope"})); }, ErrorCode::invalid_argument);
  CHECK_HAS(msg, "--rope-scaling longrope needs the model's own short_factor / long_factor");
  const json phi = {{"architectures", json::array({"Phi3ForCausalLM"})},
                    {"original_max_position_embeddings", 64},
                    {"rope_scaling", json::parse(R"({"type":"longrope","short_factor":[1,1,1,1,1,1,1,1],
                                                     "long_factor":[1,2,3,4,5,6,7,8]})")}};
  auto c = cfg_of(phi);
  reach::apply_overrides(c, flags({"--rope-scaling", "longrope", "--rope-factor", "8", "--original-ctx", "32"}));
  CHECK(c.rope.type == RopeType::longrope);
  CHECK(c.rope.factor == 8.0);
  CHECK(c.rope.original_max_position == 32);
  CHECK(c.rope.long_factor[7] == 8.0);
  // s = 8 (the flag, not 256 / 32): the attention factor sqrt(1 + ln 8 / ln 32) = sqrt(1.6); long set past 32.
  const reach::RopeFreqs f = reach::rope_freqs(c, 100);
  CHECK(f.attention_factor == doctest::Approx(std::sqrt(1.6)).epsilon(1e-12));
  CHECK(f.inv_freq[7] == doctest::Approx(std::pow(1e4, -14.0 / 16.0) / 8.0).epsilon(1e-12));
  // The scheme table lists it with its flags.
  CHECK_HAS(reach::scheme_flags_help(), "longrope");
}
