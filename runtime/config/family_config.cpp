#include "runtime/config/family_config.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/checked.hpp"
#include "base/error.hpp"
#include "base/half.hpp"
#include "runtime/config/config_reader.hpp"

namespace reach::config_detail {

namespace {

// sqrt(hidden) rounded to the checkpoint's dtype, as Hugging Face's scaled embedding keeps its
// normalizer in the weights' dtype (bfloat16: sqrt(640) = 25.298 becomes 25.25).
float gemma_embed_scale(int64_t hidden, const std::string& dtype) {
  const float s = static_cast<float>(std::sqrt(static_cast<double>(hidden)));
  if (dtype == "bfloat16") return bf16_to_f32(f32_to_bf16_bits(s));   // nearest even, base/half
  if (dtype == "float16") return f16_to_f32(f32_to_f16_bits(s));
  return s;
}

// The Gemma MLP's activation (hidden_activation, else hidden_act): GELU(tanh) only.
void gemma_activation(const Reader& r, ModelConfig& c, const char* family) {
  const std::string act = r.opt_str("hidden_activation").value_or(r.opt_str("hidden_act").value_or(
      "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    r.fail(ErrorCode::unsupported, "hidden_activation \"" + act + "\" is not supported for " + family + "; reach's "
                                   "Gemma MLP is GELU(tanh)-gated (\"gelu_pytorch_tanh\")");
  c.activation = Activation::gelu_tanh;
}

// layer_types (["sliding_attention", "full_attention", ...]) into c.local_layers; false when absent.
bool parse_layer_types(const Reader& r, ModelConfig& c) {
  const json* lt = r.find("layer_types");
  if (!lt) return false;
  if (!lt->is_array() || lt->size() != static_cast<size_t>(c.n_layers))
    r.wrong_type("layer_types", *lt, "a list of num_hidden_layers entries");
  c.local_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (size_t i = 0; i < lt->size(); ++i) {
    const json& e = (*lt)[i];
    if (e == "sliding_attention") c.local_layers[i] = true;
    else if (e != "full_attention")
      r.fail(ErrorCode::format, "'layer_types' entry " + std::to_string(i) + " is " + describe_value(e) +
                                    ", expected \"sliding_attention\" or \"full_attention\"");
  }
  return true;
}

// What Gemma 2 and 3 share: (1 + w) norms before and after attention and the MLP, scaled embeddings, the
// query_pre_attn_scalar logit scale, and local layers.
void parse_gemma_common(const Reader& r, ModelConfig& c, const char* family) {
  gemma_activation(r, c, family);
  c.norm_weight_offset = 1;   // GemmaRMSNorm: x * (1 + w), w stored
  c.post_norms = true;
  // Gemma 3: sqrt(hidden) as transformers keeps it in the checkpoint's dtype (tools/reference_gemma3.py does the
  // same); Gemma 2: the f32 value, as transformers' float32/float64 forward and llama.cpp compute it.
  c.embed_scale = c.model_type == "gemma2" ? static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)))
                                           : gemma_embed_scale(c.hidden_size, c.torch_dtype);
  const double qpas = r.positive("query_pre_attn_scalar", r.opt_num("query_pre_attn_scalar").value_or(256.0));
  c.query_scale = 1.0 / std::sqrt(qpas);
  c.local_window = r.dimension("sliding_window", r.opt_int("sliding_window").value_or(4096));
}

// Gemma 2's keys beyond the common ones (config.json of Gemma2ForCausalLM).

}  // namespace

void parse_gemma2(const Reader& r, ModelConfig& c) {
  c.arch = ModelArch::gemma2;
  parse_gemma_common(r, c, "Gemma 2");
  // null turns a cap off, as in Hugging Face's forward.
  if (auto v = r.opt_num("attn_logit_softcapping")) c.attn_softcap = r.positive("attn_logit_softcapping", *v);
  if (auto v = r.opt_num("final_logit_softcapping")) c.final_softcap = r.positive("final_logit_softcapping", *v);
  if (!parse_layer_types(r, c)) {   // older configs: the even layers slide
    c.local_layers.assign(static_cast<size_t>(c.n_layers), false);
    for (int64_t i = 0; i < c.n_layers; ++i) c.local_layers[size_t(i)] = i % 2 == 0;
  }
  // One rotary base for both kinds of layer: set from rope_theta once that is parsed.
}

// Gemma 3's keys beyond the common ones (config.json of Gemma3ForCausalLM / gemma3_text).
void parse_gemma3(const Reader& r, ModelConfig& c) {
  c.arch = ModelArch::gemma3;
  parse_gemma_common(r, c, "Gemma 3");
  for (const char* k : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (r.has(k))
      r.fail(ErrorCode::unsupported, std::string("'") + k + "' is set; Gemma 3 has no logit soft-capping and reach "
                                     "does not run it there - set it to null");
  c.qk_head_norm = true;
  c.rope_local_theta = r.positive("rope_local_base_freq", r.opt_num("rope_local_base_freq").value_or(10000.0));
  if (!parse_layer_types(r, c)) {
    // Older configs: every sliding_window_pattern-th layer is global.
    const int64_t pattern = r.dimension("sliding_window_pattern", r.opt_int("sliding_window_pattern").value_or(6));
    c.local_layers.assign(static_cast<size_t>(c.n_layers), false);
    for (int64_t i = 0; i < c.n_layers; ++i) c.local_layers[size_t(i)] = (i + 1) % pattern != 0;
  }
}

// SmolLM3's NoPE layers: no_rope_layers[i] == 0 marks one (else every no_rope_layer_interval-th layer).
std::vector<bool> parse_nope_layers(const Reader& r, int64_t n_layers) {
  std::vector<bool> nope(static_cast<size_t>(n_layers), false);
  if (const json* nr = r.find("no_rope_layers")) {
    if (!nr->is_array() || nr->size() != static_cast<size_t>(n_layers))
      r.wrong_type("no_rope_layers", *nr, "a list of num_hidden_layers entries (1 = RoPE, 0 = no RoPE)");
    for (size_t i = 0; i < nr->size(); ++i) {
      const json& e = (*nr)[i];
      if (!e.is_number_integer() || (e.get<int64_t>() != 0 && e.get<int64_t>() != 1))
        r.fail(ErrorCode::format, "'no_rope_layers' entry " + std::to_string(i) + " is " + describe_value(e) +
                                      ", expected 1 (RoPE) or 0 (no RoPE)");
      nope[i] = e.get<int64_t>() == 0;
    }
  } else {
    const int64_t every = r.dimension("no_rope_layer_interval", r.opt_int("no_rope_layer_interval").value_or(4));
    for (int64_t i = 0; i < n_layers; ++i) nope[size_t(i)] = (i + 1) % every == 0;
  }
  return nope;
}

// The mixture-of-experts keys of Qwen3-MoE, Mixtral and OLMoE (num_experts or num_local_experts,
// num_experts_per_tok, ...).  Qwen3-MoE's layer l is sparse when it is not in mlp_only_layers and
// (l + 1) % decoder_sparse_step == 0, as transformers decides.
void parse_moe(const Reader& r, ModelConfig& c) {
  const char* n_key = r.has("num_experts") ? "num_experts" : "num_local_experts";
  const std::string hint = "a " + c.family() + " config.json names how many experts each layer has";
  c.n_experts = r.dimension(n_key, r.req_int(n_key, hint));
  c.experts_per_token = r.dimension("num_experts_per_tok",
                                    r.req_int("num_experts_per_tok", "how many experts each token is routed to"));
  if (c.experts_per_token > c.n_experts)
    r.fail(ErrorCode::format, "num_experts_per_tok " + std::to_string(c.experts_per_token) + " is more than " +
                                  n_key + " " + std::to_string(c.n_experts) + " - fix either value");
  if (c.experts_per_token > 32)
    r.fail(ErrorCode::unsupported, "num_experts_per_tok " + std::to_string(c.experts_per_token) +
                                       " is more than reach routes (32)");
  // Mixtral and gpt-oss: softmax over the chosen logits, the same as renormalising the top k of the softmax.
  c.norm_topk_prob = c.arch == ModelArch::mixtral || c.arch == ModelArch::gpt_oss ||
                     r.opt_bool("norm_topk_prob").value_or(false);
  c.expert_intermediate_size = c.intermediate_size;
  if (c.arch == ModelArch::qwen3_moe) {
    c.expert_intermediate_size = r.dimension(
        "moe_intermediate_size", r.req_int("moe_intermediate_size", "Qwen3-MoE's experts are this wide"));
    if (auto s = r.opt_int("shared_expert_intermediate_size"); s && *s > 0)
      r.fail(ErrorCode::unsupported, "'shared_expert_intermediate_size' is " + std::to_string(*s) +
                                         ": shared experts are not supported yet");
    const int64_t step = r.dimension("decoder_sparse_step", r.opt_int("decoder_sparse_step").value_or(1));
    c.dense_layers.assign(size_t(c.n_layers), false);
    for (int64_t l = 0; l < c.n_layers; ++l) c.dense_layers[size_t(l)] = (l + 1) % step != 0;
    if (const json* only = r.find("mlp_only_layers")) {
      if (!only->is_array()) r.wrong_type("mlp_only_layers", *only, "a list of layer indices");
      for (const json& e : *only) {
        if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= c.n_layers)
          r.fail(ErrorCode::format, "'mlp_only_layers' holds " + describe_value(e) + ", expected layer indices in [0, " +
                                        std::to_string(c.n_layers) + ")");
        c.dense_layers[size_t(e.get<int64_t>())] = true;
      }
    }
  }
}

void parse_gpt_oss(const Reader& r, ModelConfig& c) {
  c.activation = Activation::swiglu_clamped;
  c.swiglu_alpha = r.positive("swiglu_alpha", r.opt_num("swiglu_alpha").value_or(1.702));
  c.swiglu_limit = r.positive("swiglu_limit", r.opt_num("swiglu_limit").value_or(7.0));
  c.attn_sinks = true;
  // layer_types, else transformers' default: even layers slide, odd ones see everything.
  if (!parse_layer_types(r, c)) {
    c.local_layers.assign(static_cast<size_t>(c.n_layers), false);
    for (size_t i = 0; i < c.local_layers.size(); i += 2) c.local_layers[i] = true;
  }
  c.local_window = r.dimension("sliding_window", r.opt_int("sliding_window").value_or(128));
}

}  // namespace reach::config_detail
