#include "runtime/session/forward.hpp"

namespace reach {

ForwardCounts record_forward(CommandList& cmd, const Model& model, const ModelConfig& c, const ForwardBuffers& b,
                             uint32_t n, uint32_t logits_rows, const ForwardAttention& attention) {
  Kernels K(model.device());
  const uint32_t H = uint32_t(c.hidden_size), d = uint32_t(c.head_dim), qd = uint32_t(c.n_heads) * d,
                 kvd = uint32_t(c.n_kv_heads) * d, I = uint32_t(c.intermediate_size), V = uint32_t(c.vocab_size);
  const float eps = float(c.rms_norm_eps);
  Act x{b.x, 0, n, H}, h{b.h, 0, n, H}, q{b.q, 0, n, qd}, k{b.k, 0, n, kvd}, v{b.v, 0, n, kvd},
      o{b.o, 0, n, qd}, g{b.g, 0, n, I}, u{b.u, 0, n, I};

  K.embed(cmd, model.embed(), b.ids->range(0, uint64_t(n) * 4), n, x);
  cmd.barrier();
  if (c.embed_scale != 0) {   // Gemma: embeddings x sqrt(hidden)
    K.elementwise_scale(cmd, x.range(), x.range(), n * H, c.embed_scale);
    cmd.barrier();
  }
  const auto& layers = model.layers();
  const uint32_t d0 = cmd.dispatch_count(), b0 = cmd.barrier_count();
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerWeights& w = layers[l];
    // OLMo 2 has no norm before attention or the MLP: the projections read the residual stream itself.
    const Act& in_attn = w.attn_norm ? h : x;
    if (w.attn_norm) {
      K.norm_rms(cmd, x, w.attn_norm.range(), h, eps);
      cmd.barrier();
    }
    K.linear(cmd, in_attn, w.q, q);
    K.linear(cmd, in_attn, w.k, k);
    K.linear(cmd, in_attn, w.v, v);
    cmd.barrier();
    if (w.q_bias) {
      K.elementwise_add(cmd, q.range(), w.q_bias.range(), q.range(), n * qd, qd);
      K.elementwise_add(cmd, k.range(), w.k_bias.range(), k.range(), n * kvd, kvd);
      K.elementwise_add(cmd, v.range(), w.v_bias.range(), v.range(), n * kvd, kvd);
      cmd.barrier();
    }
    if (w.q_norm && c.qk_proj_norm) {   // OLMo 2: RMSNorm over each token's whole q and k, in place
      K.norm_rms(cmd, q, w.q_norm.range(), q, eps);
      K.norm_rms(cmd, k, w.k_norm.range(), k, eps);
      cmd.barrier();
    } else if (w.q_norm) {   // per-head RMSNorm of q and k (Gemma 3, Qwen3), before the rotation, in place
      Act qh{b.q, 0, n * uint32_t(c.n_heads), d}, kh{b.k, 0, n * uint32_t(c.n_kv_heads), d};
      K.norm_rms(cmd, qh, w.q_norm.range(), qh, eps);
      K.norm_rms(cmd, kh, w.k_norm.range(), kh, eps);
      cmd.barrier();
    }
    attention.store(cmd, l, k, v);
    cmd.barrier();
    attention.attend(cmd, l, q, o);
    cmd.barrier();
    Act t{b.h, 0, n, H};
    K.linear(cmd, o, w.o, t);
    cmd.barrier();
    if (w.o_bias) {
      K.elementwise_add(cmd, t.range(), w.o_bias.range(), t.range(), n * H, H);
      cmd.barrier();
    }
    if (w.post_attn_norm) {   // Gemma: normalise the attention output before the residual add
      K.norm_rms(cmd, t, w.post_attn_norm.range(), t, eps);
      cmd.barrier();
    }
    K.elementwise_add(cmd, x.range(), t.range(), x.range(), n * H, n * H);
    cmd.barrier();
    const Act& in_mlp = w.mlp_norm ? h : x;
    if (w.mlp_norm) {
      K.norm_rms(cmd, x, w.mlp_norm.range(), h, eps);
      cmd.barrier();
    }
    K.linear(cmd, in_mlp, w.gate, g);
    K.linear(cmd, in_mlp, w.up, u);
    cmd.barrier();
    if (c.activation == Activation::gelu_tanh) K.elementwise_gelu_tanh_mul(cmd, g.range(), u.range(), g.range(), n * I);
    else K.elementwise_silu_mul(cmd, g.range(), u.range(), g.range(), n * I);
    cmd.barrier();
    K.linear(cmd, g, w.down, t);
    cmd.barrier();
    if (w.post_mlp_norm) {
      K.norm_rms(cmd, t, w.post_mlp_norm.range(), t, eps);
      cmd.barrier();
    }
    K.elementwise_add(cmd, x.range(), t.range(), x.range(), n * H, n * H);
    cmd.barrier();
  }
  const ForwardCounts counts{cmd.dispatch_count() - d0, cmd.barrier_count() - b0};
  // Only the rows whose logits are wanted go through the final norm and lm_head.
  const uint32_t rows = logits_rows;
  Act xr{b.x, uint64_t(n - rows) * H * 4, rows, H}, hr{b.h, 0, rows, H}, lg{b.logits, 0, rows, V};
  K.norm_rms(cmd, xr, model.final_norm().range(), hr, eps);
  cmd.barrier();
  K.linear(cmd, hr, model.lm_head(), lg);
  if (c.final_softcap > 0) {   // Gemma 2: cap * tanh(logit / cap)
    cmd.barrier();
    K.elementwise_softcap(cmd, lg.range(), lg.range(), rows * V, float(c.final_softcap));
  }
  return counts;
}

}  // namespace reach
