// The body of linear_matvec.comp and linear_matvec_fused.comp (FUSED): see
// linear_matvec.comp.  Needs the spec list and, with FUSED, the push block.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "linear_load_weight.glsl"
#include "linear_matvec_io.glsl"
#if defined(FUSED)
uint out_woff(uint o) { return o == 0 ? p.w_off0 : o == 1 ? p.w_off1 : p.w_off2; }
#else
uint out_woff(uint o) { return p.w_off; }
#endif

const uint WG = gl_WorkGroupSize.x;
shared float red[MODE == MATVEC_MODE_SHARED ? ROWS * WG : 1];

// Partial dot products of the workgroup's XROWS X rows with W row `wb` of
// output o over k = first, first+step, ... (4 at a time), into s[].
void partial_dot(uint o, uint wb, uint K, uint lane, uint lanes, out float s[XROWS]) {
  for (uint j = 0; j < XROWS; ++j) s[j] = 0.0;
  const uint K4 = K & ~3u;
  uint k = lane * 4;
  if (MODE != MATVEC_MODE_ROW_PER_LANE) {
    // GPUs: four independent weight loads in flight per lane hide memory
    // latency; the sums keep the order of the plain loop below (same bits).
    const uint st = lanes * 4;
    for (; k + 3 * st < K4; k += 4 * st) {
      const vec4 w0 = load_wo4(o, wb + k), w1 = load_wo4(o, wb + k + st), w2 = load_wo4(o, wb + k + 2 * st),
                 w3 = load_wo4(o, wb + k + 3 * st);
      for (uint j = 0; j < XROWS; ++j) {
        s[j] += dot(xin4(j, k), w0);
        s[j] += dot(xin4(j, k + st), w1);
        s[j] += dot(xin4(j, k + 2 * st), w2);
        s[j] += dot(xin4(j, k + 3 * st), w3);
      }
    }
  }
  for (; k < K4; k += lanes * 4) {
    const vec4 wv = load_wo4(o, wb + k);
    for (uint j = 0; j < XROWS; ++j) s[j] += dot(xin4(j, k), wv);
  }
  for (uint k = K4 + lane; k < K; k += lanes) {
    const float wv = load_wo(o, wb + k);
    for (uint j = 0; j < XROWS; ++j) s[j] += xin(j, k) * wv;
  }
}

// Output o's rows of workgroup gx (of that output's share of the grid).
void run(uint o, uint gx) {
  const uint w_off = out_woff(o);
  const uint l = gl_LocalInvocationID.x;
  const uint N = out_n(o), K = p.K;
  const uint m0 = gl_WorkGroupID.y * XROWS;

  if (MODE == MATVEC_MODE_ROW_PER_LANE) {
    const uint n0 = gx * WG * ROWS + l;
#if !defined(FUSED)
    // The X row starts in a local array, as this loop had them before the body
    // was shared: reading g_xb per load measured 2-4% slower on lavapipe at M = 8.
    uint xb[XROWS];
    for (uint j = 0; j < XROWS; ++j) xb[j] = g_xb[j];
#endif
    uint wrow[ROWS];
    float acc[ROWS * XROWS];
    for (uint r = 0; r < ROWS; ++r) {
      wrow[r] = w_off + min(n0 + r * WG, N - 1) * K;
      for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] = 0.0;
    }
    const uint K4 = K & ~3u;
    for (uint k = 0; k < K4; k += 4) {
#if defined(FUSED)
      // Transformed X is computed once per k for all the W rows.
      vec4 xv[XROWS];
      for (uint j = 0; j < XROWS; ++j) xv[j] = xin4(j, k);
      for (uint r = 0; r < ROWS; ++r) {
        const vec4 wv = load_wo4(o, wrow[r] + k);
        for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] += dot(xv[j], wv);
      }
#else
      // The first X row is held across the W rows; the others are uniform
      // loads (cached), reloaded per W row so that few are live at once.
      const vec4 x0 = load_x4(xb[0] + k);
      for (uint r = 0; r < ROWS; ++r) {
        const vec4 wv = load_wo4(o, wrow[r] + k);
        for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] += dot(j == 0 ? x0 : load_x4(xb[j] + k), wv);
      }
#endif
    }
    for (uint k = K4; k < K; ++k) {
      float xv[XROWS];
      for (uint j = 0; j < XROWS; ++j) xv[j] = xin(j, k);
      for (uint r = 0; r < ROWS; ++r) {
        const float wv = load_wo(o, wrow[r] + k);
        for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] += xv[j] * wv;
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
      partial_dot(o, w_off + n * K, K, gl_SubgroupInvocationID, lanes, s);
      for (uint j = 0; j < XROWS; ++j) {
        const float t = subgroupAdd(s[j]);
        if (subgroupElect() && m0 + j < p.M) store_y(o, m0 + j, n, t);
      }
    }
  } else {
    const uint n0 = gx * ROWS;
    float part[ROWS * XROWS];
    for (uint r = 0; r < ROWS; ++r) {
      const uint n = min(n0 + r, N - 1);
      float s[XROWS];
      partial_dot(o, w_off + n * K, K, l, WG, s);
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
