#version 450
// y[m, n] = dot(x[m, :], W[n, :]) for each row m of X (gl_WorkGroupID.y), W in
// a GGML block format (QTYPE), dequantized in registers 32 weights at a time,
// f32 accumulation.  MODE as linear_matvec.comp:
//  0  ROWS W rows per invocation (interleaved by WG), no reduction: CPU devices;
//     the 32 activations of a sub-block are loaded once (uniform) for all rows.
//  1  a subgroup per row, lanes split the sub-blocks, subgroupAdd (GPUs).
//  2  the workgroup splits the sub-blocks, shared-memory tree (WG a power of two).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "contract.glsl"
#include "spec/linear_matvec_q.h"
#include "linear_q_common.glsl"

const uint WG = gl_WorkGroupSize.x;
shared float red[MODE == 2 ? ROWS * WG : 1];

float partial_dot(uint xb, uint n, uint K, uint lane, uint lanes) {
  float acc = 0.0;
  for (uint c = lane; c < K / 32; c += lanes) {
    const XSub x = load_xsub(xb + 32 * c);
    uint qb, mb, s;
    sub_units(n, c, K, qb, mb, s);
    vec4 q[8];
    vec4 ab;
    decode_sub(qb, mb, s, q, ab);
    acc += sub_dot(q, ab, x);
  }
  return acc;
}

void main() {
  const uint l = gl_LocalInvocationID.x;
  const uint m = gl_WorkGroupID.y;
  const uint N = p.N, K = p.K;
  const uint xb = p.x_off + m * K;
  const uint yb = p.y_off + m * p.ldy;

  if (MODE == 0) {
    const uint n0 = gl_WorkGroupID.x * WG * ROWS + l;
    float acc[ROWS];
    for (uint r = 0; r < ROWS; ++r) acc[r] = 0.0;
    for (uint c = 0; c < K / 32; ++c) {
      const XSub x = load_xsub_reg(xb + 32 * c);
      for (uint r = 0; r < ROWS; ++r) {
        uint qb, mb, s;
        sub_units(min(n0 + r * WG, N - 1), c, K, qb, mb, s);
        vec4 q[8];
        vec4 ab;
        decode_sub_reg(qb, mb, s, q, ab);
        acc[r] += sub_dot(q, ab, x);
      }
    }
    for (uint r = 0; r < ROWS; ++r) {
      const uint n = n0 + r * WG;
      if (n < N) y1[yb + n] = acc[r];
    }
  } else if (MODE == 1) {
    const uint n0 = gl_WorkGroupID.x * ROWS;
    for (uint r = gl_SubgroupID; r < ROWS; r += gl_NumSubgroups) {
      const uint n = n0 + r;
      if (n >= N) break;   // uniform within the subgroup
      const float s = subgroupAdd(partial_dot(xb, n, K, gl_SubgroupInvocationID, gl_SubgroupSize));
      if (subgroupElect()) y1[yb + n] = s;
    }
  } else {
    const uint n0 = gl_WorkGroupID.x * ROWS;
    for (uint r = 0; r < ROWS; ++r) red[r * WG + l] = partial_dot(xb, min(n0 + r, N - 1), K, l, WG);
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
      if (l < s)
        for (uint r = 0; r < ROWS; ++r) red[r * WG + l] += red[r * WG + l + s];
      barrier();
    }
    if (l < ROWS && n0 + l < N) y1[yb + n0 + l] = red[l * WG];
  }
}
