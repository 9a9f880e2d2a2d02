#include "runtime/config/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/checked.hpp"
#include "base/error.hpp"
#include "runtime/config/config_reader.hpp"
#include "runtime/config/family_config.hpp"
#include "runtime/formats/file_read.hpp"
#include "runtime/formats/json_parse.hpp"

namespace reach {

using nlohmann::json;
using namespace config_detail;

namespace {

// A real config.json nests 3 levels (rope_scaling, reach_attention.layers.N).
constexpr int kMaxConfigDepth = 64;
constexpr const char* kSupportedArchs =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
    "Gemma2ForCausalLM, Gemma3ForCausalLM, Olmo2ForCausalLM, SmolLM3ForCausalLM, Qwen3MoeForCausalLM, "
    "MixtralForCausalLM, OlmoeForCausalLM, GptOssForCausalLM";
// Mixture-of-experts families reach refuses for now, and what they need that reach lacks.
constexpr std::pair<const char*, const char*> kUnsupportedMoe[] = {
    {"Qwen2MoeForCausalLM", "Qwen2-MoE's shared expert (with its own sigmoid gate) is not supported yet"},
    {"DeepseekV2ForCausalLM", "DeepSeek-V2's latent attention and shared experts are not supported yet"},
    {"DeepseekV3ForCausalLM", "DeepSeek-V3's latent attention and shared experts are not supported yet"},
};

}  // namespace

std::string ModelConfig::family() const {
  static const std::pair<const char*, const char*> kNames[] = {
      {"llama", "Llama"},   {"mistral", "Mistral"}, {"qwen2", "Qwen2"},       {"qwen3", "Qwen3"},
      {"phi3", "Phi-3"},    {"gemma2", "Gemma 2"},  {"gemma3_text", "Gemma 3"}, {"olmo2", "OLMo 2"},
      {"smollm3", "SmolLM3"}, {"qwen3_moe", "Qwen3-MoE"}, {"mixtral", "Mixtral"}, {"olmoe", "OLMoE"},
      {"gpt_oss", "gpt-oss"}};
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
      {"Qwen3MoeForCausalLM", "qwen3_moe"}, {"MixtralForCausalLM", "mixtral"}, {"OlmoeForCausalLM", "olmoe"},
      {"GptOssForCausalLM", "gpt_oss"},
      // The model without its head, as sentence-transformers saves an embedding model (Qwen3-Embedding).
      {"Qwen3Model", "qwen3"}};
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
                                         "olmo2, smollm3, qwen3_moe, mixtral, olmoe, gpt_oss)");
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
  c.attention_bias = r.opt_bool("attention_bias").value_or(c.model_type == "qwen2" || c.model_type == "gpt_oss");
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
  } else if (c.model_type == "gpt_oss") {
    c.arch = ModelArch::gpt_oss;
  }
  if (c.arch == ModelArch::qwen3_moe || c.arch == ModelArch::mixtral || c.arch == ModelArch::olmoe ||
      c.arch == ModelArch::gpt_oss)
    parse_moe(r, c);
  if (c.arch == ModelArch::gpt_oss) parse_gpt_oss(r, c);
  // A quantized checkpoint: only openai's MXFP4 experts (kept MXFP4 on the device) are read; the others'
  // tensors are packed in ways the loader would misread.
  if (const json* q = r.find("quantization_config")) {
    Reader rq{*q, where + ": quantization_config"};
    if (!q->is_object()) r.wrong_type("quantization_config", *q, "an object");
    const std::string method = rq.opt_str("quant_method").value_or("");
    if (!(method == "mxfp4" && c.arch == ModelArch::gpt_oss))
      r.fail(ErrorCode::unsupported,
             "quantization_config: the checkpoint is quantized with quant_method \"" + method + "\", which reach "
             "does not read (it reads gpt-oss's \"mxfp4\" experts); use the unquantized checkpoint (and "
             "--quantize q8_0|q4_0|q4_k), or a GGUF of the model");
  }

  // Sliding window (Mistral; Qwen2 only with use_sliding_window).
  // Gemma's and gpt-oss's window is their local layers'.
  if (auto sw = r.opt_int("sliding_window"); sw && !gemma && c.arch != ModelArch::gpt_oss) {
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
  if (c.arch == ModelArch::gpt_oss) c.local_rope = c.rope;
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
  // Gemma 2, gpt-oss: one base for local and global layers
  if (gemma2 || c.arch == ModelArch::gpt_oss) c.rope_local_theta = c.rope_theta;
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
      if (!rope.truncate) o << ", ramp not truncated";
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
    if (activation == Activation::swiglu_clamped) {
      std::ostringstream s;
      s << "clamped SwiGLU (alpha " << swiglu_alpha << ", limit " << swiglu_limit << ")";
      parts.push_back(s.str());
    }
    if (attn_sinks) parts.push_back("a learned attention sink logit per head");
    if (!parts.empty()) {
      o << "\n  layers:";
      for (size_t i = 0; i < parts.size(); ++i) o << (i ? ", " : " ") << parts[i];
    }
  }
  if (has_local_layers()) {
    const auto n_local = std::count(local_layers.begin(), local_layers.end(), true);
    o << "\n  local layers " << n_local << " of " << n_layers << " (window " << local_window << ", rope theta "
      << rope_local_theta << (local_rope.type == RopeType::yarn ? ", YaRN as the global layers" : "") << ")";
    if (embed_scale != 0) o << ", embed scale " << embed_scale;
    o << ", query scale " << (query_scale ? *query_scale : 1.0 / std::sqrt(double(head_dim)));
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
