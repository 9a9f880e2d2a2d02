// The body of moe_matvec.comp (float W) and moe_matvec_q.comp (W_QUANT: a block type): one dispatch multiplies
// every chosen (row, expert) slot by its expert's matrix.  The grid's y is the slot; its workgroups read the
// expert id from moe_route's ids on the device, so no expert that was not chosen is read and nothing goes
// back to the host.  The experts of one projection are one stacked binding (expert e at e * w_stride);
// slots whose expert lies outside the bound group [e0, e0 + ecount) return at once (a stack split across
// bindings is one dispatch per group).  The W loads and block decoding are the dense mat-vec's
// (linear_load_weight.glsl, linear_q_common.glsl / quant_blocks.glsl); MODE as linear_matvec.comp's 0 and 1.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define OWN_IO 1
layout(push_constant) uniform MoeMatvecPush {
#include "spec/moe_matvec_push.h"
} p;
#include "linear_load_weight.glsl"
layout(binding = B_Y) writeonly buffer Yb { float y[]; };
layout(binding = B_IDS) readonly buffer Ib { int ids[]; };
layout(binding = B_BIAS) readonly buffer Bb { float bias[]; };
layout(binding = B_NORM) readonly buffer Nb { float nrm[]; };

const uint WG = gl_WorkGroupSize.x;

// act(gate) · up in the formulas of elementwise_silu_mul / elementwise_gelu_tanh_mul, and gpt-oss's clamped
// SwiGLU (transformers' GptOssExperts._apply_gate).
vec4 act4(vec4 g, vec4 u) {
  if (ACT == MOE_ACT_SILU) return g / (1.0 + exp(-g)) * u;
  if (ACT == MOE_ACT_GELU_TANH) {
    const vec4 z2 = 1.5957691216057308 * (g + 0.044715 * g * g * g);
    return g / (1.0 + exp(-z2)) * u;
  }
  const vec4 gc = min(g, vec4(p.limit)), uc = clamp(u, vec4(-p.limit), vec4(p.limit));
  return (uc + 1.0) * (gc / (1.0 + exp(-p.alpha * gc)));
}
float act1(float g, float u) { return act4(vec4(g), vec4(u)).x; }

// HAS_NORM: the RMSNorm scale of the slot's X row (main), applied as norm_rms does: x · r · w.
float g_rms = 1.0;

// Elements k.. of the slot's input row starting at element xb.
vec4 xin4(uint xb, uint k) {
  if (ACT != MOE_ACT_NONE) return act4(load_x4(xb + k), load_x4(xb + p.K + k));
  const vec4 v = load_x4(xb + k);
  if (!HAS_NORM) return v;
  const uint n = p.norm_off + k;
  return v * g_rms * vec4(nrm[n], nrm[n + 1], nrm[n + 2], nrm[n + 3]);
}
float xin(uint xb, uint k) {
  if (ACT != MOE_ACT_NONE) return act1(load_x(xb + k), load_x(xb + p.K + k));
  const float v = load_x(xb + k);
  return HAS_NORM ? v * g_rms * nrm[p.norm_off + k] : v;
}

// Σ x² over this lane's share of the row (4 at a time from 4 lane, stride 4 lanes; then the tail).
float sumsq_part(uint xb, uint lane, uint lanes) {
  float s = 0.0;
  const uint K4 = p.K & ~3u;
  for (uint k = lane * 4; k < K4; k += lanes * 4) {
    const vec4 v = load_x4(xb + k);
    s += dot(v, v);
  }
  for (uint k = K4 + lane; k < p.K; k += lanes) {
    const float v = load_x(xb + k);
    s += v * v;
  }
  return s;
}

void store(uint slot, int id, uint n, float t) {
  if (HAS_BIAS) t += bias[p.b_off + uint(id) * p.N + n];
  y[p.y_off + slot * p.ldy + n] = t;
}

// Where expert e's W starts (linear_matvec_unit.glsl: the unit of each weight kind; its X rows j are
// the slot's input row, named by its first element xb).
#if defined(W_QUANT)
void w_sub(uint e, uint n, uint c, out uint qb, out uint mb, out uint s) {
  sub_units(n, c, p.K, qb, mb, s);
  qb += e * p.w_stride;
  mb += e * p.m_stride;
}
#else
uint w_base(uint e) { return p.q_off + e * p.w_stride; }
#endif
#include "linear_matvec_unit.glsl"

// Σ over this lane's units (k = lane·WU, (lane + lanes)·WU, ...) of row n, then its tail.
float partial_dot(uint e, uint xb, uint n, uint lane, uint lanes) {
  const uint wr = w_row(e, n), KU = units_end(p.K);
  float acc = 0.0;
  for (uint k = lane * WU; k < KU; k += lanes * WU) acc += unit_dot(x_unit(xb, k), w_unit(e, wr, k));
  if (WTAIL)
    for (uint k = KU + lane; k < p.K; k += lanes) acc += xin(xb, k) * w_elem(e, wr, k);
  return acc;
}

void main() {
  const uint slot = gl_WorkGroupID.y;
  const int id = ids[p.ids_off + slot];
  if (id < int(p.e0) || id >= int(p.e0 + p.ecount)) return;   // uniform: the whole workgroup leaves
  const uint e = uint(id) - p.e0;
  const uint xb = p.x_off + (slot / p.x_div) * p.x_stride;
  const uint N = p.N, K = p.K, l = gl_LocalInvocationID.x;
  if (HAS_NORM) {
    // Mode 0: each invocation sums the row alone (no barrier); mode 1: the subgroup's lanes split it.
    float ss;
    if (MODE == MATVEC_MODE_ROW_PER_LANE) {
      ss = sumsq_part(xb, 0, 1);
    } else {
      const uint lanes = min(gl_SubgroupSize, WG - gl_SubgroupID * gl_SubgroupSize);
      ss = subgroupAdd(sumsq_part(xb, gl_SubgroupInvocationID, lanes));
    }
    g_rms = inversesqrt(ss / float(K) + p.eps);
  }

  if (MODE == MATVEC_MODE_ROW_PER_LANE) {
    // ROWS W rows per invocation (interleaved by WG), the whole K loop in registers; the input is loaded
    // (and activated) once per step for all of them.
    const uint n0 = gl_WorkGroupID.x * WG * ROWS + l;
    float acc[ROWS];
    for (uint r = 0; r < ROWS; ++r) acc[r] = 0.0;
    uint wrow[ROWS];
    for (uint r = 0; r < ROWS; ++r) wrow[r] = w_row(e, min(n0 + r * WG, N - 1));
    const uint KU = units_end(K);
    for (uint k = 0; k < KU; k += WU) {
      const XUnit xv = x_unit_reg(xb, k);
      for (uint r = 0; r < ROWS; ++r) acc[r] += unit_dot(xv, w_unit_reg(e, wrow[r], k));
    }
    if (WTAIL)
      for (uint k = KU; k < K; ++k) {
        const float xv = xin(xb, k);
        for (uint r = 0; r < ROWS; ++r) acc[r] += xv * w_elem(e, wrow[r], k);
      }
    for (uint r = 0; r < ROWS; ++r)
      if (n0 + r * WG < N) store(slot, id, n0 + r * WG, acc[r]);
  } else {
    // A subgroup per row, its lanes split K, subgroupAdd (GPUs).
    const uint n0 = gl_WorkGroupID.x * ROWS;
    const uint lanes = min(gl_SubgroupSize, WG - gl_SubgroupID * gl_SubgroupSize);
    for (uint r = gl_SubgroupID; r < ROWS; r += gl_NumSubgroups) {
      const uint n = n0 + r;
      if (n >= N) break;   // uniform within the subgroup
      const float t = subgroupAdd(partial_dot(e, xb, n, gl_SubgroupInvocationID, lanes));
      if (subgroupElect()) store(slot, id, n, t);
    }
  }
}
