#include "runtime/config/tensor_names.hpp"

namespace reach {

HfNaming hf_naming_of(const std::function<bool(const std::string& name)>& has) {
  HfNaming n;
  if (has("model.embed_tokens.weight")) return n;
  if (has("embed_tokens.weight")) {   // a bare base model (Qwen3Model of an embedding model): no prefix
    n.model = "";
    n.lm_head = "";   // and no head: the embeddings stand in (an embedding model reads no logits)
    return n;
  }
  for (const char* pre : {"language_model.model.", "model.language_model."})
    if (has(std::string(pre) + "embed_tokens.weight")) {
      n.model = pre;
      n.lm_head = n.model == "language_model.model." ? "language_model.lm_head.weight" : "lm_head.weight";
    }
  return n;
}

std::string hf_tensor_name(Role role, int64_t layer, const HfNaming& n) {
  const std::string p = n.model + "layers." + std::to_string(layer) + ".";
  switch (role) {
    case Role::embed: return n.model + "embed_tokens.weight";
    case Role::final_norm: return n.model + "norm.weight";
    case Role::lm_head: return n.lm_head;
    case Role::attn_norm: return p + "input_layernorm.weight";
    // Gemma's post_attention_layernorm follows attention; its MLP norm is pre_feedforward_layernorm.
    case Role::mlp_norm: return p + (n.gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
    case Role::post_attn_norm: return p + "post_attention_layernorm.weight";
    case Role::post_mlp_norm: return p + "post_feedforward_layernorm.weight";
    case Role::q_norm: return p + "self_attn.q_norm.weight";
    case Role::k_norm: return p + "self_attn.k_norm.weight";
    case Role::q: return p + "self_attn.q_proj.weight";
    case Role::k: return p + "self_attn.k_proj.weight";
    case Role::v: return p + "self_attn.v_proj.weight";
    case Role::o: return p + "self_attn.o_proj.weight";
    case Role::q_bias: return p + "self_attn.q_proj.bias";
    case Role::k_bias: return p + "self_attn.k_proj.bias";
    case Role::v_bias: return p + "self_attn.v_proj.bias";
    case Role::o_bias: return p + "self_attn.o_proj.bias";
    case Role::gate: return p + "mlp.gate_proj.weight";
    case Role::up: return p + "mlp.up_proj.weight";
    case Role::down: return p + "mlp.down_proj.weight";
    case Role::qkv: return p + "self_attn.qkv_proj.weight";
    case Role::gate_up: return p + "mlp.gate_up_proj.weight";
    case Role::router: return p + n.moe_block + ".gate.weight";
    case Role::expert_gate_up: return p + n.moe_block + ".experts.gate_up_proj";
    case Role::expert_down: return p + n.moe_block + ".experts.down_proj";
    case Role::expert_gate: case Role::expert_up: return {};   // only per expert, or fused as gate_up
    case Role::attn_sinks: return p + "self_attn.sinks";
  }
  return {};
}

std::string hf_expert_tensor_name(Role role, int64_t layer, int64_t expert, const HfNaming& n) {
  const bool w123 = n.moe_block == "block_sparse_moe";
  const char* what = role == Role::expert_gate ? (w123 ? "w1" : "gate_proj")
                     : role == Role::expert_up ? (w123 ? "w3" : "up_proj")
                                               : (w123 ? "w2" : "down_proj");
  return n.model + "layers." + std::to_string(layer) + "." + n.moe_block + ".experts." + std::to_string(expert) +
         "." + what + ".weight";
}

std::string gguf_tensor_name(Role role, int64_t layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  switch (role) {
    case Role::embed: return "token_embd.weight";
    case Role::final_norm: return "output_norm.weight";
    case Role::lm_head: return "output.weight";
    case Role::attn_norm: return p + "attn_norm.weight";
    case Role::mlp_norm: return p + "ffn_norm.weight";
    case Role::q: return p + "attn_q.weight";
    case Role::k: return p + "attn_k.weight";
    case Role::v: return p + "attn_v.weight";
    case Role::o: return p + "attn_output.weight";
    case Role::q_bias: return p + "attn_q.bias";
    case Role::k_bias: return p + "attn_k.bias";
    case Role::v_bias: return p + "attn_v.bias";
    case Role::o_bias: return p + "attn_output.bias";
    case Role::gate: return p + "ffn_gate.weight";
    case Role::up: return p + "ffn_up.weight";
    case Role::down: return p + "ffn_down.weight";
    case Role::q_norm: return p + "attn_q_norm.weight";
    case Role::k_norm: return p + "attn_k_norm.weight";
    case Role::post_attn_norm: return p + "post_attention_norm.weight";
    case Role::post_mlp_norm: return p + "post_ffw_norm.weight";
    case Role::qkv: return p + "attn_qkv.weight";
    case Role::gate_up: return p + "ffn_up.weight";   // llama.cpp's phi3 keeps gate and up fused here
    case Role::router: return p + "ffn_gate_inp.weight";
    case Role::expert_gate: return p + "ffn_gate_exps.weight";
    case Role::expert_up: return p + "ffn_up_exps.weight";
    case Role::expert_down: return p + "ffn_down_exps.weight";
    case Role::expert_gate_up: return {};   // llama.cpp keeps gate and up apart
    case Role::attn_sinks: return p + "attn_sinks.weight";
  }
  return {};
}

}  // namespace reach
