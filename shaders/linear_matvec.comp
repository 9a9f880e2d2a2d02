#version 450
// y[m, n] = dot(x[m, :], W[n, :]) for each row m of X (gl_WorkGroupID.y):
// decode is memory-bound, so W is read once per X row, 4 K-elements per load.
//
// MODE (specialization constant) picks how a row's K loop is spread:
//  0  one W row per invocation (ROWS of them, interleaved by WG), the whole K
//     loop in registers, no reduction: CPU devices (llvmpipe), where x loads
//     are uniform across the lanes and there is no barrier.  A workgroup
//     covers WG * ROWS rows.
//  1  a workgroup covers ROWS rows; each subgroup takes rows in turn, its
//     lanes split K and subgroupAdd reduces (GPUs with subgroup arithmetic).
//     Uses the real gl_SubgroupSize, so any subgroup size (8/32/64, or a
//     partial subgroup when WG is smaller) is correct.
//  2  as 1 but the whole workgroup splits K and a shared-memory tree
//     reduces (no subgroup ops; WG must be a power of two).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "contract.glsl"
#include "spec/linear_matvec.h"

#include "linear_load_weight.glsl"

const uint WG = gl_WorkGroupSize.x;
shared float red[MODE == 2 ? ROWS * WG : 1];

// Partial dot product of x row `xb` and W row `wb` over k = first, first+step, ... (4 at a time).
float partial_dot(uint xb, uint wb, uint K, uint lane, uint lanes) {
  float s = 0.0;
  const uint K4 = K & ~3u;
  for (uint k = lane * 4; k < K4; k += lanes * 4) s += dot(load_x4(xb + k), load_w4(wb + k));
  for (uint k = K4 + lane; k < K; k += lanes) s += load_x(xb + k) * load_w(wb + k);
  return s;
}

void main() {
  const uint l = gl_LocalInvocationID.x;
  const uint m = gl_WorkGroupID.y;
  const uint N = p.N, K = p.K;
  const uint xb = p.x_off + m * K;
  const uint yb = p.y_off + m * p.ldy;

  if (MODE == 0) {
    const uint n0 = gl_WorkGroupID.x * WG * ROWS + l;
    uint wrow[ROWS];
    float acc[ROWS];
    for (uint r = 0; r < ROWS; ++r) {
      wrow[r] = p.w_off + min(n0 + r * WG, N - 1) * K;
      acc[r] = 0.0;
    }
    const uint K4 = K & ~3u;
    for (uint k = 0; k < K4; k += 4) {
      const vec4 xv = load_x4(xb + k);
      for (uint r = 0; r < ROWS; ++r) acc[r] += dot(xv, load_w4(wrow[r] + k));
    }
    for (uint k = K4; k < K; ++k) {
      const float xv = load_x(xb + k);
      for (uint r = 0; r < ROWS; ++r) acc[r] += xv * load_w(wrow[r] + k);
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
      const float s = subgroupAdd(partial_dot(xb, p.w_off + n * K, K, gl_SubgroupInvocationID, gl_SubgroupSize));
      if (subgroupElect()) y1[yb + n] = s;
    }
  } else {
    const uint n0 = gl_WorkGroupID.x * ROWS;
    for (uint r = 0; r < ROWS; ++r) {
      const uint n = min(n0 + r, N - 1);
      red[r * WG + l] = partial_dot(xb, p.w_off + n * K, K, l, WG);
    }
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
      if (l < s)
        for (uint r = 0; r < ROWS; ++r) red[r * WG + l] += red[r * WG + l + s];
      barrier();
    }
    if (l < ROWS && n0 + l < N) y1[yb + n0 + l] = red[l * WG];
  }
}
