#version 450
// y[m, n] = dot(x[m, :], W[n, :]) for each row m of X: decode is
// memory-bound, 4 K-elements per load.  A workgroup takes XROWS rows of X
// (gl_WorkGroupID.y * XROWS ...; batched decode of several sequences) and
// reads each W element once for all of them.  Each X row keeps its own f32
// accumulators, updated in exactly the order of XROWS = 1, so every row's
// result is bit-identical to a matvec of that row alone.
//
// MODE (specialization constant) picks how a row's K loop is spread:
//  0  one W row per invocation (ROWS of them, interleaved by WG), the whole K
//     loop in registers, no reduction: CPU devices (llvmpipe), where x loads
//     are uniform across the lanes and there is no barrier.  A workgroup
//     covers WG * ROWS rows.
//  1  a workgroup covers ROWS rows; each subgroup takes rows in turn, its
//     lanes split K and subgroupAdd reduces (GPUs with subgroup arithmetic).
//     Uses the real subgroup size, so any subgroup size (8/32/64, or a
//     partial subgroup when WG is smaller: its live lanes) is correct.
//  2  as 1 but the whole workgroup splits K and a shared-memory tree
//     reduces (no subgroup ops; WG must be a power of two).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "contract.glsl"
#include "spec/linear_matvec.h"

#include "linear_load_weight.glsl"

const uint WG = gl_WorkGroupSize.x;
shared float red[MODE == MATVEC_MODE_SHARED ? ROWS * WG : 1];

// Partial dot products of the XROWS X rows at xb[] with W row `wb` over
// k = first, first+step, ... (4 at a time), into s[].
void partial_dot(uint xb[XROWS], uint wb, uint K, uint lane, uint lanes, out float s[XROWS]) {
  for (uint j = 0; j < XROWS; ++j) s[j] = 0.0;
  const uint K4 = K & ~3u;
  uint k = lane * 4;
  if (MODE != MATVEC_MODE_ROW_PER_LANE) {
    // GPUs: four independent weight loads in flight per lane hide memory
    // latency; the sums keep the order of the plain loop below (same bits).
    const uint st = lanes * 4;
    for (; k + 3 * st < K4; k += 4 * st) {
      const vec4 w0 = load_w4(wb + k), w1 = load_w4(wb + k + st), w2 = load_w4(wb + k + 2 * st),
                 w3 = load_w4(wb + k + 3 * st);
      for (uint j = 0; j < XROWS; ++j) {
        s[j] += dot(load_x4(xb[j] + k), w0);
        s[j] += dot(load_x4(xb[j] + k + st), w1);
        s[j] += dot(load_x4(xb[j] + k + 2 * st), w2);
        s[j] += dot(load_x4(xb[j] + k + 3 * st), w3);
      }
    }
  }
  for (; k < K4; k += lanes * 4) {
    const vec4 wv = load_w4(wb + k);
    for (uint j = 0; j < XROWS; ++j) s[j] += dot(load_x4(xb[j] + k), wv);
  }
  for (uint k = K4 + lane; k < K; k += lanes) {
    const float wv = load_w(wb + k);
    for (uint j = 0; j < XROWS; ++j) s[j] += load_x(xb[j] + k) * wv;
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
    uint wrow[ROWS];
    float acc[ROWS * XROWS];
    for (uint r = 0; r < ROWS; ++r) {
      wrow[r] = p.w_off + min(n0 + r * WG, N - 1) * K;
      for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] = 0.0;
    }
    const uint K4 = K & ~3u;
    for (uint k = 0; k < K4; k += 4) {
      // The first X row is held across the W rows; the others are uniform
      // loads (cached), reloaded per W row so that few are live at once.
      const vec4 x0 = load_x4(xb[0] + k);
      for (uint r = 0; r < ROWS; ++r) {
        const vec4 wv = load_w4(wrow[r] + k);
        for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] += dot(j == 0 ? x0 : load_x4(xb[j] + k), wv);
      }
    }
    for (uint k = K4; k < K; ++k) {
      float xv[XROWS];
      for (uint j = 0; j < XROWS; ++j) xv[j] = load_x(xb[j] + k);
      for (uint r = 0; r < ROWS; ++r) {
        const float wv = load_w(wrow[r] + k);
        for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] += xv[j] * wv;
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
      partial_dot(xb, p.w_off + n * K, K, gl_SubgroupInvocationID, lanes, s);
      for (uint j = 0; j < XROWS; ++j) {
        const float t = subgroupAdd(s[j]);
        if (subgroupElect() && m0 + j < p.M) y1[yb + j * p.ldy + n] = t;
      }
    }
  } else {
    const uint n0 = gl_WorkGroupID.x * ROWS;
    float part[ROWS * XROWS];
    for (uint r = 0; r < ROWS; ++r) {
      const uint n = min(n0 + r, N - 1);
      float s[XROWS];
      partial_dot(xb, p.w_off + n * K, K, l, WG, s);
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
