// The X rows and Y stores of linear_matvec[_q] and their fused twins
// (FUSED: linear_matvec_fused[_q].comp, spec/linear_matvec_fusion.h):
//   xin4(j, k) / xin(j, k)  elements k.. of X row j of the workgroup, after
//                           the fused input transform (gate, then RMSNorm);
//   sumsq_part, rms_scale   each row's RMSNorm scale (NORM; linear_matvec_main.glsl);
//   store_y(o, m, n, t)     Y[m, n] of output o from its dot t: bias, accumulate.
// Unfused, these are the plain loads and stores (same values, same order).
// Needs before inclusion: XROWS, MODE, load_x4(e), load_x(e), the push block p.
uint g_xb[XROWS];   // first element of each X row of the workgroup

// XSH > 0 (GPUs, where it fits): main() stages the workgroup's X rows, after the fused input
// transform, in shared memory once (stage_x_shared), and every row of the workgroup reads them
// there.  Without it each subgroup re-reads X (and the norm weights, and recomputes the gate) for
// its one W row: on an H100 that traffic, not W's, bounded decode, worst for the block types (a
// Q4 row is 0.56 bytes per column against 4 of X).
shared vec4 xsh[XSH > 0 ? XSH : 1];
// Per-subgroup partial sums of squares for the norm (subgroups are at least 8 wide where XSH is set).
const uint XSH_SUBGROUPS = (gl_WorkGroupSize.x + 7) / 8;
shared float xsh_part[XSH > 0 ? XROWS * XSH_SUBGROUPS : 1];

#if defined(FUSED)
layout(binding = B_Y) buffer Yo0 { float y_0[]; };   // read too: accumulate
layout(binding = B_Y1) buffer Yo1 { float y_1[]; };
layout(binding = B_Y2) buffer Yo2 { float y_2[]; };
layout(binding = B_BIAS) readonly buffer Bo0 { float bias_0[]; };
layout(binding = B_BIAS1) readonly buffer Bo1 { float bias_1[]; };
layout(binding = B_BIAS2) readonly buffer Bo2 { float bias_2[]; };
// The norm weights are read at every K step of every workgroup, at an index
// the same for all lanes.  llvmpipe (Mesa 22.3) loads such an SSBO element
// lane by lane, each lane's scalar stored into a vector on the stack and read
// back whole (a store-forwarding stall per element): about a fifth of a
// SmolLM2-135M decode step.  The texel variants (W_TEX, CPU devices) read them as
// a uniform texel buffer, which it gathers in one go: RGBA32F where ALIGNED
// (norm_off % 4 == 0), else R32F (the host makes the view to match).
#if defined(W_TEX)
layout(binding = B_NORM) uniform samplerBuffer nrm_t;
float norm1(uint e) { return ALIGNED != 0 ? texelFetch(nrm_t, int(e >> 2))[e & 3u] : texelFetch(nrm_t, int(e)).x; }
vec4 norm4(uint k) {
  const uint e = p.norm_off + k;
  if (ALIGNED != 0) return texelFetch(nrm_t, int(e >> 2));
  return vec4(norm1(e), norm1(e + 1), norm1(e + 2), norm1(e + 3));
}
#else
layout(binding = B_NORM) readonly buffer Nrm1 { float nrm1[]; };
layout(binding = B_NORM) readonly buffer Nrm4 { vec4 nrm4[]; };
float norm1(uint e) { return nrm1[e]; }
vec4 norm4(uint k) {
  const uint e = p.norm_off + k;
  if (ALIGNED != 0) return nrm4[e >> 2];   // the host sets ALIGNED only if norm_off % 4 == 0
  return vec4(nrm1[e], nrm1[e + 1], nrm1[e + 2], nrm1[e + 3]);
}
#endif

// Per-output push constants; o is a constant at each call after inlining.
uint out_n(uint o) { return o == 0 ? p.N0 : o == 1 ? p.N1 : p.N2; }
uint out_yoff(uint o) { return o == 0 ? p.y_off0 : o == 1 ? p.y_off1 : p.y_off2; }
uint out_ldy(uint o) { return o == 0 ? p.ldy0 : o == 1 ? p.ldy1 : p.ldy2; }

// The formulas of elementwise_silu_mul.comp / elementwise_gelu_tanh_mul.comp,
// so that fused and unfused agree to rounding.
vec4 act4(vec4 a) {
  if (GATE == GATE_SILU) return a / (1.0 + exp(-a));
  const vec4 z2 = 1.5957691216057308 * (a + 0.044715 * a * a * a);   // 2 sqrt(2/pi) (a + 0.044715 a^3)
  return a / (1.0 + exp(-z2));
}
float act1(float a) {
  if (GATE == GATE_SILU) return a / (1.0 + exp(-a));
  const float z2 = 1.5957691216057308 * (a + 0.044715 * a * a * a);
  return a / (1.0 + exp(-z2));
}

// X row j before the norm: gated rows are [gate | up], K each.
vec4 raw_x4(uint j, uint k) {
  if (GATE != GATE_NONE) return act4(load_x4(g_xb[j] + k)) * load_x4(g_xb[j] + p.K + k);
  return load_x4(g_xb[j] + k);
}
float raw_x(uint j, uint k) {
  if (GATE != GATE_NONE) return act1(load_x(g_xb[j] + k)) * load_x(g_xb[j] + p.K + k);
  return load_x(g_xb[j] + k);
}

// Elements per X row: [gate | up] rows are 2K wide.
uint x_stride() { return GATE != GATE_NONE ? 2 * p.K : p.K; }

float g_xs[XROWS];   // RMSNorm scale of each row (NORM)
// x · r · w in norm_rms.comp's order.
vec4 xin4_mem(uint j, uint k) {
  const vec4 v = raw_x4(j, k);
  return NORM != NORM_NONE ? v * g_xs[j] * norm4(k) : v;
}
float xin_mem(uint j, uint k) {
  const float v = raw_x(j, k);
  return NORM != NORM_NONE ? v * g_xs[j] * norm1(p.norm_off + k) : v;
}

// Σ raw² of row j over this lane's share (k = 4 lane, stride 4 lanes; then the tail).
float sumsq_part(uint j, uint lane, uint lanes) {
  float s = 0.0;
  const uint K4 = p.K & ~3u;
  for (uint k = lane * 4; k < K4; k += lanes * 4) {
    const vec4 v = raw_x4(j, k);
    s += dot(v, v);
  }
  for (uint k = K4 + lane; k < p.K; k += lanes) {
    const float v = raw_x(j, k);
    s += v * v;
  }
  return s;
}
float rms_scale(float ss) { return inversesqrt(ss / float(p.K) + p.eps); }

// y = [y_old +] (t [+ bias[n]]): the unfused chain's order (mat-vec, bias add, residual add).
void store_y(uint o, uint m, uint n, float t) {
  if (((BIAS_MASK >> o) & 1u) != 0) {
    const uint b = (o == 0 ? p.b_off0 : o == 1 ? p.b_off1 : p.b_off2) + n;
    t += o == 0 ? bias_0[b] : o == 1 ? bias_1[b] : bias_2[b];
  }
  const uint i = out_yoff(o) + m * out_ldy(o) + n;
  const bool acc = ((ACC_MASK >> o) & 1u) != 0;
  if (o == 0) y_0[i] = acc ? y_0[i] + t : t;
  else if (o == 1) y_1[i] = acc ? y_1[i] + t : t;
  else y_2[i] = acc ? y_2[i] + t : t;
}

#else
uint x_stride() { return p.K; }
uint out_n(uint o) { return p.N; }
vec4 raw_x4(uint j, uint k) { return load_x4(g_xb[j] + k); }
vec4 xin4_mem(uint j, uint k) { return load_x4(g_xb[j] + k); }
float xin_mem(uint j, uint k) { return load_x(g_xb[j] + k); }
void store_y(uint o, uint m, uint n, float t) { y1[p.y_off + m * p.ldy + n] = t; }
#endif

// Element k.. of X row j after the input transform (k % 4 == 0 for xin4; K % 4 == 0 where XSH > 0).
vec4 xin4(uint j, uint k) { return XSH > 0 ? xsh[j * (p.K >> 2) + (k >> 2)] : xin4_mem(j, k); }
float xin(uint j, uint k) { return XSH > 0 ? xsh[j * (p.K >> 2) + (k >> 2)][k & 3u] : xin_mem(j, k); }

// XSH > 0: the whole workgroup fills xsh, the norm's sums reduced across it; values are
// xin4_mem's (the same expression), so only the order of the sum of squares differs.
void stage_x_shared() {
  const uint l = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, K4 = p.K >> 2;
  for (uint j = 0; j < XROWS; ++j) {
    float ss = 0.0;
    for (uint i = l; i < K4; i += wg) {
      const vec4 v = raw_x4(j, 4 * i);
      xsh[j * K4 + i] = v;
      ss += dot(v, v);
    }
#if defined(FUSED)
    if (NORM != NORM_NONE) {
      ss = subgroupAdd(ss);
      if (subgroupElect()) xsh_part[j * XSH_SUBGROUPS + gl_SubgroupID] = ss;
    }
#endif
  }
#if defined(FUSED)
  if (NORM != NORM_NONE) {
    barrier();
    for (uint j = 0; j < XROWS; ++j) {
      float ss = 0.0;
      for (uint s = 0; s < gl_NumSubgroups; ++s) ss += xsh_part[j * XSH_SUBGROUPS + s];
      g_xs[j] = rms_scale(ss);
      // Each invocation rescales the elements it wrote: no barrier between.
      for (uint i = l; i < K4; i += wg) xsh[j * K4 + i] = xsh[j * K4 + i] * g_xs[j] * norm4(4 * i);
    }
  }
#endif
  barrier();
}
