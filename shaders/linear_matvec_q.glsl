// The body of linear_matvec_q.comp and linear_matvec_fused_q.comp (FUSED):
// see linear_matvec_q.comp.  Needs the spec list and, with FUSED, the push block.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "linear_q_common.glsl"
#include "linear_matvec_io.glsl"

const uint WG = gl_WorkGroupSize.x;
shared float red[MODE == MATVEC_MODE_SHARED ? ROWS * WG : 1];

// Sub-block c of the workgroup's X row j (after the fused input transform).
XSub xsub(uint j, uint c) {
  XSub x;
  for (uint w = 0; w < 8; ++w) x.v[w] = xin4(j, 32 * c + 4 * w);
  return xsub_sums(x);
}

void partial_dot(uint o, uint n, uint K, uint lane, uint lanes, out float acc[XROWS]) {
  for (uint j = 0; j < XROWS; ++j) acc[j] = 0.0;
  for (uint c = lane; c < K / 32; c += lanes) {
    uint qb, mb, s;
    sub_units(QO_A n, c, K, qb, mb, s);
    vec4 q[8];
    vec4 ab;
    decode_sub(QO_A qb, mb, s, q, ab);
    for (uint j = 0; j < XROWS; ++j) acc[j] += sub_dot(q, ab, xsub(j, c));
  }
}

// Output o's rows of workgroup gx (of that output's share of the grid).
void run(uint o, uint gx) {
  const uint l = gl_LocalInvocationID.x;
  const uint N = out_n(o), K = p.K;
  const uint m0 = gl_WorkGroupID.y * XROWS;

  if (MODE == MATVEC_MODE_ROW_PER_LANE) {
    const uint n0 = gx * WG * ROWS + l;
    float acc[ROWS * XROWS];
    for (uint i = 0; i < ROWS * XROWS; ++i) acc[i] = 0.0;
    for (uint c = 0; c < K / 32; ++c) {
      // The sub-block of every X row is loaded once for all the W rows.
      XSub xs[XROWS];
      for (uint j = 0; j < XROWS; ++j) xs[j] = xsub_reg(xsub(j, c));
      for (uint r = 0; r < ROWS; ++r) {
        uint qb, mb, s;
        sub_units(QO_A min(n0 + r * WG, N - 1), c, K, qb, mb, s);
        vec4 q[8];
        vec4 ab;
        decode_sub_reg(QO_A qb, mb, s, q, ab);
        for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] += sub_dot(q, ab, xs[j]);
      }
    }
    for (uint r = 0; r < ROWS; ++r) {
      const uint n = n0 + r * WG;
      if (n < N)
        for (uint j = 0; j < XROWS; ++j)
          if (m0 + j < p.M) store_y(o, m0 + j, n, acc[r * XROWS + j]);
    }
  } else if (MODE == MATVEC_MODE_SUBGROUP) {
    const uint n0 = gx * ROWS;
    // Invocations of this subgroup: fewer than gl_SubgroupSize when the
    // workgroup is smaller than a subgroup (WG 8 on a 32-wide GPU: the K
    // stride must be 8, or 3/4 of the row is never read).
    const uint lanes = min(gl_SubgroupSize, WG - gl_SubgroupID * gl_SubgroupSize);
    for (uint r = gl_SubgroupID; r < ROWS; r += gl_NumSubgroups) {
      const uint n = n0 + r;
      if (n >= N) break;   // uniform within the subgroup
      float s[XROWS];
      partial_dot(o, n, K, gl_SubgroupInvocationID, lanes, s);
      for (uint j = 0; j < XROWS; ++j) {
        const float t = subgroupAdd(s[j]);
        if (subgroupElect() && m0 + j < p.M) store_y(o, m0 + j, n, t);
      }
    }
  } else {
    const uint n0 = gx * ROWS;
    float part[ROWS * XROWS];
    for (uint r = 0; r < ROWS; ++r) {
      float s[XROWS];
      partial_dot(o, min(n0 + r, N - 1), K, l, WG, s);
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
      if (l < ROWS && n0 + l < N && m0 + j < p.M) store_y(o, m0 + j, n0 + l, red[l * WG]);
    }
  }
}

#include "linear_matvec_main.glsl"
