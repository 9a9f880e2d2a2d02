#pragma once
// What each weight is called in each source: the Hugging Face (transformers)
// names of a safetensors folder and llama.cpp's GGUF names, by role.  The one
// table the loader (runtime/model) and `reach quantize` (runtime/quant) read.
#include <cstdint>
#include <functional>
#include <string>

namespace reach {

// The weights the forward reads, by role (a format maps them to its tensor names).
enum class Role { embed, attn_norm, q, k, v, o, q_bias, k_bias, v_bias, o_bias, mlp_norm, gate, up, down,
                  final_norm, lm_head, q_norm, k_norm, post_attn_norm, post_mlp_norm,
                  qkv,        // Phi-3: q, k and v rows in one matrix
                  gate_up,    // Phi-3: gate rows then up rows in one matrix
                  // Mixture of experts: the router [n_experts, hidden]; the experts' matrices as one 3-D tensor
                  // [n_experts, rows, cols] (GGUF: ffn_*_exps; transformers 5's fused gate_up_proj / down_proj),
                  // or one tensor per expert (transformers 4: hf_expert_tensor_name).
                  router, expert_gate, expert_up, expert_down, expert_gate_up,
                  attn_sinks   // gpt-oss: the learned sink logit per head [n_heads]
};

// How a safetensors checkpoint names its tensors.
struct HfNaming {
  std::string model = "model.";          // prefix of embed_tokens / layers / norm ("language_model.model." ...)
  std::string lm_head = "lm_head.weight";
  bool gemma = false;                    // Gemma: the MLP's norm is pre_feedforward_layernorm
  // Where a layer's experts live: "mlp" (Qwen3-MoE, OLMoE, transformers 5) or "block_sparse_moe" (Mixtral
  // under transformers 4, whose experts are w1 / w3 / w2 for gate / up / down).
  std::string moe_block = "mlp";
};

// The naming of a safetensors checkpoint whose tensors `has` reports: "model." and "lm_head.weight", or,
// where there is no model.embed_tokens.weight but a prefixed one, the language model's prefix of Gemma 3's
// multimodal checkpoints ("language_model.model." with "language_model.lm_head.weight", or
// "model.language_model." with "lm_head.weight"), or a bare base model's "embed_tokens.weight" (no prefix,
// lm_head "": none).  The other fields keep their defaults.
HfNaming hf_naming_of(const std::function<bool(const std::string& name)>& has);

// "model.layers.3.self_attn.q_proj.weight", ...  `layer` is ignored for the model-wide roles.
std::string hf_tensor_name(Role role, int64_t layer, const HfNaming& naming = {});
// One expert's matrix in the per-expert layout: "model.layers.3.mlp.experts.5.gate_proj.weight" (role expert_gate,
// expert_up or expert_down).
std::string hf_expert_tensor_name(Role role, int64_t layer, int64_t expert, const HfNaming& naming = {});
// "blk.3.attn_q.weight", ... as llama.cpp writes them.
std::string gguf_tensor_name(Role role, int64_t layer);

}  // namespace reach
