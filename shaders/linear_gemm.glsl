// The body of linear_gemm.comp (float W: f32 / f16 / bf16) and linear_gemm_q.comp
// (W_QUANT: a GGML block format or mxfp4, QTYPE): Y[M, N] = X[M, K] · Wᵀ,
// W [N, K], f32 accumulation.  Both operands are K-contiguous, so every output
// is a dot product of two rows.  The weight kind is linear_load_weight.glsl's
// and its K step linear_matvec_unit.glsl's (4 weights, or one 32-weight
// sub-block decoded in registers).
//
// Variants, chosen by specialization constants at pipeline creation:
//  USE_SHARED = 0  register tile, no shared memory, no barriers (CPU devices
//                  such as llvmpipe, where a barrier switches between lane
//                  groups).  Invocation l of workgroup (gx, gy) computes TM
//                  rows of X (gy*TM.., the same for the whole workgroup, so
//                  X loads are uniform) times TN rows of W
//                  (gx*WG*TN + j*WG + l); each W unit is loaded (decoded)
//                  once for all TM rows.
//  BCAST = 1       (float W only) register tiles whose lanes load different X
//                  rows and share them by subgroup broadcast.
//  USE_SHARED = 1  classic shared-memory tiling for GPUs: a TILE_M x TILE_N
//                  output tile per workgroup, SLAB-deep slabs of X and W
//                  (dequantized) staged in shared memory, each invocation a
//                  TM x TN sub-tile (WG must equal (TILE_M/TM) * (TILE_N/TN)).
#if !defined(W_QUANT)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_ballot : require
#endif
#include "linear_load_weight.glsl"

const uint WG = gl_WorkGroupSize.x;
#if defined(W_QUANT)
const uint SLAB = 32;   // one sub-block of every W row per slab
#else
const uint SLAB = BK;
#endif
const uint XS_STRIDE = SLAB + 1;   // +1: no bank conflicts on the column reads
shared float xs[TILE_M * XS_STRIDE];
shared float ws[TILE_N * XS_STRIDE];

// The K step (linear_matvec_unit.glsl): X rows straight from memory, row i
// named by its first element, and W rows from the bound range.
vec4 xin4(uint xb, uint k) { return load_x4(xb + k); }
float xin(uint xb, uint k) { return load_x(xb + k); }
#if defined(W_QUANT)
void w_sub(uint o, uint n, uint c, out uint qb, out uint mb, out uint s) { sub_units(n, c, p.K, qb, mb, s); }
#else
uint w_base(uint o) { return p.w_off; }
#endif
#include "linear_matvec_unit.glsl"

// a · b + c as a chain of four fused multiply-adds.
float fma4(vec4 a, vec4 b, float c) {
  return fma(a.w, b.w, fma(a.z, b.z, fma(a.y, b.y, fma(a.x, b.x, c))));
}

void gemm_registers() {
  const uint l = gl_LocalInvocationID.x;
  const uint m0 = gl_WorkGroupID.y * TM;
  const uint n0 = gl_WorkGroupID.x * WG * TN + l;
  const uint M = p.M, N = p.N, K = p.K;
  // Rows past the edge are clamped (loads stay in bounds, results are dropped).
  uint xrow[TM];
  for (uint i = 0; i < TM; ++i) xrow[i] = p.x_off + min(m0 + i, M - 1) * K;
  uint wrow[TN];
  for (uint j = 0; j < TN; ++j) wrow[j] = w_row(0, min(n0 + j * WG, N - 1));
  float acc[TM * TN];
  for (uint t = 0; t < TM * TN; ++t) acc[t] = 0.0;

  const uint KU = units_end(K);
  for (uint k = 0; k < KU; k += WU) {
    XUnit xv[TM];
    for (uint i = 0; i < TM; ++i) xv[i] = x_unit_reg(xrow[i], k);
    for (uint j = 0; j < TN; ++j) {
      const WUnit wv = w_unit_reg(0, wrow[j], k);
      for (uint i = 0; i < TM; ++i) acc[i * TN + j] += unit_dot(xv[i], wv);
    }
  }
  if (WTAIL)
    for (uint k = KU; k < K; ++k) {
      for (uint j = 0; j < TN; ++j) {
        const float wv = w_elem(0, wrow[j], k);
        for (uint i = 0; i < TM; ++i) acc[i * TN + j] += xin(xrow[i], k) * wv;
      }
    }
  for (uint i = 0; i < TM; ++i) {
    const uint m = m0 + i;
    if (m >= M) break;
    for (uint j = 0; j < TN; ++j) {
      const uint n = n0 + j * WG;
      if (n < N) y1[p.y_off + m * p.ldy + n] = acc[i * TN + j];
    }
  }
}

#if !defined(W_QUANT)
// Register tiles with X rows shared across the subgroup: a subgroup covers
// SUBGROUP*TM rows of X and SUBGROUP*TN rows of W; lane l loads X rows
// m0 + j*S + l and W rows n0 + j*S + l, and computes its W rows against all
// SUBGROUP*TM X rows, taking the other lanes' X values by broadcasts.  Every
// loaded element is reused S*TN (X) or S*TM (W) times.
const uint BC_ACC = SUBGROUP * TM * TN;

// One 4-deep K step at k: acc[(j*S + s)*TN + t] += X row (j, lane s) · W row t.
void bcast_step4(uint k, uint xrow[TM], uint wrow[TN], inout float acc[BC_ACC]) {
  const uint S = SUBGROUP;
  vec4 xl[TM], wl[TN];
  for (uint j = 0; j < TM; ++j) xl[j] = load_x4(xrow[j] + k);
  for (uint t = 0; t < TN; ++t) wl[t] = load_w4(wrow[t] + k);
  // subgroupBroadcast with a constant lane is an element extract on CPU
  // devices; subgroupShuffle (any lane count) may be a per-lane loop.
#define BCAST_STEP(s)                                                  \
  {                                                                    \
    const vec4 xb = subgroupBroadcast(xl[j], s);                      \
    for (uint t = 0; t < TN; ++t) acc[(j * S + s) * TN + t] = fma4(xb, wl[t], acc[(j * S + s) * TN + t]); \
  }
  for (uint j = 0; j < TM; ++j) {
    if (S == 8) {
      BCAST_STEP(0) BCAST_STEP(1) BCAST_STEP(2) BCAST_STEP(3)
      BCAST_STEP(4) BCAST_STEP(5) BCAST_STEP(6) BCAST_STEP(7)
    } else if (S == 4) {
      BCAST_STEP(0) BCAST_STEP(1) BCAST_STEP(2) BCAST_STEP(3)
    } else {
      for (uint s = 0; s < S; ++s) {
        const vec4 xb = subgroupShuffle(xl[j], s);
        for (uint t = 0; t < TN; ++t) acc[(j * S + s) * TN + t] = fma4(xb, wl[t], acc[(j * S + s) * TN + t]);
      }
    }
  }
#undef BCAST_STEP
}

void gemm_registers_bcast() {
  const uint S = SUBGROUP;
  const uint lane = gl_SubgroupInvocationID;
  const uint nsg = WG / S;
  const uint m0 = gl_WorkGroupID.y * S * TM;
  const uint n0 = (gl_WorkGroupID.x * nsg + gl_SubgroupID) * S * TN;
  const uint M = p.M, N = p.N, K = p.K;
  uint xrow[TM];
  for (uint j = 0; j < TM; ++j) xrow[j] = p.x_off + min(m0 + j * S + lane, M - 1) * K;
  uint wrow[TN];
  for (uint t = 0; t < TN; ++t) wrow[t] = p.w_off + min(n0 + t * S + lane, N - 1) * K;
  float acc[BC_ACC];
  for (uint a = 0; a < BC_ACC; ++a) acc[a] = 0.0;

  const uint K4 = K & ~3u;
  for (uint k = 0; k < K4; k += 4) bcast_step4(k, xrow, wrow, acc);
  for (uint k = K4; k < K; ++k) {
    float xl[TM], wl[TN];
    for (uint j = 0; j < TM; ++j) xl[j] = load_x(xrow[j] + k);
    for (uint t = 0; t < TN; ++t) wl[t] = load_w(wrow[t] + k);
    for (uint j = 0; j < TM; ++j)
      for (uint s = 0; s < S; ++s) {
        const float xb = subgroupShuffle(xl[j], s);
        for (uint t = 0; t < TN; ++t) acc[(j * S + s) * TN + t] += xb * wl[t];
      }
  }
  for (uint j = 0; j < TM; ++j)
    for (uint s = 0; s < S; ++s) {
      const uint m = m0 + j * S + s;
      if (m >= M) continue;
      for (uint t = 0; t < TN; ++t) {
        const uint n = n0 + t * S + lane;
        if (n < N) y1[p.y_off + m * p.ldy + n] = acc[(j * S + s) * TN + t];
      }
    }
}

#endif

// W[n0.., k0..] into ws: float W element by element (consecutive invocations
// read consecutive k); quantized W a quarter sub-block (8 weights) per task,
// rows past N repeating row N - 1 (never stored).
void stage_w(uint n0, uint k0) {
  const uint l = gl_LocalInvocationID.x, N = p.N, K = p.K;
#if defined(W_QUANT)
  for (uint idx = l; idx < TILE_N * 4; idx += WG) {
    const uint r = idx / 4, part = idx % 4, n = min(n0 + r, N - 1);
    uint qb, mb, s;
    sub_units(n, k0 / 32, K, qb, mb, s);
    vec4 q[8];
    vec4 ab;
    decode_sub(qb, mb, s, q, ab);
    const vec4 w0 = part < 2 ? dequant(q[2 * part], ab.x, ab.y) : dequant(q[2 * part], ab.z, ab.w);
    const vec4 w1 = part < 2 ? dequant(q[2 * part + 1], ab.x, ab.y) : dequant(q[2 * part + 1], ab.z, ab.w);
    for (uint e = 0; e < 4; ++e) {
      ws[r * XS_STRIDE + 8 * part + e] = w0[e];
      ws[r * XS_STRIDE + 8 * part + 4 + e] = w1[e];
    }
  }
#else
  for (uint idx = l; idx < TILE_N * SLAB; idx += WG) {
    const uint r = idx / SLAB, c = idx % SLAB, n = n0 + r, k = k0 + c;
    ws[r * XS_STRIDE + c] = (n < N && k < K) ? load_w(p.w_off + n * K + k) : 0.0;
  }
#endif
}

void gemm_shared() {
  const uint l = gl_LocalInvocationID.x;
  const uint TX = TILE_N / TN;          // invocations along N
  const uint tx = l % TX, ty = l / TX;
  const uint m0 = gl_WorkGroupID.y * TILE_M, n0 = gl_WorkGroupID.x * TILE_N;
  const uint M = p.M, N = p.N, K = p.K;
  float acc[TM * TN];
  for (uint t = 0; t < TM * TN; ++t) acc[t] = 0.0;

  for (uint k0 = 0; k0 < K; k0 += SLAB) {
    // Stage X[m0.., k0..] (consecutive invocations read consecutive k; a whole
    // slab is inside K for quantized W) and W[n0.., k0..].
    for (uint idx = l; idx < TILE_M * SLAB; idx += WG) {
      const uint r = idx / SLAB, c = idx % SLAB, m = m0 + r, k = k0 + c;
      const bool in_k = WTAIL ? k < K : true;
      xs[r * XS_STRIDE + c] = (m < M && in_k) ? load_x(p.x_off + m * K + k) : 0.0;
    }
    stage_w(n0, k0);
    barrier();
    for (uint kk = 0; kk < SLAB; ++kk) {
      float a[TM], b[TN];
      for (uint i = 0; i < TM; ++i) a[i] = xs[(ty + i * (TILE_M / TM)) * XS_STRIDE + kk];
      for (uint j = 0; j < TN; ++j) b[j] = ws[(tx + j * TX) * XS_STRIDE + kk];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j) acc[i * TN + j] += a[i] * b[j];
    }
    barrier();
  }
  for (uint i = 0; i < TM; ++i) {
    const uint m = m0 + ty + i * (TILE_M / TM);
    if (m >= M) continue;
    for (uint j = 0; j < TN; ++j) {
      const uint n = n0 + tx + j * TX;
      if (n < N) y1[p.y_off + m * p.ldy + n] = acc[i * TN + j];
    }
  }
}

void main() {
  if (USE_SHARED != 0) gemm_shared();
#if !defined(W_QUANT)
  else if (BCAST != 0) gemm_registers_bcast();
#endif
  else gemm_registers();
}
