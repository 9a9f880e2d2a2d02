// The body of the mat-vecs, for every weight kind (linear_matvec_unit.glsl):
// linear_matvec.comp, linear_matvec_q.comp (W_QUANT) and their fused twins
// linear_matvec_fused[_q].comp (FUSED).  See linear_matvec.comp.  Needs the
// spec list and, with FUSED, the push block.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "linear_load_weight.glsl"
#include "linear_matvec_io.glsl"
// Where W of output o starts (linear_matvec_unit.glsl); o is a constant at
// every call after inlining, so the choice folds away.
#if defined(W_QUANT)
void w_sub(uint o, uint n, uint c, out uint qb, out uint mb, out uint s) { sub_units(QO_A n, c, p.K, qb, mb, s); }
#elif defined(FUSED)
uint w_base(uint o) { return o == 0 ? p.w_off0 : o == 1 ? p.w_off1 : p.w_off2; }
#else
uint w_base(uint o) { return p.w_off; }
#endif
#include "linear_matvec_unit.glsl"

const uint WG = gl_WorkGroupSize.x;
shared float red[MODE == MATVEC_MODE_SHARED ? ROWS * WG : 1];

// Partial dot products of the workgroup's XROWS X rows with W row n of
// output o over the units at k = lane·WU, (lane + lanes)·WU, ..., into s[].
void partial_dot(uint o, uint n, uint K, uint lane, uint lanes, out float s[XROWS]) {
  for (uint j = 0; j < XROWS; ++j) s[j] = 0.0;
  const uint wr = w_row(o, n);
  const uint KU = units_end(K);
  uint k = lane * WU;
  // GPUs: four independent weight loads in flight per lane hide memory
  // latency; the sums keep the order of the plain loop below (same bits).
  // (WAHEAD is a constant, MODE a specialization constant: tested apart, the
  // quantized variants compile no such loop.)
  if (WAHEAD) if (MODE != MATVEC_MODE_ROW_PER_LANE) {
    const uint st = lanes * WU;
    for (; k + 3 * st < KU; k += 4 * st) {
      const WUnit w0 = w_unit(o, wr, k), w1 = w_unit(o, wr, k + st), w2 = w_unit(o, wr, k + 2 * st),
                  w3 = w_unit(o, wr, k + 3 * st);
      for (uint j = 0; j < XROWS; ++j) {
        s[j] += unit_dot(x_unit(j, k), w0);
        s[j] += unit_dot(x_unit(j, k + st), w1);
        s[j] += unit_dot(x_unit(j, k + 2 * st), w2);
        s[j] += unit_dot(x_unit(j, k + 3 * st), w3);
      }
    }
  }
  for (; k < KU; k += lanes * WU) {
    const WUnit wv = w_unit(o, wr, k);
    for (uint j = 0; j < XROWS; ++j) s[j] += unit_dot(x_unit(j, k), wv);
  }
  if (WTAIL)
    for (uint k = KU + lane; k < K; k += lanes) {
      const float wv = w_elem(o, wr, k);
      for (uint j = 0; j < XROWS; ++j) s[j] += xin(j, k) * wv;
    }
}

// Output o's rows of workgroup gx (of that output's share of the grid).
void run(uint o, uint gx) {
  const uint l = gl_LocalInvocationID.x;
  const uint N = out_n(o), K = p.K;
  const uint m0 = gl_WorkGroupID.y * XROWS;

  if (MODE == MATVEC_MODE_ROW_PER_LANE) {
    const uint n0 = gx * WG * ROWS + l;
#if !defined(FUSED) && !defined(W_QUANT)
    // The X row starts in a local array, as this loop had them before the body
    // was shared: reading g_xb per load measured 2-4% slower on lavapipe at M = 8.
    uint xb[XROWS];
    for (uint j = 0; j < XROWS; ++j) xb[j] = g_xb[j];
#endif
    uint wrow[ROWS];
    float acc[ROWS * XROWS];
    for (uint r = 0; r < ROWS; ++r) {
      wrow[r] = w_row(o, min(n0 + r * WG, N - 1));
      for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] = 0.0;
    }
    const uint KU = units_end(K);
    for (uint k = 0; k < KU; k += WU) {
#if defined(FUSED) || defined(W_QUANT)
      // X's unit (transformed, or a sub-block with its sums) is made once per k for all the W rows.
      XUnit xv[XROWS];
      for (uint j = 0; j < XROWS; ++j) xv[j] = x_unit_reg(j, k);
      for (uint r = 0; r < ROWS; ++r) {
        const WUnit wv = w_unit_reg(o, wrow[r], k);
        for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] += unit_dot(xv[j], wv);
      }
#else
      // Float W, plain X: the first X row is held across the W rows; the others
      // are uniform loads (cached), reloaded per W row so that few are live at once.
      const vec4 x0 = load_x4(xb[0] + k);
      for (uint r = 0; r < ROWS; ++r) {
        const vec4 wv = load_wo4(o, wrow[r] + k);
        for (uint j = 0; j < XROWS; ++j) acc[r * XROWS + j] += dot(j == 0 ? x0 : load_x4(xb[j] + k), wv);
      }
#endif
    }
    if (WTAIL)
      for (uint k = KU; k < K; ++k) {
        float xv[XROWS];
        for (uint j = 0; j < XROWS; ++j) xv[j] = xin(j, k);
        for (uint r = 0; r < ROWS; ++r) {
          const float wv = w_elem(o, wrow[r], k);
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
