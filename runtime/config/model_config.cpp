#include "runtime/config/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/checked.hpp"
#include "base/error.hpp"
#include "runtime/formats/file_read.hpp"
#include "runtime/formats/json_parse.hpp"

namespace reach {

using nlohmann::json;

namespace {

// Sizes and positions are 32-bit in the kernels (and far above any real model).
constexpr int64_t kMaxDimension = INT32_MAX;

// A real config.json nests 3 levels (rope_scaling, reach_attention.layers.N).
constexpr int kMaxConfigDepth = 64;
constexpr const char* kSupportedArchs =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
    "Gemma2ForCausalLM, Gemma3ForCausalLM, Olmo2ForCausalLM, SmolLM3ForCausalLM, Qwen3MoeForCausalLM, "
    "MixtralForCausalLM, OlmoeForCausalLM";
// Mixture-of-experts families reach refuses for now, and what they need that reach lacks.
constexpr std::pair<const char*, const char*> kUnsupportedMoe[] = {
    {"Qwen2MoeForCausalLM", "Qwen2-MoE's shared expert (with its own sigmoid gate) is not supported yet"},
    {"GptOssForCausalLM", "gpt-oss (attention sinks, biased experts with clamped SwiGLU, MXFP4 blocks) is not "
                          "supported yet"},
    {"DeepseekV2ForCausalLM", "DeepSeek-V2's latent attention and shared experts are not supported yet"},
    {"DeepseekV3ForCausalLM", "DeepSeek-V3's latent attention and shared experts are not supported yet"},
};
// "default, linear, ... (Hugging Face) and none, ntk, ... (reach)" from the rope-type table.
std::string known_rope_types() {
  return rope_type_names(", ", [](const RopeTypeInfo& t) { return t.hf; }) + " (Hugging Face) and " +
         rope_type_names(", ", [](const RopeTypeInfo& t) { return !t.hf; }) + " (reach)";
}

// A short description of a JSON value for "wrong type" messages.  Containers
// are never dumped (they could be huge or deeply nested).
std::string describe_value(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string d = v.dump();
  if (d.size() > 40) d = d.substr(0, 37) + "...";
  const char* t = v.is_string() ? "a string" : v.is_boolean() ? "a boolean" : v.is_null() ? "null" : "a number";
  return std::string(t) + " (" + d + ")";
}

// Typed access to the keys of one JSON object; `where` prefixes messages.
struct Reader {
  const json& obj;
  std::string where;

  [[noreturn]] void fail(ErrorCode code, const std::string& msg) const { throw Error(code, where + ": " + msg); }

  // nullptr when absent or null (null means "use the default" in HF configs).
  const json* find(const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  [[noreturn]] void missing(const char* key, const std::string& hint) const {
    fail(ErrorCode::format, std::string("missing key '") + key + "' - " + hint);
  }
  [[noreturn]] void wrong_type(const char* key, const json& v, const char* expected) const {
    fail(ErrorCode::format, std::string("key '") + key + "' is " + describe_value(v) + ", expected " + expected +
                                " - fix the value in the file");
  }

  std::optional<int64_t> opt_int(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<int64_t>();
    if (v->is_number_unsigned()) {
      uint64_t u = v->get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(u);
    }
    if (v->is_number_float()) {   // 4096.0 is accepted; 4096.5 is not
      double d = v->get<double>();
      if (std::floor(d) == d && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
    }
    wrong_type(key, *v, "an integer");
  }
  int64_t req_int(const char* key, const std::string& hint) const {
    auto v = opt_int(key);
    if (!v) missing(key, hint);
    return *v;
  }
  std::optional<double> opt_num(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(key, *v, "a number");
    // The JSON parser refuses NaN and overflow; objects built in code (the flag overrides) may not.
    if (!std::isfinite(v->get<double>())) wrong_type(key, *v, "a finite number");
    return v->get<double>();
  }
  double req_num(const char* key, const std::string& hint) const {
    auto v = opt_num(key);
    if (!v) missing(key, hint);
    return *v;
  }
  std::optional<bool> opt_bool(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(key, *v, "true or false");
    return v->get<bool>();
  }
  std::optional<std::string> opt_str(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(key, *v, "a string");
    return v->get<std::string>();
  }

  // A list of numbers > 0 (LongRoPE's factors); empty when absent.
  std::vector<double> positive_list(const char* key) const {
    std::vector<double> out;
    const json* v = find(key);
    if (!v) return out;
    if (!v->is_array()) wrong_type(key, *v, "a list of numbers");
    for (const json& e : *v) {
      if (!e.is_number() || !std::isfinite(e.get<double>()) || !(e.get<double>() > 0))
        fail(ErrorCode::format, std::string("'") + key + "' holds " + describe_value(e) +
                                    ", expected numbers > 0 - fix the value in the file");
      out.push_back(e.get<double>());
    }
    return out;
  }

  int64_t positive(const char* key, int64_t v) const {
    if (v <= 0) fail(ErrorCode::format, std::string("'") + key + "' is " + std::to_string(v) + ", must be > 0");
    return v;
  }
  // A size the kernels index with 32-bit integers: (0, 2^31 - 1].
  int64_t dimension(const char* key, int64_t v) const {
    positive(key, v);
    if (v > kMaxDimension)
      fail(ErrorCode::format, std::string("'") + key + "' is " + std::to_string(v) + ", more than reach handles (" +
                                  std::to_string(kMaxDimension) + ") - fix the value in the file");
    return v;
  }
  int64_t non_negative(const char* key, int64_t v) const {
    if (v < 0) fail(ErrorCode::format, std::string("'") + key + "' is " + std::to_string(v) + ", must be >= 0");
    return v;
  }
  double positive(const char* key, double v) const {
    if (!(v > 0)) fail(ErrorCode::format, std::string("'") + key + "' is " + json(v).dump() + ", must be > 0");
    return v;
  }

  // Every key must be one of `allowed` (for reach-only objects: typos must not pass).
  void only_keys(const std::vector<const char*>& allowed) const {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || it.key() == a;
      if (!ok) {
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail(ErrorCode::format, "unknown key '" + it.key() + "' (allowed here: " + list + ") - check the spelling");
      }
    }
  }
};

std::vector<int32_t> parse_token_ids(const Reader& r, const char* key, int64_t vocab_size) {
  std::vector<int32_t> out;
  const json* v = r.find(key);
  if (!v) return out;
  auto one = [&](const json& e) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= vocab_size)
      r.fail(ErrorCode::format, std::string("'") + key + "' holds " + describe_value(e) +
                                    ", expected token ids in [0, vocab_size=" + std::to_string(vocab_size) + ")");
    out.push_back(static_cast<int32_t>(e.get<int64_t>()));
  };
  if (v->is_array()) {
    for (const auto& e : *v) one(e);
  } else if (v->is_number()) {
    one(*v);
  } else {
    r.wrong_type(key, *v, "a token id, a list of token ids, or null");
  }
  return out;
}

}  // namespace

RopeScaling parse_rope_scaling(const json& obj, const std::string& where) {
  RopeScaling rs;
  if (obj.is_null()) return rs;
  if (!obj.is_object())
    throw Error(ErrorCode::format, where + ": is " + describe_value(obj) +
                                       ", expected an object like {\"rope_type\": \"linear\", \"factor\": 2}");
  Reader r{obj, where};
  auto type = r.opt_str("rope_type");
  auto legacy = r.opt_str("type");
  if (type && legacy && *type != *legacy)
    r.fail(ErrorCode::format, "'rope_type' is \"" + *type + "\" but 'type' is \"" + *legacy + "\" - keep one");
  if (!type) type = legacy;
  if (!type) {
    if (r.has("factor"))
      r.fail(ErrorCode::format, std::string("has 'factor' but no 'rope_type' - add \"rope_type\" (one of ") +
                                    known_rope_types() + ")");
    type = "default";
  }
  const std::string& t = *type;
  const RopeTypeInfo* info = rope_type_from_config(t);
  if (!info && rope_type_unsupported(t))
    r.fail(ErrorCode::unsupported, "rope_type \"" + t + "\" is not supported by reach yet (supported: " +
                                       known_rope_types() + ")");
  if (!info) r.fail(ErrorCode::unsupported, "unknown rope_type \"" + t + "\" (known: " + known_rope_types() + ")");
  rs.type = info->type;
  if (!info->hf) {   // reach's own types: a misspelt key must not pass
    std::vector<const char*> keys = {"rope_type", "type"};
    for (const char* k : rope_param_keys(info->params)) keys.push_back(k);
    keys.insert(keys.end(), {"rope_theta", "partial_rotary_factor"});
    r.only_keys(keys);
  }
  const std::string fhint = "rope_type \"" + t + "\" needs it (the scaling factor s = new context / trained context)";
  auto common_hf = [&] {   // keys every HF type may carry (v5 standardizes original_max_position_embeddings)
    if (auto o = r.opt_int("original_max_position_embeddings"))
      rs.original_max_position = r.dimension("original_max_position_embeddings", *o);
  };
  switch (rs.type) {
    case RopeType::default_:
      common_hf();
      break;
    case RopeType::linear:
    case RopeType::dynamic:
      rs.factor = r.positive("factor", r.req_num("factor", fhint));
      common_hf();
      break;
    case RopeType::yarn:
      rs.factor = r.positive("factor", r.req_num("factor", fhint));
      common_hf();
      // HF reads these with `get(...) or default`: null and 0 fall back.
      if (auto v = r.opt_num("beta_fast"); v && *v != 0) rs.beta_fast = r.positive("beta_fast", *v);
      if (auto v = r.opt_num("beta_slow"); v && *v != 0) rs.beta_slow = r.positive("beta_slow", *v);
      rs.attention_factor = r.opt_num("attention_factor");
      if (rs.attention_factor) r.positive("attention_factor", *rs.attention_factor);
      rs.mscale = r.opt_num("mscale");
      rs.mscale_all_dim = r.opt_num("mscale_all_dim");
      rs.truncate = r.opt_bool("truncate").value_or(true);
      break;
    case RopeType::llama3: {
      const std::string h = "rope_type \"llama3\" requires factor, low_freq_factor, high_freq_factor and "
                            "original_max_position_embeddings (Llama 3.1 uses 8, 1, 4, 8192)";
      rs.factor = r.positive("factor", r.req_num("factor", h));
      rs.low_freq_factor = r.positive("low_freq_factor", r.req_num("low_freq_factor", h));
      rs.high_freq_factor = r.positive("high_freq_factor", r.req_num("high_freq_factor", h));
      rs.original_max_position =
          r.dimension("original_max_position_embeddings", r.req_int("original_max_position_embeddings", h));
      if (rs.high_freq_factor < rs.low_freq_factor)
        r.fail(ErrorCode::format, "high_freq_factor " + json(rs.high_freq_factor).dump() + " < low_freq_factor " +
                                      json(rs.low_freq_factor).dump() + " - swap them");
      break;
    }
    case RopeType::longrope: {
      // factor is optional: Phi-3 gives max_position_embeddings / original instead (rope_freqs).
      if (auto f = r.opt_num("factor")) rs.factor = r.positive("factor", *f);
      else rs.factor = 0;
      common_hf();
      rs.attention_factor = r.opt_num("attention_factor");
      if (rs.attention_factor) r.positive("attention_factor", *rs.attention_factor);
      const std::string h = "rope_type \"longrope\" needs 'short_factor' and 'long_factor' (one divisor per "
                            "rotary frequency, as Phi-3 configs carry them)";
      rs.short_factor = r.positive_list("short_factor");
      rs.long_factor = r.positive_list("long_factor");
      if (rs.short_factor.empty()) r.missing("short_factor", h);
      if (rs.long_factor.empty()) r.missing("long_factor", h);
      if (rs.short_factor.size() != rs.long_factor.size())
        r.fail(ErrorCode::format, "'short_factor' has " + std::to_string(rs.short_factor.size()) +
                                      " entries but 'long_factor' has " + std::to_string(rs.long_factor.size()) +
                                      " - both need one per rotary frequency");
      break;
    }
    case RopeType::ntk:
      rs.factor = r.positive("factor", r.req_num("factor", fhint));
      break;
    case RopeType::rerope:
      rs.window = r.positive("window", r.req_int("window", "ReRoPE clamps relative positions at 'window' (e.g. 512)"));
      break;
    case RopeType::leaky_rerope: {
      const std::string h = "Leaky ReRoPE needs 'window' w and 'factor' k (positions beyond w advance by 1/k; "
                            "e.g. 512 and 16)";
      rs.window = r.positive("window", r.req_int("window", h));
      rs.leaky_k = r.positive("factor", r.req_num("factor", h));
      break;
    }
    case RopeType::self_extend: {
      const std::string h = "Self-Extend needs 'group' G and neighbour 'window' W (e.g. 4 and 1024)";
      rs.group = r.positive("group", r.req_int("group", h));
      rs.window = r.positive("window", r.req_int("window", h));
      if (rs.window % rs.group != 0) {
        // The next multiple of G above W, or the one below where that overflows.
        const int64_t below = rs.window / rs.group * rs.group;
        const int64_t above = below > INT64_MAX - rs.group ? below : below + rs.group;
        r.fail(ErrorCode::format, "self_extend window " + std::to_string(rs.window) + " is not a multiple of group " +
                                      std::to_string(rs.group) +
                                      ": the grouped positions floor(i/G) + W - W/G only continue the neighbour "
                                      "positions when G divides W - use e.g. window " +
                                      std::to_string(above > 0 ? above : rs.group));
      }
      break;
    }
    case RopeType::none_:
      break;
  }
  return rs;
}

ReachAttention parse_reach_attention(const json& obj, const std::string& where, int64_t n_layers,
                                     bool model_window) {
  ReachAttention a;
  if (obj.is_null()) return a;
  if (!obj.is_object())
    throw Error(ErrorCode::format, where + ": is " + describe_value(obj) + ", expected an object");
  Reader r{obj, where};
  r.only_keys({"logn_train_len", "qk_norm", "cos_n", "window", "sinks", "layers", "alibi_max_bias"});
  if (auto v = r.opt_int("logn_train_len")) {
    a.logn_train_len = r.non_negative("logn_train_len", *v);
    if (a.logn_train_len == 1)
      r.fail(ErrorCode::format, "'logn_train_len' is 1 (ln 1 = 0 would divide by zero) - use the training "
                                "context length, e.g. 4096, or 0 to disable");
  }
  if (auto v = r.opt_str("qk_norm")) {
    const std::optional<QkNorm> n = parse_qk_norm(*v);
    if (!n) r.fail(ErrorCode::format, "'qk_norm' is \"" + *v + "\", expected " + qk_norm_names("\"", ", ", " or "));
    a.qk_norm = *n;
  }
  if (auto v = r.opt_num("cos_n")) {
    a.cos_n = r.positive("cos_n", *v);
    if (a.qk_norm != QkNorm::cos)
      r.fail(ErrorCode::format, "'cos_n' is only used with \"qk_norm\": \"cos\" - set both or remove cos_n");
  }
  if (auto v = r.opt_int("window")) a.window = r.non_negative("window", *v);
  if (auto v = r.opt_int("sinks")) a.sinks = r.non_negative("sinks", *v);
  if (auto v = r.opt_num("alibi_max_bias")) a.alibi_max_bias = r.positive("alibi_max_bias", *v);
  if (const json* layers = r.find("layers")) {
    if (!layers->is_object()) r.wrong_type("layers", *layers, "an object {\"<layer index>\": {...}}");
    for (auto it = layers->begin(); it != layers->end(); ++it) {
      const std::string& k = it.key();
      bool digits = !k.empty() && k.size() <= 9;
      for (char c : k) digits = digits && c >= '0' && c <= '9';
      if (!digits)
        r.fail(ErrorCode::format, "layers key \"" + k + "\" is not a layer index (use \"0\", \"1\", ...)");
      const int idx = std::stoi(k);
      if (idx >= n_layers)
        r.fail(ErrorCode::format, "layers key \"" + k + "\" is out of range: the model has num_hidden_layers=" +
                                      std::to_string(n_layers) + " (indices 0.." + std::to_string(n_layers - 1) + ")");
      if (!it->is_object()) r.wrong_type(k.c_str(), *it, "an object like {\"window\": 512, \"rope\": false}");
      Reader lr{*it, where + ": layers[" + k + "]"};
      lr.only_keys({"window", "rope", "logn"});
      LayerAttention la;
      if (auto w = lr.opt_int("window")) la.window = lr.non_negative("window", *w);
      la.rope = lr.opt_bool("rope");
      la.logn = lr.opt_bool("logn");
      a.layers[idx] = la;
    }
  }
  // Sinks are what a sliding window keeps visible: with no window anywhere
  // every token is visible, and the value would be ignored without a word.
  bool any_window = a.window > 0 || model_window;
  for (const auto& [idx, la] : a.layers) any_window = any_window || la.window.value_or(0) > 0;
  if (a.sinks > 0 && !any_window)
    r.fail(ErrorCode::format, "'sinks' is " + std::to_string(a.sinks) + " but no attention window is set (sinks "
                              "are the first tokens a sliding window keeps visible) - set 'window' (or a layer's "
                              "'window') too, or set 'sinks' to 0");
  return a;
}

namespace {

// sqrt(hidden) rounded to the checkpoint's dtype, as Hugging Face's scaled embedding keeps its
// normalizer in the weights' dtype (bfloat16: sqrt(640) = 25.298 becomes 25.25).
float gemma_embed_scale(int64_t hidden, const std::string& dtype) {
  const float s = static_cast<float>(std::sqrt(static_cast<double>(hidden)));
  uint32_t bits;
  std::memcpy(&bits, &s, 4);
  if (dtype == "bfloat16") {
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;   // round to nearest even
  } else if (dtype == "float16") {
    // sqrt of a real hidden size is a normal f16 (< 65504): keep 10 mantissa bits, nearest even.
    bits = (bits + 0xfffu + ((bits >> 13) & 1u)) & 0xffffe000u;
  }
  float r;
  std::memcpy(&r, &bits, 4);
  return r;
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
  c.norm_topk_prob = c.arch == ModelArch::mixtral || r.opt_bool("norm_topk_prob").value_or(false);
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

}  // namespace

std::string ModelConfig::family() const {
  static const std::pair<const char*, const char*> kNames[] = {
      {"llama", "Llama"},   {"mistral", "Mistral"}, {"qwen2", "Qwen2"},       {"qwen3", "Qwen3"},
      {"phi3", "Phi-3"},    {"gemma2", "Gemma 2"},  {"gemma3_text", "Gemma 3"}, {"olmo2", "OLMo 2"},
      {"smollm3", "SmolLM3"}, {"qwen3_moe", "Qwen3-MoE"}, {"mixtral", "Mixtral"}, {"olmoe", "OLMoE"}};
  for (const auto& [type, name] : kNames)
    if (model_type == type) return name;
  return model_type;
}

uint64_t ModelConfig::matrix_params(bool active) const {
  const uint64_t H = uint64_t(hidden_size), qd = uint64_t(n_heads * head_dim), kvd = uint64_t(n_kv_heads * head_dim);
  uint64_t n = uint64_t(vocab_size) * H * (tie_word_embeddings ? 1 : 2);
  for (int64_t l = 0; l < n_layers; ++l) {
    n += 2 * H * qd + 2 * H * kvd;
    if (moe_layer(l))
      n += uint64_t(n_experts) * H +
           uint64_t(active ? experts_per_token : n_experts) * 3 * H * uint64_t(expert_intermediate_size);
    else
      n += 3 * H * uint64_t(intermediate_size);
  }
  return n;
}

bool ModelConfig::has_local_layers() const {
  return std::find(local_layers.begin(), local_layers.end(), true) != local_layers.end();
}

ModelConfig parse_model_config(const json& j, const std::filesystem::path& source) {
  // Gemma 3's multimodal checkpoints nest the language model's config in text_config.
  if (j.is_object() && j.contains("text_config") && j["text_config"].is_object() &&
      ((j.contains("model_type") && j["model_type"] == "gemma3") ||
       (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
        j["architectures"][0] == "Gemma3ForConditionalGeneration"))) {
    json t = j["text_config"];
    t.erase("architectures");
    t["model_type"] = "gemma3_text";
    for (const char* k : {"tie_word_embeddings", "bos_token_id", "eos_token_id", "torch_dtype", "dtype"})
      if (!t.contains(k) && j.contains(k)) t[k] = j[k];
    ModelConfig c = parse_model_config(t, source);
    c.architecture = "Gemma3ForConditionalGeneration";
    return c;
  }
  ModelConfig c;
  c.source = source;
  const std::string where = "config.json (" + source.string() + ")";
  if (!j.is_object())
    throw Error(ErrorCode::format, where + ": the top level is " + describe_value(j) + ", expected an object");
  Reader r{j, where};

  // Architecture.
  static const std::pair<const char*, const char*> kArchs[] = {
      {"LlamaForCausalLM", "llama"},     {"MistralForCausalLM", "mistral"}, {"Qwen2ForCausalLM", "qwen2"},
      {"Qwen3ForCausalLM", "qwen3"},     {"Phi3ForCausalLM", "phi3"},       {"Gemma2ForCausalLM", "gemma2"},
      {"Gemma3ForCausalLM", "gemma3_text"}, {"Olmo2ForCausalLM", "olmo2"}, {"SmolLM3ForCausalLM", "smollm3"},
      {"Qwen3MoeForCausalLM", "qwen3_moe"}, {"MixtralForCausalLM", "mixtral"}, {"OlmoeForCausalLM", "olmoe"}};
  if (const json* archs = r.find("architectures")) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string())
      r.wrong_type("architectures", *archs, "a list of class names like [\"LlamaForCausalLM\"]");
    c.architecture = (*archs)[0].get<std::string>();
    for (const auto& [a, mt] : kArchs)
      if (c.architecture == a) c.model_type = mt;
    for (const auto& [a, why] : kUnsupportedMoe)
      if (c.architecture == a)
        r.fail(ErrorCode::unsupported, "architecture '" + c.architecture + "': " + why + "; reach runs " +
                                           kSupportedArchs);
    if (c.model_type.empty())
      r.fail(ErrorCode::unsupported, "architecture '" + c.architecture + "' is not supported; reach runs " +
                                         kSupportedArchs);
  } else if (auto mt = r.opt_str("model_type")) {
    for (const auto& [a, m] : kArchs)
      if (*mt == m) c.architecture = a, c.model_type = m;
    if (c.model_type.empty())
      r.fail(ErrorCode::unsupported, "model_type '" + *mt + "' is not supported; reach runs " + kSupportedArchs +
                                         " (model_type llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, "
                                         "olmo2, smollm3)");
  } else {
    r.missing("architectures", std::string("neither 'architectures' nor 'model_type' is set; reach runs ") +
                                   kSupportedArchs);
  }

  const bool gemma3 = c.model_type == "gemma3_text", gemma2 = c.model_type == "gemma2", gemma = gemma2 || gemma3;
  const std::string hint = "every config.json of a model reach runs has it; is this the model's own config.json?";
  // Nothing is sized from these here; Model::load checks each against the weights.
  c.hidden_size = r.dimension("hidden_size", r.req_int("hidden_size", hint));
  c.intermediate_size = r.dimension("intermediate_size", r.req_int("intermediate_size", hint));
  c.n_layers = r.dimension("num_hidden_layers", r.req_int("num_hidden_layers", hint));
  c.n_heads = r.dimension("num_attention_heads", r.req_int("num_attention_heads", hint));
  c.n_kv_heads = r.dimension("num_key_value_heads", r.opt_int("num_key_value_heads").value_or(c.n_heads));
  c.vocab_size = r.dimension("vocab_size", r.req_int("vocab_size", hint));
  c.max_position_embeddings =
      r.dimension("max_position_embeddings", r.req_int("max_position_embeddings", hint));
  c.rms_norm_eps = r.positive("rms_norm_eps", r.opt_num("rms_norm_eps").value_or(1e-6));
  if (auto hd = r.opt_int("head_dim")) {
    c.head_dim = r.dimension("head_dim", *hd);
  } else {
    if (c.hidden_size % c.n_heads != 0)
      r.fail(ErrorCode::format, "hidden_size " + std::to_string(c.hidden_size) +
                                    " is not divisible by num_attention_heads " + std::to_string(c.n_heads) +
                                    " and 'head_dim' is not given - add \"head_dim\" or fix the sizes");
    c.head_dim = c.hidden_size / c.n_heads;
  }
  // The q / o projections have num_attention_heads x head_dim rows; k / v have
  // num_key_value_heads x head_dim (not larger, as the heads are a multiple).
  const std::optional<int64_t> q_rows = checked_mul(c.n_heads, c.head_dim);
  if (!q_rows || *q_rows > kMaxDimension)
    r.fail(ErrorCode::format, "num_attention_heads " + std::to_string(c.n_heads) + " x head_dim " +
                                  std::to_string(c.head_dim) + (q_rows ? " = " + std::to_string(*q_rows) : "") +
                                  " is more than reach handles (" + std::to_string(kMaxDimension) +
                                  ") - fix num_attention_heads or head_dim");
  if (c.n_heads % c.n_kv_heads != 0)
    r.fail(ErrorCode::format, "num_attention_heads " + std::to_string(c.n_heads) +
                                  " is not a multiple of num_key_value_heads " + std::to_string(c.n_kv_heads) +
                                  " (grouped-query attention shares each KV head among a whole group of heads)");

  if (auto act = r.opt_str("hidden_act"); !gemma && act && *act != "silu" && *act != "swish")
    r.fail(ErrorCode::unsupported, "hidden_act \"" + *act + "\" is not supported; reach's MLP is SiLU-gated (\"silu\")");
  if (r.opt_bool("mlp_bias").value_or(false))
    r.fail(ErrorCode::unsupported, "'mlp_bias' is true; reach's MLP has no bias terms yet - use a model without "
                                   "MLP biases");
  c.attention_bias = r.opt_bool("attention_bias").value_or(c.model_type == "qwen2");
  c.tie_word_embeddings = r.opt_bool("tie_word_embeddings").value_or(gemma);   // Gemma's default is tied
  c.torch_dtype = r.opt_str("torch_dtype").value_or(r.opt_str("dtype").value_or(""));
  if (gemma3) parse_gemma3(r, c);
  if (gemma2) parse_gemma2(r, c);
  if (c.model_type == "qwen3") {
    c.arch = ModelArch::qwen3;
    c.qk_head_norm = true;
  } else if (c.model_type == "phi3") {
    c.arch = ModelArch::phi3;
    c.fused_qkv = c.fused_gate_up = true;
  } else if (c.model_type == "olmo2") {
    c.arch = ModelArch::olmo2;
    c.pre_norms = false;
    c.post_norms = true;
    c.qk_proj_norm = true;
  } else if (c.model_type == "smollm3") {
    c.arch = ModelArch::smollm3;
  } else if (c.model_type == "qwen3_moe") {
    c.arch = ModelArch::qwen3_moe;
    c.qk_head_norm = true;
  } else if (c.model_type == "mixtral") {
    c.arch = ModelArch::mixtral;
  } else if (c.model_type == "olmoe") {
    c.arch = ModelArch::olmoe;
    c.qk_proj_norm = true;
  }
  if (c.arch == ModelArch::qwen3_moe || c.arch == ModelArch::mixtral || c.arch == ModelArch::olmoe) parse_moe(r, c);

  // Sliding window (Mistral; Qwen2 only with use_sliding_window).
  if (auto sw = r.opt_int("sliding_window"); sw && !gemma) {   // Gemma's is its local layers'
    r.positive("sliding_window", *sw);
    if (c.model_type == "qwen2" || c.model_type == "qwen3" || c.model_type == "smollm3" ||
        c.model_type == "qwen3_moe") {
      if (r.opt_bool("use_sliding_window").value_or(false)) {
        const int64_t mwl = r.opt_int("max_window_layers").value_or(c.n_layers);
        if (mwl < c.n_layers)
          r.fail(ErrorCode::unsupported, "use_sliding_window with max_window_layers=" + std::to_string(mwl) +
                                             " < num_hidden_layers (a per-layer window) is not supported yet");
      }
      // Otherwise HF ignores sliding_window for Qwen2 and so do we.
    } else {
      c.sliding_window = *sw;
    }
  }

  // Position encoding: v5 rope_parameters, else v4 rope_scaling.
  const char* rope_key = r.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const json* rope_obj = r.find(rope_key);
  // Gemma under v5: rope_parameters per layer kind; the global layers' is the model's scheme.
  if (gemma && rope_obj && rope_obj->is_object() && rope_obj->contains("full_attention")) {
    Reader rp{*rope_obj, where + ": " + rope_key};
    if (const json* sl = rp.find("sliding_attention"); sl && sl->is_object()) {
      Reader rs{*sl, where + ": " + rope_key + ".sliding_attention"};
      if (auto t = rs.opt_num("rope_theta")) c.rope_local_theta = rs.positive("rope_theta", *t);
    }
    rope_obj = rp.find("full_attention");
  }
  if (rope_obj) c.rope = parse_rope_scaling(*rope_obj, where + ": " + rope_key);
  std::optional<double> theta, prf;
  if (rope_obj && rope_obj->is_object()) {
    Reader rr{*rope_obj, where + ": " + rope_key};
    theta = rr.opt_num("rope_theta");
    prf = rr.opt_num("partial_rotary_factor");
  }
  if (!theta) theta = r.opt_num("rope_theta");
  if (!prf) prf = r.opt_num("partial_rotary_factor");
  c.rope_theta = r.positive("rope_theta", theta.value_or(10000.0));
  c.partial_rotary_factor = prf.value_or(1.0);
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    r.fail(ErrorCode::format, "'partial_rotary_factor' is " + json(c.partial_rotary_factor).dump() +
                                  ", must be in (0, 1]");
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  if (gemma2) c.rope_local_theta = c.rope_theta;   // Gemma 2: one base for local and global layers
  if (c.rope.type == RopeType::longrope) {
    // Phi-3 keeps the trained context at the top level (transformers gives it priority).
    if (auto o = r.opt_int("original_max_position_embeddings"))
      c.rope.original_max_position = r.dimension("original_max_position_embeddings", *o);
    if (c.rope.original_max_position <= 0)
      r.missing("original_max_position_embeddings", "rope_type \"longrope\" switches from short_factor to "
                                                    "long_factor beyond the trained context it names");
  }
  if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0)
    r.fail(ErrorCode::format, "head_dim " + std::to_string(c.head_dim) + " x partial_rotary_factor " +
                                  json(c.partial_rotary_factor).dump() + " = " + std::to_string(c.rotary_dim) +
                                  " rotary dims; RoPE needs an even number >= 2");

  if (c.rope.type == RopeType::longrope && c.rope.short_factor.size() != size_t(c.rotary_dim / 2))
    r.fail(ErrorCode::format, std::string(rope_key) + ".short_factor / long_factor have " +
                                  std::to_string(c.rope.short_factor.size()) + " entries; the model rotates " +
                                  std::to_string(c.rotary_dim) + " dims, so they need " +
                                  std::to_string(c.rotary_dim / 2));

  c.attn = parse_reach_attention(j.contains("reach_attention") ? j["reach_attention"] : json(),
                                 where + ": reach_attention", c.n_layers, c.sliding_window.has_value());
  if (c.model_type == "smollm3") {
    // The model's own NoPE layers, as reach_attention's per-layer "rope": false (a layer the
    // reach_attention object already sets keeps its setting).
    const std::vector<bool> nope = parse_nope_layers(r, c.n_layers);
    for (int64_t i = 0; i < c.n_layers; ++i)
      if (nope[size_t(i)] && !c.attn.layers[int(i)].rope) c.attn.layers[int(i)].rope = false;
    for (auto it = c.attn.layers.begin(); it != c.attn.layers.end();)   // drop the empty entries made above
      it = !it->second.rope && !it->second.window && !it->second.logn ? c.attn.layers.erase(it) : std::next(it);
  }

  c.bos_ids = parse_token_ids(r, "bos_token_id", c.vocab_size);
  c.eos_ids = parse_token_ids(r, "eos_token_id", c.vocab_size);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& path_in) {
  std::filesystem::path path = path_in;
  std::error_code ec;
  // A model directory holds config.json; a path named config.json is the file
  // itself, even when it is (wrongly) a directory: read_file says so.
  if (path.filename() != "config.json" && std::filesystem::is_directory(path, ec)) path /= "config.json";
  const std::string text =
      read_file(path, file_kinds::config_json, " - pass the model directory that holds config.json");
  json j;
  try {
    j = parse_json_bounded(text, kMaxConfigDepth);
  } catch (const JsonTooLarge& e) {
    throw Error(ErrorCode::format, "config.json (" + path.string() + "): JSON " + e.what() + " - not a model config");
  } catch (const json::exception& e) {
    throw Error(ErrorCode::format, "config.json (" + path.string() + "): not valid JSON (" + e.what() +
                                       ") - fix or download the file again");
  }
  return parse_model_config(j, path);
}

std::string ModelConfig::describe() const {
  std::ostringstream o;
  o << family() << ", " << architecture << " (" << model_type << "): " << n_layers << " layers, hidden " << hidden_size << ", ffn "
    << intermediate_size << ", heads " << n_heads << " (kv " << n_kv_heads << ") x " << head_dim << ", vocab "
    << vocab_size << ", trained context " << max_position_embeddings << "\n";
  o << "  rope: " << rope_type_name(rope.type) << ", theta " << rope_theta << ", rotary dims " << rotary_dim;
  switch (rope.type) {
    case RopeType::linear: case RopeType::dynamic: case RopeType::ntk: o << ", factor " << rope.factor; break;
    case RopeType::yarn:
      o << ", factor " << rope.factor << ", beta " << rope.beta_fast << "/" << rope.beta_slow;
      if (rope.attention_factor) o << ", attention_factor " << *rope.attention_factor;
      break;
    case RopeType::llama3:
      o << ", factor " << rope.factor << ", low/high " << rope.low_freq_factor << "/" << rope.high_freq_factor;
      break;
    case RopeType::longrope:
      o << ", " << rope.short_factor.size() << " short / long factors";
      if (rope.factor > 0) o << ", factor " << rope.factor;
      if (rope.attention_factor) o << ", attention_factor " << *rope.attention_factor;
      break;
    case RopeType::rerope: o << ", window " << rope.window; break;
    case RopeType::leaky_rerope: o << ", window " << rope.window << ", k " << rope.leaky_k; break;
    case RopeType::self_extend: o << ", group " << rope.group << ", window " << rope.window; break;
    default: break;
  }
  if (rope.original_max_position) o << ", original context " << rope.original_max_position;
  if (!rope_freq_factors.empty())
    o << ", " << rope_freq_factors.size() << " per-frequency factors (rope_freqs.weight)";
  o << "\n  rms_norm_eps " << rms_norm_eps << ", attention_bias " << (attention_bias ? "yes" : "no")
    << ", tied embeddings " << (tie_word_embeddings ? "yes" : "no");
  if (sliding_window) o << ", sliding_window " << *sliding_window;
  if (!window_note.empty()) o << "\n  " << window_note;
  {
    std::vector<std::string> parts;
    if (!pre_norms) parts.push_back("no pre-norms");
    if (post_norms) parts.push_back("norms after attention and MLP");
    if (qk_head_norm) parts.push_back("per-head q/k RMSNorm");
    if (qk_proj_norm) parts.push_back("q/k RMSNorm over the projection");
    if (fused_qkv) parts.push_back("fused qkv");
    if (fused_gate_up) parts.push_back("fused gate_up");
    if (attn_softcap > 0) parts.push_back("attention logit cap " + json(attn_softcap).dump());
    if (final_softcap > 0) parts.push_back("final logit cap " + json(final_softcap).dump());
    if (activation == Activation::gelu_tanh) parts.push_back("GELU(tanh) MLP");
    if (!parts.empty()) {
      o << "\n  layers:";
      for (size_t i = 0; i < parts.size(); ++i) o << (i ? ", " : " ") << parts[i];
    }
  }
  if (has_local_layers()) {
    const auto n_local = std::count(local_layers.begin(), local_layers.end(), true);
    o << "\n  local layers " << n_local << " of " << n_layers << " (window " << local_window << ", rope theta "
      << rope_local_theta << "), embed scale " << embed_scale << ", query scale "
      << (query_scale ? *query_scale : 1.0 / std::sqrt(double(head_dim)));
  }
  if (!torch_dtype.empty()) o << ", dtype " << torch_dtype;
  if (is_moe()) {
    const auto n_dense = std::count(dense_layers.begin(), dense_layers.end(), true);
    o << "\n  experts: " << n_experts << ", top-" << experts_per_token << " per token ("
      << (norm_topk_prob ? "weights renormalised" : "softmax weights as they are") << "), expert ffn "
      << expert_intermediate_size;
    if (n_dense > 0) o << ", " << n_dense << " dense layer" << (n_dense == 1 ? "" : "s");
    o << "\n  matrix parameters: " << matrix_params() << " total, " << matrix_params(true) << " active per token";
  }
  if (attn.logn_train_len || attn.qk_norm != QkNorm::none || attn.window || attn.sinks || !attn.layers.empty() ||
      attn.alibi_max_bias) {
    o << "\n  reach_attention:";
    if (attn.logn_train_len) o << " logn_train_len " << attn.logn_train_len;
    if (attn.qk_norm != QkNorm::none) o << " qk_norm " << qk_norm_name(attn.qk_norm);
    if (attn.cos_n) o << " cos_n " << *attn.cos_n;
    if (attn.window) o << " window " << attn.window;
    if (attn.sinks) o << " sinks " << attn.sinks;
    if (attn.alibi_max_bias) o << " alibi_max_bias " << *attn.alibi_max_bias;
    if (!attn.layers.empty()) o << " (" << attn.layers.size() << " layer overrides)";
  }
  return o.str();
}

}  // namespace reach
