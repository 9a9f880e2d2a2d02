#pragma once
// config.json of a Hugging Face checkpoint of a family reach runs (Llama, Mistral, Qwen2/3, Phi-3, Gemma 2/3,
// OLMo 2, SmolLM3, and the mixtures of experts Qwen3-MoE, Mixtral, OLMoE), plus the
// reach-only position schemes (docs/EXTRAPOLATION.md §1.4, §2, §3).  This
// module parses and validates; the kernels live elsewhere.  Every error is a
// reach::Error whose message starts with "config.json (PATH):" and names the
// key at fault.
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/attention_spec.hpp"   // QkNorm
#include "runtime/config/rope_types.hpp"

namespace reach {

struct RopeScaling {
  RopeType type = RopeType::default_;
  double factor = 1;                     // linear / dynamic / yarn / llama3 / ntk s
  int64_t original_max_position = 0;     // 0 = use max_position_embeddings
  double beta_fast = 32, beta_slow = 1;  // yarn
  std::optional<double> attention_factor, mscale, mscale_all_dim;   // yarn
  bool truncate = true;                                             // yarn
  double low_freq_factor = 1, high_freq_factor = 4;                 // llama3
  // longrope (Phi-3 / Phi-4-mini): per-pair divisors of the frequencies, the short set while the sequence
  // fits original_max_position, the long one beyond it; rotary_dim / 2 entries each.
  std::vector<double> short_factor, long_factor;
  int64_t window = 0;   // rerope / leaky_rerope / self_extend (W_n)
  double leaky_k = 1;   // leaky_rerope (JSON key "factor")
  int64_t group = 1;    // self_extend (G)
};

struct LayerAttention {   // per-layer overrides of ReachAttention
  std::optional<int64_t> window;
  std::optional<bool> rope;
  std::optional<bool> logn;
};

struct ReachAttention {   // top-level "reach_attention" object
  int64_t logn_train_len = 0;   // 0 = no log-n scaling
  QkNorm qk_norm = QkNorm::none;
  std::optional<double> cos_n;
  int64_t window = 0;           // sliding window for every layer, 0 = none
  int64_t sinks = 0;            // attention-sink tokens kept with a window
  std::map<int, LayerAttention> layers;
  std::optional<double> alibi_max_bias;
};

// The layer family a config describes.  The forward reads the feature fields of ModelConfig (norms, softcaps,
// fused weights ...), not this: it names the family, its tensor names, and llama.cpp's q/k row order.
enum class ModelArch {
  llama,     // Llama / Mistral / Qwen2: pre-norms, SiLU-gated MLP
  qwen3,     // Qwen3: Llama plus per-head q/k RMSNorm
  phi3,      // Phi-3 / 3.5 / 4-mini: fused qkv and gate_up projections, LongRoPE, partial rotary
  gemma2,    // Gemma 2: Gemma norms, attention and final logit soft-capping, alternating sliding window
  gemma3,    // Gemma 3: norms before and after attention and MLP, GELU(tanh)-gated MLP, per-head q/k RMSNorm,
             // embeddings x sqrt(hidden), local (sliding-window) and global layers with two rotary bases
  olmo2,     // OLMo 2: norms after attention and after the MLP only, q/k RMSNorm over the whole projection
  smollm3,   // SmolLM3: Llama with NoPE (no rotation) on every fourth layer
  qwen3_moe, // Qwen3-MoE: Qwen3 attention, a routed mixture of SiLU-gated experts (some layers may stay dense)
  mixtral,   // Mixtral: Mistral attention, top-2 of 8 experts, softmax over the chosen logits
  olmoe,     // OLMoE: Llama layout, q/k RMSNorm over the whole projection (like OLMo 2), top-8 of 64 experts
  gpt_oss,   // gpt-oss: biased attention with a learned per-head sink logit, alternating 128-token sliding and
             // full layers, YaRN on both, biased router and experts with the clamped SwiGLU
};
// The gate of the gated MLP (the experts' too).  swiglu_clamped (gpt-oss): g = min(gate, limit),
// u = clamp(up, -limit, limit), out = (u + 1) * g * sigmoid(alpha * g).
enum class Activation { silu, gelu_tanh, swiglu_clamped };

struct ModelConfig {
  std::string architecture;   // "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Gemma3ForCausalLM"
  std::string model_type;     // "llama", "mistral", "qwen2", "gemma3_text"
  ModelArch arch = ModelArch::llama;
  Activation activation = Activation::silu;
  double swiglu_alpha = 1.702, swiglu_limit = 7.0;   // Activation::swiglu_clamped
  int64_t hidden_size = 0, intermediate_size = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0,
          vocab_size = 0, max_position_embeddings = 0;
  double rms_norm_eps = 1e-6, rope_theta = 10000, partial_rotary_factor = 1;
  int64_t rotary_dim = 0;     // int(head_dim * partial_rotary_factor), even
  bool tie_word_embeddings = false;
  // Bias on q/k/v projections.  Llama-style attention_bias=true also has an
  // o_proj bias; Qwen2 (always true) does not: check the weights for it.
  bool attention_bias = false;
  std::optional<int64_t> sliding_window;   // Mistral: every layer
  // Gemma 3 ------------------------------------------------------------------------------------------
  // Added to every norm weight at load: Gemma's RMSNorm multiplies by (1 + w); Hugging Face files store w
  // (offset 1), llama.cpp's converter already stored 1 + w (offset 0).
  double norm_weight_offset = 0;
  bool post_norms = false;        // a norm after attention and after the MLP, before each residual add
  bool qk_head_norm = false;      // RMSNorm of every q and k head (head_dim wide) before the rotation
  bool qk_proj_norm = false;      // OLMo 2: RMSNorm of the whole q and k projections (heads x head_dim wide)
  bool pre_norms = true;          // a norm before attention and before the MLP (all but OLMo 2)
  // Phi-3: q/k/v in one qkv_proj matrix, gate and up in one gate_up_proj; split by rows at load.
  bool fused_qkv = false, fused_gate_up = false;
  // Gemma 2: score' = cap * tanh(score / cap) on the attention logits (before the softmax) and on the final
  // logits; 0 = none.
  double attn_softcap = 0, final_softcap = 0;
  // llama.cpp's rope_freqs.weight (Llama 3.1 / 3.2 GGUFs): every frequency of the global layers is divided
  // by its factor, on top of the rope type; empty = none.
  std::vector<double> rope_freq_factors;
  // A sliding window the source could not carry (Mistral in a GGUF: llama.cpp's converter drops it); said by
  // describe() so the user can restore it with --attn-window.
  std::string window_note;
  // llama.cpp's converter permuted the q/k rows of this GGUF (llama, smollm3): the loader moves them back.
  bool interleaved_qk_rows = false;
  float embed_scale = 0;          // embeddings x this (sqrt(hidden) as the source rounds it); 0 = none
  std::optional<double> query_scale;   // logit scale (query_pre_attn_scalar^-0.5); none = 1/sqrt(head_dim)
  // Local layers: local_layers[i] marks a sliding-window layer (window local_window, rotary base
  // rope_local_theta, never rope scaling); empty = every layer is global.
  std::vector<bool> local_layers;
  int64_t local_window = 0;
  double rope_local_theta = 10000;
  // The local layers' rope scaling: none, except gpt-oss's, which rotates every layer with the model's own YaRN
  // (kept here as the config has it, whatever scheme the user then gives the global layers).
  RopeScaling local_rope;
  bool has_local_layers() const;
  // Mixture of experts (0 experts: a dense model).  A router (logits = x · W_routerᵀ) picks experts_per_token
  // of n_experts per token: softmax over all logits, the top k (larger first, the lower index on ties), their
  // probabilities renormalised to sum 1 when norm_topk_prob (Mixtral: always, the softmax over the chosen).
  // Each expert is a SiLU-gated MLP of expert_intermediate_size; the MLP output is the weighted sum.
  int64_t n_experts = 0, experts_per_token = 0, expert_intermediate_size = 0;
  bool norm_topk_prob = false;
  std::vector<bool> dense_layers;
  // gpt-oss: a learned sink logit per head joins every attention softmax's denominator (LayerWeights::attn_sinks).
  bool attn_sinks = false;   // dense_layers[l]: layer l has the dense MLP (Qwen3-MoE's mlp_only_layers)
  bool is_moe() const { return n_experts > 0; }
  bool moe_layer(int64_t l) const { return is_moe() && !(size_t(l) < dense_layers.size() && dense_layers[size_t(l)]); }
  // Elements of the weight matrices (embedding, head, attention, MLPs, routers, experts) as the config sizes
  // them; active: those one token reads (experts_per_token of each sparse layer's experts).  Norms and biases
  // are left out.
  uint64_t matrix_params(bool active = false) const;
  std::vector<int32_t> bos_ids, eos_ids;
  std::string torch_dtype;                 // informational ("bfloat16"), may be empty
  RopeScaling rope;
  ReachAttention attn;
  std::filesystem::path source;            // the config.json read, for messages
  std::string describe() const;            // a few human-readable lines
  std::string family() const;              // "Llama", "Qwen2", "Phi-3", "Gemma 2", ... for messages
};

// `config_json` is the file or the model directory holding config.json.
ModelConfig load_model_config(const std::filesystem::path& config_json);
ModelConfig parse_model_config(const nlohmann::json& j, const std::filesystem::path& source_for_messages);

// Parses one rope_scaling / rope_parameters object (HF or reach keys).
// `where` prefixes messages, e.g. "config.json (/m/config.json): rope_scaling"
// or "--rope-scaling".  A null object gives the default.
RopeScaling parse_rope_scaling(const nlohmann::json& obj, const std::string& where);
// Parses the "reach_attention" object; n_layers bounds the layer indices.
// model_window: the config has a sliding_window, so 'sinks' may go with it
// (without any window, sinks > 0 is an error).
ReachAttention parse_reach_attention(const nlohmann::json& obj, const std::string& where, int64_t n_layers,
                                     bool model_window = false);

}  // namespace reach
