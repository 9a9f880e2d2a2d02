#include "runtime/session/forward.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "base/error.hpp"
#include "engine/device.hpp"

namespace reach {

namespace {

// One forward's kernels, buffers and sizes; each method records one named step of a layer.
struct LayerRecorder {
  CommandList& cmd;
  Kernels K;
  // Prefill's expert linears: exact activations always, so each is the one dispatch the indirect group
  // counts (moe_group) were written for; the int8 path records a quantize pass before it.
  Kernels KX;
  const ModelConfig& c;
  const std::vector<LayerWeights>& layers;
  uint32_t n, H, d, qd, kvd, I;
  float eps;
  Act x, h, q, k, v, o, g, u;
  const ForwardBuffers& b;

  LayerRecorder(CommandList& cmd, const Model& model, const ModelConfig& c, const ForwardBuffers& b, uint32_t n,
                QuantActivations activations)
      : cmd(cmd), K(model.device(), kernel_config(model.device(), activations)),
        KX(model.device(), kernel_config(model.device(), QuantActivations::exact)), c(c), layers(model.layers()), n(n), H(uint32_t(c.hidden_size)), d(uint32_t(c.head_dim)),
        qd(uint32_t(c.n_heads) * d), kvd(uint32_t(c.n_kv_heads) * d), I(uint32_t(c.intermediate_size)),
        eps(float(c.rms_norm_eps)), x{b.x, 0, n, H}, h{b.h, 0, n, H}, q{b.q, 0, n, qd}, k{b.k, 0, n, kvd},
        v{b.v, 0, n, kvd}, o{b.o, 0, n, qd}, g{b.g, 0, n, I}, u{b.u, 0, n, I}, b(b) {
    K.use_scratch(model.allocator());   // the int8 path's Q8 activations
  }
  static KernelConfig kernel_config(Device& device, QuantActivations activations) {
    KernelConfig kc = KernelConfig::from(device.caps(), device.settings().kernels);
    kc.set_activations(activations, device.caps());
    return kc;
  }

  // --- unfused steps: one kernel per operation (prefill, and the reference for the fused ones) ---

  // q, k, v = (norm(x) or x) · W (+ bias).
  void qkv(const LayerWeights& w) {
    // OLMo 2 has no norm before attention or the MLP: the projections read the residual stream itself.
    const Act& in = w.attn_norm ? h : x;
    if (w.attn_norm) {
      K.norm_rms(cmd, x, w.attn_norm.range(), h, eps);
      cmd.barrier();
    }
    K.linear(cmd, in, w.q, q);
    K.linear(cmd, in, w.k, k);
    K.linear(cmd, in, w.v, v);
    cmd.barrier();
    if (w.q_bias) {
      K.elementwise_add(cmd, q.range(), w.q_bias.range(), q.range(), n * qd, qd);
      K.elementwise_add(cmd, k.range(), w.k_bias.range(), k.range(), n * kvd, kvd);
      K.elementwise_add(cmd, v.range(), w.v_bias.range(), v.range(), n * kvd, kvd);
      cmd.barrier();
    }
  }

  // RMSNorm of q and k before the rotation: per head (Gemma 3, Qwen3) or over the whole projection (OLMo 2).
  void qk_norms(const LayerWeights& w) {
    if (!w.q_norm) return;
    if (c.qk_proj_norm) {
      K.norm_rms(cmd, q, w.q_norm.range(), q, eps);
      K.norm_rms(cmd, k, w.k_norm.range(), k, eps);
    } else {
      Act qh{q.buffer, 0, n * uint32_t(c.n_heads), d}, kh{k.buffer, 0, n * uint32_t(c.n_kv_heads), d};
      K.norm_rms(cmd, qh, w.q_norm.range(), qh, eps);
      K.norm_rms(cmd, kh, w.k_norm.range(), kh, eps);
    }
    cmd.barrier();
  }

  // x += (post_norm of) o · W_o (+ bias).
  void output_residual(const LayerWeights& w) {
    Act t{h.buffer, 0, n, H};
    K.linear(cmd, o, w.o, t);
    cmd.barrier();
    if (w.o_bias) {
      K.elementwise_add(cmd, t.range(), w.o_bias.range(), t.range(), n * H, H);
      cmd.barrier();
    }
    post_norm_residual(w.post_attn_norm, t);
  }

  // x += MLP(norm(x)) with the gated activation (post-normed for Gemma).
  void mlp_residual(const LayerWeights& w) {
    const Act& in = w.mlp_norm ? h : x;
    if (w.mlp_norm) {
      K.norm_rms(cmd, x, w.mlp_norm.range(), h, eps);
      cmd.barrier();
    }
    K.linear(cmd, in, w.gate, g);
    K.linear(cmd, in, w.up, u);
    cmd.barrier();
    if (c.activation == Activation::gelu_tanh) K.elementwise_gelu_tanh_mul(cmd, g.range(), u.range(), g.range(), n * I);
    else K.elementwise_silu_mul(cmd, g.range(), u.range(), g.range(), n * I);
    cmd.barrier();
    Act t{h.buffer, 0, n, H};
    K.linear(cmd, g, w.down, t);
    cmd.barrier();
    post_norm_residual(w.post_mlp_norm, t);
  }

  // x += Σ_e weight[t, e] · down_e(silu(gate_e(h)) · up_e(h)) over the experts the router chose, h = norm(x).
  // The router's choice stays on the device: moe_route writes the ids and a [n, E] weight table (0 where not
  // chosen), and the experts' dispatches read their group counts from it (moe_residual_chosen for decode rows,
  // moe_residual_grouped for prefill rows).
  //
  // The MoE input (norm(x), or x), the router's logits and moe_route's ids (this layer's slice of moe_ids)
  // and weights (moe_dense, moe_weights).  Returns the input the experts read.
  // fused_norm (decode rows on the fused path): the norm is folded into the router's mat-vec (and the bias
  // into its epilogue) and into the experts' gate / up (moe_matvec's norm), so the input returned is x.
  const Act& route(const LayerWeights& w, size_t layer, bool fused_norm = false) {
    const uint32_t E = uint32_t(c.n_experts), k = uint32_t(c.experts_per_token);
    const Act& in = w.mlp_norm && !fused_norm ? h : x;
    const Act logits{b.moe_logits, 0, n, E};
    if (fused_norm) {
      const MatvecOutput out[] = {{w.router, logits, bias(w.router_bias), false}};
      K.linear_matvec_fused(cmd, x, pre_norm(w.mlp_norm), out);
      cmd.barrier();
    } else {
      if (w.mlp_norm) {
        K.norm_rms(cmd, x, w.mlp_norm.range(), h, eps);
        cmd.barrier();
      }
      K.linear(cmd, in, w.router, logits);
      cmd.barrier();
      if (w.router_bias) {   // gpt-oss: top-k of the biased logits
        K.elementwise_add(cmd, logits.range(), w.router_bias.range(), logits.range(), n * E, E);
        cmd.barrier();
      }
    }
    const uint64_t stride = ForwardScratch::moe_ids_stride(c, n) * 4;
    // gpt-oss softmaxes over the chosen k only (norm_topk_prob's renormalisation gives the same).
    K.moe_route(cmd, logits, k, c.norm_topk_prob || c.arch == ModelArch::gpt_oss, b.moe_ids->range(layer * stride, uint64_t(n) * k * 4),
                b.moe_weights->range(0, uint64_t(n) * k * 4), b.moe_dense->range(0, uint64_t(n) * E * 4));
    cmd.barrier();
    return in;
  }

  // Ends an expert's indirect calls [call, call + calls): the group counts they were recorded with go to
  // `recorded` (expert 0), and every other expert's must be the same (one grid per call for all experts).
  void keep_grids(std::array<std::array<uint32_t, 3>, 3>& recorded, uint32_t e, uint32_t call, uint32_t calls) {
    const auto& g = cmd.indirect_grids();
    if (g.size() != calls)
      throw Error(ErrorCode::internal, "moe: an expert's matrix took " + std::to_string(g.size()) +
                                           " dispatches where one was planned");
    for (uint32_t i = 0; i < calls; ++i) {
      if (e == 0) recorded[call + i] = g[i];
      else if (g[i] != recorded[call + i])
        throw Error(ErrorCode::internal, "moe: experts of one layer record different group counts");
    }
    cmd.clear_indirect();
  }

  // Decode rows (and gpt-oss's prefill, ForwardScratch::kMoeDecodeRows rows at a time): only the chosen
  // experts run, one moe_matvec dispatch per projection over every (row, expert) slot, the expert ids read
  // from moe_route's output on the device.  gate and up write the halves of each slot's [gate | up] row (no
  // barrier between them), down applies the activation as it loads them, and moe_combine adds each row's
  // slots with their routing weights: 4 dispatches whatever the expert count.  fused: the MoE block's norm
  // goes into the router's mat-vec and gate / up (route), so the block is 6 dispatches from the residual.
  void moe_residual_chosen(const LayerWeights& w, size_t layer, bool fused = false) {
    const uint32_t k = uint32_t(c.experts_per_token), F = uint32_t(c.expert_intermediate_size);
    const bool fold = fused && w.mlp_norm;
    const Act& in = route(w, layer, fold);
    const uint64_t ids0 = layer * ForwardScratch::moe_ids_stride(c, n) * 4;
    for (uint32_t first = 0; first < n; first += ForwardScratch::kMoeDecodeRows) {
      const uint32_t rows = std::min(ForwardScratch::kMoeDecodeRows, n - first), slots = rows * k;
      const BufferRange ids = b.moe_ids->range(ids0 + uint64_t(first) * k * 4, uint64_t(slots) * 4);
      const Act out{b.moe_eout, 0, slots, H};
      // silu / gelu_tanh: gate and up as two blocks, one elementwise pass, down on the product (the activation
      // computed once per element, not again by each of down's workgroups); the clamped SwiGLU, which has no
      // elementwise kernel, keeps [gate | up] rows and down activates them as it loads them.
      const bool act_pass = c.activation != Activation::swiglu_clamped;
      const uint64_t up_off = ForwardScratch::moe_up_offset(slots, F);
      const Act gate = act_pass ? Act{b.moe_eg, 0, slots, F} : Act{b.moe_eg, 0, slots, 2 * F};
      const Act up = act_pass ? Act{b.moe_eg, up_off, slots, F} : Act{b.moe_eg, uint64_t(F) * 4, slots, 2 * F};
      MoeMatvecArgs a;
      a.x = Act{in.buffer, in.offset + uint64_t(first) * H * 4, rows, H};
      a.x_div = k, a.ids = ids, a.slots = slots;
      if (fold) a.norm = w.mlp_norm.range(), a.eps = eps;
      a.y = gate, a.bias = bias(w.expert_gate_bias);
      K.moe_matvec(cmd, w.expert_gate, a);
      a.y = up, a.bias = bias(w.expert_up_bias);
      K.moe_matvec(cmd, w.expert_up, a);
      cmd.barrier();
      MoeMatvecArgs d;
      d.x = gate, d.ids = ids, d.slots = slots, d.y = out, d.bias = bias(w.expert_down_bias);
      if (act_pass) {
        const BufferRange g = b.moe_eg->range(0, uint64_t(slots) * F * 4), u = b.moe_eg->range(up_off, g.size);
        if (c.activation == Activation::gelu_tanh) K.elementwise_gelu_tanh_mul(cmd, g, u, g, slots * F);
        else K.elementwise_silu_mul(cmd, g, u, g, slots * F);
        cmd.barrier();
      } else {
        d.act = moe_activation(), d.alpha = float(c.swiglu_alpha), d.limit = float(c.swiglu_limit);
      }
      K.moe_matvec(cmd, w.expert_down, d);
      cmd.barrier();
      K.moe_combine(cmd, ids, b.moe_weights->range(uint64_t(first) * k * 4, uint64_t(slots) * 4), k, out,
                    Act{x.buffer, x.offset + uint64_t(first) * H * 4, rows, H});
      cmd.barrier();
    }
  }

  MoeActivation moe_activation() const {
    switch (c.activation) {
      case Activation::silu: return MoeActivation::silu;
      case Activation::gelu_tanh: return MoeActivation::gelu_tanh;
      case Activation::swiglu_clamped: return MoeActivation::swiglu_clamped;
    }
    return MoeActivation::silu;
  }

  // Whether the grouped prefill path computes this layer's experts: it has no biases and applies silu or
  // gelu_tanh (gpt-oss's biased, clamped experts take the chosen-slot path in chunks of decode rows).
  bool moe_groupable(const LayerWeights& w) const {
    return !w.expert_gate_bias && !w.expert_up_bias && !w.expert_down_bias &&
           c.activation != Activation::swiglu_clamped;
  }

  // Prefill rows: kMoeGroupRows rows at a time, each expert's products over only the rows that chose it.
  // moe_group lists every expert's rows and cuts its indirect row groups to their count (0 for an expert no
  // row chose), moe_gather copies them into the expert's block, the experts run side by side (no barriers
  // between them) and moe_scatter adds each row's chosen outputs back with their weights.
  void moe_residual_grouped(const LayerWeights& w, size_t layer) {
    const uint32_t E = uint32_t(c.n_experts), k = uint32_t(c.experts_per_token), F = uint32_t(c.expert_intermediate_size);
    const uint32_t G = ForwardScratch::kMoeGroupRows;
    const Act& in = route(w, layer);
    const BufferRange dense = b.moe_dense->range(0, uint64_t(n) * E * 4);
    const BufferRange ids = b.moe_ids->range(layer * ForwardScratch::moe_ids_stride(c, n) * 4, uint64_t(n) * k * 4);
    const BufferRange grids = b.moe_grids->range(uint64_t(ForwardScratch::kMoeDecodeRows) * 256, 36);
    const BufferRange args = b.moe_args->range(0, uint64_t(E) * 36), slots = b.moe_slots->range(0, uint64_t(G) * E * 4);
    const uint64_t sf = uint64_t(G) * F * 4, sh = uint64_t(G) * H * 4;
    std::array<std::array<uint32_t, 3>, 3> recorded{};
    auto keep = [&](uint32_t e, uint32_t call, uint32_t calls) { keep_grids(recorded, e, call, calls); };
    for (uint32_t first = 0; first < n; first += G) {
      const uint32_t rows = std::min(G, n - first);
      K.moe_group(cmd, ids, first, rows, k, E, G, grids, 3, slots, args);
      cmd.barrier();
      K.moe_gather(cmd, ids, slots, first, rows, k, E, G, in, b.moe_xg->range(0, uint64_t(E) * sh));
      cmd.barrier();
      for (uint32_t e = 0; e < E; ++e) {
        cmd.set_indirect(b.moe_args->range(uint64_t(e) * 36, 24));
        const Act xe{b.moe_xg, e * sh, G, H};
        KX.linear(cmd, xe, w.expert_gate[e], Act{b.moe_gg, e * sf, G, F});
        KX.linear(cmd, xe, w.expert_up[e], Act{b.moe_gu, e * sf, G, F});
        keep(e, 0, 2);
      }
      cmd.barrier();
      // Across every expert's block at once; slots no row filled hold stale values, never read below.
      if (c.activation == Activation::gelu_tanh)
        K.elementwise_gelu_tanh_mul(cmd, b.moe_gg->range(0, E * sf), b.moe_gu->range(0, E * sf),
                                    b.moe_gg->range(0, E * sf), uint32_t(E * sf / 4));
      else
        K.elementwise_silu_mul(cmd, b.moe_gg->range(0, E * sf), b.moe_gu->range(0, E * sf),
                               b.moe_gg->range(0, E * sf), uint32_t(E * sf / 4));
      cmd.barrier();
      for (uint32_t e = 0; e < E; ++e) {
        cmd.set_indirect(b.moe_args->range(uint64_t(e) * 36 + 24, 12));
        KX.linear(cmd, Act{b.moe_gg, e * sf, G, F}, w.expert_down[e], Act{b.moe_gout, e * sh, G, H});
        keep(e, 2, 1);
      }
      cmd.barrier();
      K.moe_scatter(cmd, dense, slots, first, rows, E, G, b.moe_gout->range(0, uint64_t(E) * sh), x);
      cmd.barrier();
    }
    std::memcpy(static_cast<std::byte*>(b.moe_grids->mapped()) + grids.offset, recorded.data(), 36);
  }

  // --- fused steps: decode rows (n <= the mat-vec limit), the same arithmetic in fewer dispatches ---

  // q, k, v in one mat-vec dispatch per weight type: the attention norm folded into its input, the biases
  // into its epilogue.
  void qkv_fused(const LayerWeights& w) {
    const MatvecOutput outs[] = {{w.q, q, bias(w.q_bias), false}, {w.k, k, bias(w.k_bias), false},
                                 {w.v, v, bias(w.v_bias), false}};
    K.linear_matvec_fused(cmd, x, pre_norm(w.attn_norm), outs);
    cmd.barrier();
  }

  // x += o · W_o (+ bias) in the mat-vec's epilogue; a post-norm needs the whole row first (unfused).
  void output_residual_fused(const LayerWeights& w) {
    if (w.post_attn_norm) return output_residual(w);
    const MatvecOutput out[] = {{w.o, x, bias(w.o_bias), true}};
    K.linear_matvec_fused(cmd, o, MatvecInput{}, out);
    cmd.barrier();
  }

  // gate and up in one dispatch (norm folded), then x += act(gate)·up · W_down with the activation applied
  // as the down projection loads its input.  One row: [gate | up] side by side in g (ForwardScratch keeps
  // room); several rows (batched decode) keep gate and up apart, so their product is a kernel of its own.
  void mlp_residual_fused(const LayerWeights& w) {
    const MatvecInput in = pre_norm(w.mlp_norm);
    const bool one_row = n == 1;
    // [gate | up] side by side only where down reads them so: the elementwise pass binds up, which at I
    // floats in would miss a 256-byte minStorageBufferOffsetAlignment.
    const bool side_by_side = one_row && !w.post_mlp_norm;
    const Act gate = g, up = side_by_side ? Act{g.buffer, uint64_t(I) * 4, 1, I} : u;
    const MatvecOutput gu[] = {{w.gate, gate, {}, false}, {w.up, up, {}, false}};
    K.linear_matvec_fused(cmd, x, in, gu);
    cmd.barrier();
    const GateActivation act =
        c.activation == Activation::gelu_tanh ? GateActivation::gelu_tanh : GateActivation::silu;
    if (!side_by_side) {
      if (act == GateActivation::gelu_tanh) K.elementwise_gelu_tanh_mul(cmd, gate.range(), up.range(), gate.range(), n * I);
      else K.elementwise_silu_mul(cmd, gate.range(), up.range(), gate.range(), n * I);
      cmd.barrier();
    }
    if (w.post_mlp_norm) {   // Gemma, OLMo 2: the MLP output is normalised before the residual add
      Act t{h.buffer, 0, n, H};
      K.linear(cmd, g, w.down, t);
      cmd.barrier();
      return post_norm_residual(w.post_mlp_norm, t);
    }
    const MatvecOutput down[] = {{w.down, x, {}, true}};
    MatvecInput gated;
    if (one_row) gated.gate = act;
    K.linear_matvec_fused(cmd, one_row ? Act{g.buffer, 0, 1, 2 * I} : g, gated, down);
    cmd.barrier();
  }

  MatvecInput pre_norm(const Buffer& norm) const {
    MatvecInput in;
    if (norm) {
      in.norm = norm.range();
      in.norm_texel = arena_texel_readable(norm.arena());
      in.eps = eps;
    }
    return in;
  }
  static BufferRange bias(const Buffer& b) { return b ? b.range() : BufferRange{}; }

  // x += norm(t) (Gemma, OLMo 2: the sub-block's output is normalised before the residual add), else x += t.
  void post_norm_residual(const Buffer& post_norm, const Act& t) {
    if (post_norm) K.norm_rms(cmd, t, post_norm.range(), x, eps, /*add_to_y=*/true);   // x += norm(t)
    else K.elementwise_add(cmd, x.range(), t.range(), x.range(), n * H, n * H);
    cmd.barrier();
  }
};

void record_embedding(CommandList& cmd, Kernels& K, const Model& model, const ModelConfig& c, const ForwardBuffers& b,
                      const Act& x, uint32_t n) {
  K.embed(cmd, model.embed(), b.ids->range(0, uint64_t(n) * 4), n, x);
  cmd.barrier();
  if (c.embed_scale != 0) {   // Gemma: embeddings x sqrt(hidden)
    K.elementwise_scale(cmd, x.range(), x.range(), n * uint32_t(c.hidden_size), c.embed_scale);
    cmd.barrier();
  }
}

void record_layer(LayerRecorder& R, size_t l, const ForwardAttention& attention, bool fuse) {
  CommandList& cmd = R.cmd;
  const ModelConfig& c = R.c;
  const LayerWeights& w = R.layers[l];
  if (fuse) R.qkv_fused(w);
  else R.qkv(w);
  const bool one_step = attention.store_attend && attention.can_store_attend(l);
  // Per-head q/k norms (Gemma 3, Qwen3) go into the one-step attention; OLMo 2's
  // whole-projection norms keep their pass.
  const bool fold_qk = one_step && w.q_norm && !c.qk_proj_norm;
  if (!fold_qk) R.qk_norms(w);
  if (one_step) {
    const QkRmsNorm qk{w.q_norm ? w.q_norm.range() : BufferRange{}, w.k_norm ? w.k_norm.range() : BufferRange{},
                       R.eps};
    attention.store_attend(cmd, l, R.q, R.k, R.v, R.o, fold_qk ? &qk : nullptr);
  } else {
    attention.store(cmd, l, R.q, R.k, R.v);
    cmd.barrier();
    attention.attend(cmd, l, R.q, R.o);
  }
  cmd.barrier();
  if (w.moe()) {   // the experts' steps serve prefill and decode alike
    if (fuse) R.output_residual_fused(w);
    else R.output_residual(w);
    if (R.n <= ForwardScratch::kMoeDecodeRows || !R.moe_groupable(w)) R.moe_residual_chosen(w, l, fuse);
    else R.moe_residual_grouped(w, l);
  } else if (fuse) {
    R.output_residual_fused(w);
    R.mlp_residual_fused(w);
  } else {
    R.output_residual(w);
    R.mlp_residual(w);
  }
}

}  // namespace

ForwardCounts record_forward(CommandList& cmd, const Model& model, const ModelConfig& c, const ForwardBuffers& b,
                             uint32_t n, uint32_t logits_rows, const ForwardAttention& attention, bool fused,
                             QuantActivations activations, ForwardSteps steps, ForwardHead head) {
  LayerRecorder R(cmd, model, c, b, n, activations);
  Kernels& K = R.K;
  const uint32_t H = R.H, V = uint32_t(c.vocab_size);
  const auto& layers = model.layers();
  const size_t head_step = layers.size() + 1;
  // Decode rows take the fused steps: one mat-vec dispatch where the unfused layer records several.
  const bool fuse = fused && K.config().matvec_fused && !K.config().quant_int_dot && n <= K.config().linear_matvec_max_m;
  if (steps.first == 0) record_embedding(cmd, K, model, c, b, R.x, n);
  const uint32_t d0 = cmd.dispatch_count(), b0 = cmd.barrier_count();
  for (size_t l = std::max<size_t>(steps.first, 1) - 1; l < layers.size() && l + 1 < steps.end; ++l)
    record_layer(R, l, attention, fuse);
  const ForwardCounts counts{cmd.dispatch_count() - d0, cmd.barrier_count() - b0};
  if (steps.first > head_step || steps.end <= head_step) return counts;
  if (head == ForwardHead::hidden) {   // every row normed into the readback buffer; no lm_head
    K.norm_rms(cmd, Act{b.x, 0, n, H}, model.final_norm().range(), Act{b.logits, 0, n, H}, R.eps);
    return counts;
  }
  // Only the rows whose logits are wanted go through the final norm and lm_head.
  // The norm starts at the last row at or before them whose offset is a binding offset (norm_rms binds x
  // at it; minStorageBufferOffsetAlignment may be 256 bytes), lm_head reads h from the wanted rows on.
  const uint32_t rows = logits_rows;
  const uint64_t align = std::max<uint64_t>(model.device().caps().min_storage_buffer_offset_alignment, 1);
  uint32_t r0 = n - rows;
  while (r0 > 0 && uint64_t(r0) * H * 4 % align) --r0;
  Act xr{b.x, uint64_t(r0) * H * 4, n - r0, H}, hn{b.h, 0, n - r0, H};
  Act hr{b.h, uint64_t(n - rows - r0) * H * 4, rows, H}, lg{b.logits, 0, rows, V};
  K.norm_rms(cmd, xr, model.final_norm().range(), hn, R.eps);
  cmd.barrier();
  K.linear(cmd, hr, model.lm_head(), lg);
  if (c.final_softcap > 0) {   // Gemma 2: cap * tanh(logit / cap)
    cmd.barrier();
    K.elementwise_softcap(cmd, lg.range(), lg.range(), rows * V, float(c.final_softcap));
  }
  return counts;
}

}  // namespace reach
