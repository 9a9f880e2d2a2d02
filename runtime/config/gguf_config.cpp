#include "runtime/config/gguf_config.hpp"

#include <charconv>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "base/checked.hpp"
#include "base/error.hpp"

namespace reach {

namespace {

// Sizes and positions are 32-bit in the kernels, as for config.json.
constexpr int64_t kMaxDimension = INT32_MAX;
constexpr const char* kSupportedArchs =
    "llama (Llama, Mistral, SmolLM and other models llama.cpp files as llama), qwen2, qwen3, phi3 (Phi-3, Phi-3.5, "
    "Phi-4-mini), gemma2, gemma3 (Gemma 3 text models), olmo2, smollm3, qwen3moe (Qwen3-MoE), olmoe, gpt-oss, and "
    "llama files with experts (Mixtral)";

// general.architecture -> config.json's architecture and model_type; `interleaved`: llama.cpp's converter
// permuted the q/k rows (LlamaModel.permute) for this architecture.
struct GgufArch {
  const char* name;
  const char* architecture;
  const char* model_type;
  ModelArch arch;
  bool interleaved;
};
constexpr GgufArch kArchs[] = {
    {"llama", "LlamaForCausalLM", "llama", ModelArch::llama, true},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", ModelArch::llama, false},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", ModelArch::qwen3, false},
    {"phi3", "Phi3ForCausalLM", "phi3", ModelArch::phi3, false},
    {"gemma2", "Gemma2ForCausalLM", "gemma2", ModelArch::gemma2, false},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", ModelArch::gemma3, false},
    {"olmo2", "Olmo2ForCausalLM", "olmo2", ModelArch::olmo2, false},
    {"smollm3", "SmolLM3ForCausalLM", "smollm3", ModelArch::smollm3, true},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe", ModelArch::qwen3_moe, false},
    {"olmoe", "OlmoeForCausalLM", "olmoe", ModelArch::olmoe, false},
    {"gpt-oss", "GptOssForCausalLM", "gpt_oss", ModelArch::gpt_oss, false},
};

// Typed reads of one architecture's keys, with config.json's range rules.
struct Keys {
  const GgufFile& f;
  std::string arch;   // key prefix, "llama"

  std::string key(const char* k) const { return arch + "." + k; }
  std::string where() const { return "gguf (" + f.path().string() + "): "; }
  [[noreturn]] void unsupported(const std::string& what) const {
    throw Error(ErrorCode::unsupported, where() + what);
  }

  int64_t dimension(const std::string& k, uint64_t v) const {
    if (v == 0) f.fail("key '" + k + "' is 0, must be > 0");
    if (v > static_cast<uint64_t>(kMaxDimension))
      f.fail("key '" + k + "' is " + std::to_string(v) + ", more than reach handles (" +
             std::to_string(kMaxDimension) + ")");
    return static_cast<int64_t>(v);
  }
  int64_t req_dim(const char* k, const char* hint) const {
    const std::string full = key(k);
    if (!f.has(full)) f.fail("missing key '" + full + "' - " + hint);
    return dimension(full, f.get_u64(full));
  }
  std::optional<int64_t> opt_dim(const char* k) const {
    const std::string full = key(k);
    const std::optional<uint64_t> v = f.opt_u64(full);
    if (!v) return std::nullopt;
    return dimension(full, *v);
  }
  // GGUF stores these as FLOAT32: 1e-5 becomes 9.99999974738e-06.  The
  // shortest decimal that rounds to the same float (what the converter
  // read from config.json) gives the same double config.json gives.
  std::optional<double> opt_num(const std::string& full) const {
    const GgufValue* v = f.find(full);
    if (!v) return std::nullopt;
    const double d = f.get_f64(full);
    if (!std::isfinite(d)) f.fail("key '" + full + "' is " + std::to_string(d) + ", expected a finite number");
    if (v->type != GgufType::f32) return d;
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf - 1, static_cast<float>(d));
    *r.ptr = '\0';
    return std::strtod(buf, nullptr);
  }
  double positive(const std::string& full, double v) const {
    if (!(v > 0)) f.fail("key '" + full + "' is " + std::to_string(v) + ", must be > 0");
    return v;
  }
};

int32_t token_id(const GgufFile& f, const char* k, int64_t vocab) {
  const uint64_t id = f.get_u64(k);
  if (id >= static_cast<uint64_t>(vocab))
    f.fail("key '" + std::string(k) + "' is " + std::to_string(id) + ", outside the vocabulary [0, " +
           std::to_string(vocab) + ")");
  return static_cast<int32_t>(id);
}

RopeScaling rope_scaling(const Keys& k) {
  RopeScaling rs;
  const std::string type_key = k.key("rope.scaling.type");
  const std::string factor_key = k.key("rope.scaling.factor");
  std::optional<std::string_view> type = k.f.opt_string(type_key);
  const std::string legacy_key = k.key("rope.scale_linear");   // llama.cpp's files before rope.scaling.*
  if (!type && k.f.has(legacy_key)) {
    rs.type = RopeType::linear;
    rs.factor = k.positive(legacy_key, *k.opt_num(legacy_key));
    return rs;
  }
  if (!type || *type == "none") return rs;
  const std::string t(*type);
  auto factor = [&] {
    const std::optional<double> v = k.opt_num(factor_key);
    if (!v) k.f.fail("missing key '" + factor_key + "' - " + type_key + " \"" + t + "\" needs the scaling factor");
    return k.positive(factor_key, *v);
  };
  if (t == "linear") {
    rs.type = RopeType::linear;
    rs.factor = factor();
  } else if (t == "yarn") {
    rs.type = RopeType::yarn;
    rs.factor = factor();
    if (auto o = k.opt_dim("rope.scaling.original_context_length")) rs.original_max_position = *o;
    // llama.cpp's yarn keys; 0 (or absent) means its default, as in HF's `get(...) or default`.
    for (auto [name, dst] : {std::pair{"rope.scaling.yarn_beta_fast", &rs.beta_fast},
                             std::pair{"rope.scaling.yarn_beta_slow", &rs.beta_slow}}) {
      const std::string full = k.key(name);
      if (auto v = k.opt_num(full); v && *v != 0) *dst = k.positive(full, *v);
    }
    const std::string af = k.key("rope.scaling.attn_factor");
    if (auto v = k.opt_num(af)) rs.attention_factor = k.positive(af, *v);
    if (k.f.has(k.key("rope.scaling.yarn_log_multiplier")))
      k.unsupported("key '" + k.key("rope.scaling.yarn_log_multiplier") +
                    "' (DeepSeek-style YaRN attention scaling) is not supported yet");
  } else {
    k.f.fail("key '" + type_key + "' is \"" + t + "\", expected none, linear or yarn");
  }
  return rs;
}

// A global F32 vector tensor (rope_freqs, rope_factors_*) of `n` entries, each finite and > 0.
std::vector<double> factor_tensor(const Keys& k, const GgufTensor& t, int64_t n) {
  if (t.type != GgmlType::f32 || t.ne.size() != 1 || t.ne[0] != n)
    k.f.fail("tensor '" + t.name + "' is " + (t.type == GgmlType::f32 ? "F32" : "not F32") + " with ne " +
             t.ne_string() + ", expected F32 [" + std::to_string(n) + "] (one factor per rotary pair)");
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, t.data + i * 4, 4);
    if (!std::isfinite(v) || !(v > 0))
      k.f.fail("tensor '" + t.name + "' entry " + std::to_string(i) + " is " + std::to_string(v) +
               ", expected a factor > 0");
    out[size_t(i)] = v;
  }
  return out;
}

// Phi-3 as llama.cpp's converter writes it: LongRoPE factors as two global tensors, the attention factor and
// the trained context as rope.scaling keys, sliding_window 0 for none.
void phi3_keys(const Keys& k, ModelConfig& c) {
  c.fused_qkv = c.fused_gate_up = true;
  const GgufTensor* lf = k.f.find_tensor("rope_factors_long.weight");
  const GgufTensor* sf = k.f.find_tensor("rope_factors_short.weight");
  if (lf || sf) {
    if (!lf || !sf)
      k.f.fail(std::string("tensor '") + (lf ? "rope_factors_short.weight" : "rope_factors_long.weight") +
               "' is missing, its pair is present; LongRoPE needs both");
    c.rope.type = RopeType::longrope;
    c.rope.factor = 0;
    c.rope.long_factor = factor_tensor(k, *lf, c.rotary_dim / 2);
    c.rope.short_factor = factor_tensor(k, *sf, c.rotary_dim / 2);
    const std::string oc = k.key("rope.scaling.original_context_length");
    if (!k.f.has(oc)) k.f.fail("missing key '" + oc + "' - LongRoPE switches factors beyond the trained context");
    c.rope.original_max_position = k.dimension(oc, k.f.get_u64(oc));
    const std::string af = k.key("rope.scaling.attn_factor");
    if (auto v = k.opt_num(af)) c.rope.attention_factor = k.positive(af, *v);
  }
  if (auto w = k.f.opt_u64(k.key("attention.sliding_window")); w && *w > 0)
    c.sliding_window = k.dimension(k.key("attention.sliding_window"), *w);
}

// What llama.cpp's Gemma 2 and 3 share: the converter stored the norms as 1 + w (offset 0 here), norms
// after attention and the MLP, GELU(tanh), embeddings x sqrtf(n_embd) in f32, and attention.sliding_window
// for the local layers.  The files carry no query_pre_attn_scalar: the query scale is 1/sqrt(head size),
// except for the largest model (`large_layers` layers: Gemma 2 27B's 46, Gemma 3 27B's 62), whose scalar is
// hidden / heads.
void gemma_keys(const Keys& k, ModelConfig& c, int64_t large_layers) {
  c.activation = Activation::gelu_tanh;
  c.norm_weight_offset = 0;
  c.post_norms = true;
  c.embed_scale = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
  const double qpas = c.n_layers == large_layers ? static_cast<double>(c.hidden_size / c.n_heads)
                                                 : static_cast<double>(c.head_dim);
  c.query_scale = 1.0 / std::sqrt(qpas);
  const std::string sw_key = k.key("attention.sliding_window");
  if (!k.f.has(sw_key))
    k.f.fail("missing key '" + sw_key + "' - every " + k.arch + " GGUF has it; is the file complete?");
  c.local_window = k.dimension(sw_key, k.f.get_u64(sw_key));
  c.local_layers.assign(static_cast<size_t>(c.n_layers), false);
}

// Gemma 2: attention and final logit caps; the even layers slide, with the one rotary base.
void gemma2_keys(const Keys& k, ModelConfig& c) {
  gemma_keys(k, c, 46);
  for (auto [name, dst] : {std::pair{"attn_logit_softcapping", &c.attn_softcap},
                           std::pair{"final_logit_softcapping", &c.final_softcap}}) {
    const std::string full = k.key(name);
    if (auto v = k.opt_num(full); v && *v != 0) *dst = k.positive(full, *v);
  }
  c.rope_local_theta = c.rope_theta;
  for (int64_t i = 0; i < c.n_layers; ++i) c.local_layers[size_t(i)] = i % 2 == 0;
}

// Gemma 3: per-head q/k norms; every sixth layer is global (llama.cpp's fixed pattern), the others rotate
// with rope.freq_base_swa (10000 when absent, llama.cpp's value).
void gemma3_keys(const Keys& k, ModelConfig& c) {
  gemma_keys(k, c, 62);
  c.qk_head_norm = true;
  for (const char* cap : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (k.f.has(k.key(cap)))
      k.unsupported("key '" + k.key(cap) + "' is set; logit soft-capping (Gemma 2) is not supported");
  const std::string swa_base = k.key("rope.freq_base_swa");
  c.rope_local_theta = k.positive(swa_base, k.opt_num(swa_base).value_or(10000.0));
  for (int64_t i = 0; i < c.n_layers; ++i) c.local_layers[size_t(i)] = (i + 1) % 6 != 0;
}

// gpt-oss: llama.cpp's fixed rules, as no key carries them: the even layers slide (window
// attention.sliding_window, the one rotary base), every layer rotates with the file's YaRN, and the clamped
// SwiGLU has alpha 1.702 and limit 7.  The YaRN ramp is not truncated, as the model was trained (its config.json
// says "truncate": false; no GGUF key carries it).
void gpt_oss_keys(const Keys& k, ModelConfig& c) {
  c.activation = Activation::swiglu_clamped;
  c.swiglu_alpha = 1.702;
  c.swiglu_limit = 7.0;
  c.attn_sinks = true;
  const std::string sw_key = k.key("attention.sliding_window");
  if (!k.f.has(sw_key))
    k.f.fail("missing key '" + sw_key + "' - every " + k.arch + " GGUF has it; is the file complete?");
  c.local_window = k.dimension(sw_key, k.f.get_u64(sw_key));
  c.local_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int64_t i = 0; i < c.n_layers; i += 2) c.local_layers[size_t(i)] = true;
  c.rope_local_theta = c.rope_theta;
  c.rope.truncate = false;
  c.local_rope = c.rope;
}

// The experts as llama.cpp's converter describes them: <arch>.expert_count, expert_used_count,
// expert_feed_forward_length (Qwen3-MoE; the others' experts are feed_forward_length wide) and, where written,
// expert_weights_norm; a layer without blk.N.ffn_gate_inp (the router) is dense.  llama.cpp renormalises the
// chosen weights for llama (Mixtral) and qwen3moe, not for olmoe.
void moe_keys(const Keys& k, ModelConfig& c, uint64_t experts) {
  c.n_experts = k.dimension(k.key("expert_count"), experts);
  const std::string used = k.key("expert_used_count");
  if (!k.f.has(used)) k.f.fail("missing key '" + used + "' - how many experts each token is routed to");
  c.experts_per_token = k.dimension(used, k.f.get_u64(used));
  if (c.experts_per_token > c.n_experts)
    k.f.fail("key '" + used + "' is " + std::to_string(c.experts_per_token) + ", more than '" + k.key("expert_count") +
             "' (" + std::to_string(c.n_experts) + ")");
  if (c.experts_per_token > 32)
    k.unsupported("key '" + used + "' is " + std::to_string(c.experts_per_token) + ", more than reach routes (32)");
  for (const char* shared : {"expert_shared_count", "expert_shared_feed_forward_length"})
    if (auto v = k.f.opt_u64(k.key(shared)); v && *v > 0)
      k.unsupported("key '" + k.key(shared) + "' is set: shared experts are not supported yet");
  // gpt-oss's router (softmax over the chosen logits) is llama.cpp's own rule for that architecture.
  if (auto g = k.f.opt_u64(k.key("expert_gating_func")); g && *g != 1 && c.arch != ModelArch::gpt_oss)
    k.unsupported("key '" + k.key("expert_gating_func") + "' is " + std::to_string(*g) +
                  ": reach's router is the softmax (1)");
  c.expert_intermediate_size = k.opt_dim("expert_feed_forward_length").value_or(c.intermediate_size);
  c.norm_topk_prob = c.arch != ModelArch::olmoe;   // gpt-oss: the softmax over the chosen, the same
  if (const GgufValue* v = k.f.find(k.key("expert_weights_norm")); v && v->type == GgufType::boolean)
    c.norm_topk_prob = k.f.get_bool(k.key("expert_weights_norm"));
  c.dense_layers.assign(size_t(c.n_layers), false);
  for (int64_t l = 0; l < c.n_layers; ++l)
    c.dense_layers[size_t(l)] = !k.f.find_tensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight");
}

}  // namespace

ModelConfig model_config_from_gguf(const GgufFile& f) {
  const std::string arch_key = "general.architecture";
  if (!f.has(arch_key))
    f.fail("missing key '" + arch_key + "' - every model GGUF names its architecture; reach runs " +
           kSupportedArchs);
  const std::string arch(f.get_string(arch_key));
  const GgufArch* ga = nullptr;
  for (const GgufArch& g : kArchs)
    if (arch == g.name) ga = &g;
  if (!ga)
    throw Error(ErrorCode::unsupported, "gguf (" + f.path().string() + "): key '" + arch_key + "' is \"" + arch +
                                            "\", an architecture reach does not run; reach runs " + kSupportedArchs);
  const Keys k{f, arch};
  ModelConfig c;
  c.source = f.path();
  c.architecture = ga->architecture;
  c.model_type = ga->model_type;
  c.arch = ga->arch;
  c.interleaved_qk_rows = ga->interleaved;

  const uint64_t experts = f.opt_u64(k.key("expert_count")).value_or(0);
  if (experts > 0 && c.arch == ModelArch::llama) {   // llama.cpp files Mixtral as llama with experts
    c.arch = ModelArch::mixtral;
    c.architecture = "MixtralForCausalLM";
    c.model_type = "mixtral";
  }
  if (experts > 0 && c.arch != ModelArch::mixtral && c.arch != ModelArch::qwen3_moe && c.arch != ModelArch::olmoe &&
      c.arch != ModelArch::gpt_oss)
    k.unsupported("key '" + k.key("expert_count") + "' is " + std::to_string(experts) +
                  ": mixture-of-experts " + arch + " models are not supported yet");
  if (experts == 0 && (c.arch == ModelArch::qwen3_moe || c.arch == ModelArch::olmoe || c.arch == ModelArch::gpt_oss))
    f.fail("missing key '" + k.key("expert_count") + "' - every " + arch + " GGUF names its experts");

  const std::string hint_s = "every " + arch + " GGUF has it; is the file complete?";
  const char* hint = hint_s.c_str();
  c.hidden_size = k.req_dim("embedding_length", hint);
  c.intermediate_size = k.req_dim("feed_forward_length", hint);
  c.n_layers = k.req_dim("block_count", hint);
  c.n_heads = k.req_dim("attention.head_count", hint);
  c.n_kv_heads = k.opt_dim("attention.head_count_kv").value_or(c.n_heads);
  c.max_position_embeddings = k.req_dim("context_length", hint);

  const std::string eps_key = k.key("attention.layer_norm_rms_epsilon");
  const std::optional<double> eps = k.opt_num(eps_key);
  if (!eps) f.fail("missing key '" + eps_key + "' - " + hint);
  c.rms_norm_eps = k.positive(eps_key, *eps);

  // Head size: attention.key_length when given (it must match value_length:
  // reach's attention has one head size), else hidden / heads.
  const std::optional<int64_t> key_len = k.opt_dim("attention.key_length");
  const std::optional<int64_t> value_len = k.opt_dim("attention.value_length");
  if (key_len && value_len && *key_len != *value_len)
    k.unsupported("keys '" + k.key("attention.key_length") + "' (" + std::to_string(*key_len) + ") and '" +
                  k.key("attention.value_length") + "' (" + std::to_string(*value_len) +
                  ") differ; reach's attention needs one head size");
  if (key_len || value_len) {
    c.head_dim = key_len.value_or(*value_len);
  } else {
    if (c.hidden_size % c.n_heads != 0)
      f.fail("key '" + k.key("embedding_length") + "' (" + std::to_string(c.hidden_size) +
             ") is not divisible by '" + k.key("attention.head_count") + "' (" + std::to_string(c.n_heads) +
             ") and '" + k.key("attention.key_length") + "' is not given");
    c.head_dim = c.hidden_size / c.n_heads;
  }
  const std::optional<int64_t> q_rows = checked_mul(c.n_heads, c.head_dim);
  if (!q_rows || *q_rows > kMaxDimension)
    f.fail("key '" + k.key("attention.head_count") + "' (" + std::to_string(c.n_heads) + ") x head size " +
           std::to_string(c.head_dim) + " is more than reach handles (" + std::to_string(kMaxDimension) + ")");
  if (c.n_heads % c.n_kv_heads != 0)
    f.fail("key '" + k.key("attention.head_count") + "' (" + std::to_string(c.n_heads) +
           ") is not a multiple of '" + k.key("attention.head_count_kv") + "' (" + std::to_string(c.n_kv_heads) +
           "); grouped-query attention shares each KV head among a whole group of heads");

  // Rotary embedding.
  const std::string base_key = k.key("rope.freq_base");
  c.rope_theta = k.positive(base_key, k.opt_num(base_key).value_or(10000.0));
  c.rotary_dim = k.opt_dim("rope.dimension_count").value_or(c.head_dim);
  if (c.rotary_dim % 2 != 0 || c.rotary_dim > c.head_dim)
    f.fail("key '" + k.key("rope.dimension_count") + "' is " + std::to_string(c.rotary_dim) +
           "; RoPE needs an even number of dimensions, at most the head size " + std::to_string(c.head_dim));
  c.partial_rotary_factor = static_cast<double>(c.rotary_dim) / static_cast<double>(c.head_dim);
  c.rope = rope_scaling(k);
  // Llama 3.1 / 3.2: llama3 rope scaling as one divisor per frequency (llama.cpp applies it to every layer
  // of these architectures).
  if (const GgufTensor* rf = f.find_tensor("rope_freqs.weight"))
    c.rope_freq_factors = factor_tensor(k, *rf, c.rotary_dim / 2);

  // Vocabulary: llama.vocab_size, else the token list; a token list longer
  // than the vocabulary would hand out ids the embedding table lacks.
  const std::string vocab_key = k.key("vocab_size");
  const char* tokens_key = "tokenizer.ggml.tokens";
  const bool has_tokens = f.has(tokens_key);
  const uint64_t n_tokens = has_tokens ? f.array_size(tokens_key) : 0;
  if (const std::optional<int64_t> v = k.opt_dim("vocab_size")) {
    c.vocab_size = *v;
    if (n_tokens > static_cast<uint64_t>(c.vocab_size))
      f.fail("key '" + std::string(tokens_key) + "' lists " + std::to_string(n_tokens) + " tokens, more than '" +
             vocab_key + "' (" + std::to_string(c.vocab_size) + ")");
  } else if (has_tokens) {
    c.vocab_size = k.dimension(tokens_key, n_tokens);
  } else {
    f.fail("neither '" + vocab_key + "' nor '" + tokens_key + "' is set, so the vocabulary size is unknown");
  }

  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  c.attention_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  switch (c.arch) {
    case ModelArch::gemma3: gemma3_keys(k, c); break;
    case ModelArch::gemma2: gemma2_keys(k, c); break;
    case ModelArch::phi3: phi3_keys(k, c); break;
    case ModelArch::qwen3:
    case ModelArch::qwen3_moe: c.qk_head_norm = true; break;
    case ModelArch::olmoe: c.qk_proj_norm = true; break;
    case ModelArch::olmo2:
      if (f.has(k.key("attention.sliding_window")))
        k.unsupported("key '" + k.key("attention.sliding_window") + "' is set: OLMo 3's sliding-window layers are "
                      "not supported yet (OLMo 2 has none)");
      c.pre_norms = false;
      c.post_norms = true;
      c.qk_proj_norm = true;
      break;
    case ModelArch::smollm3:   // llama.cpp's fixed layout: every fourth layer has no rotation
      for (int64_t i = 3; i < c.n_layers; i += 4) c.attn.layers[int(i)].rope = false;
      break;
    case ModelArch::gpt_oss: gpt_oss_keys(k, c); break;
    case ModelArch::llama:
    case ModelArch::mixtral:
      if (auto w = f.opt_u64(k.key("attention.sliding_window")); w && *w > 0) {
        c.sliding_window = k.dimension(k.key("attention.sliding_window"), *w);
      } else if (arch == "llama") {
        // llama.cpp's converter drops Mistral's sliding_window: the file cannot say whether the model had one.
        c.window_note = "sliding window: none in this GGUF (llama.cpp's converter drops Mistral's "
                        "sliding_window); if the model was trained with one, pass --attn-window W (e.g. 4096 for "
                        "Mistral 7B v0.1)";
      }
      break;
  }
  if (c.is_moe() || experts > 0) moe_keys(k, c, experts);
  if (f.has("tokenizer.ggml.bos_token_id")) c.bos_ids = {token_id(f, "tokenizer.ggml.bos_token_id", c.vocab_size)};
  if (f.has("tokenizer.ggml.eos_token_id")) c.eos_ids = {token_id(f, "tokenizer.ggml.eos_token_id", c.vocab_size)};
  return c;
}

}  // namespace reach
