#version 450
// y[m, n] = dot(x[m, :], W[n, :]) for each row m of X, W in
// a GGML block format (QTYPE), dequantized in registers 32 weights at a time,
// f32 accumulation.  A workgroup takes XROWS rows of X and decodes each W
// sub-block once for all of them; every X row keeps its own accumulators in
// the order of XROWS = 1, so its result is bit-identical to a matvec of that
// row alone.  MODE as linear_matvec.comp:
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
shared float red[MODE == MATVEC_MODE_SHARED ? ROWS * WG : 1];

void partial_dot(uint xb[XROWS], uint n, uint K, uint lane, uint lanes, out float acc[XROWS]) {
  for (uint j = 0; j < XROWS; ++j) acc[j] = 0.0;
  for (uint c = lane; c < K / 32; c += lanes) {
    uint qb, mb, s;
    sub_units(n, c, K, qb, mb, s);
    vec4 q[8];
    vec4 ab;
    decode_sub(qb, mb, s, q, ab);
    for (uint j = 0; j < XROWS; ++j) acc[j] += sub_dot(q, ab, load_xsub(xb[j] + 32 * c));
  }
}

void main() {
  const uint l = gl_LocalInvocationID.x;
  const uint N = p.N, K = p.K;
  const uint m0 = gl_WorkGroupID.y * XROWS;
  // Rows past M repeat the last row (loads stay in range) and are not stored.
  uint xb[XROWS];
  for (uint j = 0; j < XROWS; ++j) xb[j] = p.x_off + min(m0 + j, p.M - 1) * K;
  const uint yb = p.y_off + m0 * p.ldy;

  if (MODE == MATVEC_MODE_ROW_PER_LANE) {
    const uint n0 = gl_WorkGroupID.x * WG * ROWS + l;
    float acc[ROWS * XROWS];
    for (uint i = 0; i < ROWS * XROWS; ++i) acc[i] = 0.0;
    for (uint c = 0; c < K / 32; ++c) {
      // The sub-block of every X row is loaded once for all the W rows.
      XSub xs[XROWS];
      for (uint j = 0; j < XROWS; ++j) xs[j] = load_xsub_reg(xb[j] + 32 * c);
      for (uint r = 0; r < ROWS; ++r) {
        uint qb, mb, s;
        sub_units(min(n0 + r * WG, N - 1), c, K, qb, mb, s);
        vec4 q[8];
        vec4 ab;
        decode_sub_reg(qb, mb, s, q, ab);
        for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] += sub_dot(q, ab, xs[j]);
      }
    }
    for (uint r = 0; r < ROWS; ++r) {
      const uint n = n0 + r * WG;
      if (n < N)
        for (uint j = 0; j < XROWS; ++j)
          if (m0 + j < p.M) y1[yb + j * p.ldy + n] = acc[r * XROWS + j];
    }
  } else if (MODE == MATVEC_MODE_SUBGROUP) {
    const uint n0 = gl_WorkGroupID.x * ROWS;
    // Invocations of this subgroup: fewer than gl_SubgroupSize when the
    // workgroup is smaller than a subgroup (WG 8 on a 32-wide GPU: the K
    // stride must be 8, or 3/4 of the row is never read).
    const uint lanes = min(gl_SubgroupSize, WG - gl_SubgroupID * gl_SubgroupSize);
    for (uint r = gl_SubgroupID; r < ROWS; r += gl_NumSubgroups) {
      const uint n = n0 + r;
      if (n >= N) break;   // uniform within the subgroup
      float s[XROWS];
      partial_dot(xb, n, K, gl_SubgroupInvocationID, lanes, s);
      for (uint j = 0; j < XROWS; ++j) {
        const float t = subgroupAdd(s[j]);
        if (subgroupElect() && m0 + j < p.M) y1[yb + j * p.ldy + n] = t;
      }
    }
  } else {
    const uint n0 = gl_WorkGroupID.x * ROWS;
    float part[ROWS * XROWS];
    for (uint r = 0; r < ROWS; ++r) {
      float s[XROWS];
      partial_dot(xb, min(n0 + r, N - 1), K, l, WG, s);
      for (uint j = 0; j < XROWS; ++j) part[r * XROWS + j] = s[j];
    }
    // One shared-memory tree per X row (the same tree as XROWS = 1).
    for (uint j = 0; j < XROWS; ++j) {
      if (j > 0) barrier();   // the previous row's results are read
      for (uint r = 0; r < ROWS; ++r) red[r * WG + l] = part[r * XROWS + j];
      barrier();
      for (uint s = WG / 2; s > 0; s >>= 1) {
        if (l < s)
          for (uint r = 0; r < ROWS; ++r) red[r * WG + l] += red[r * WG + l + s];
        barrier();
      }
      if (l < ROWS && n0 + l < N && m0 + j < p.M) y1[yb + j * p.ldy + n0 + l] = red[l * WG];
    }
  }
}
