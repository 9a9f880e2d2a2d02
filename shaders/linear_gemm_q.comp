#version 450
// Y[M, N] = X[M, K] · Wᵀ, W [N, K] in a GGML block format (QTYPE), dequantized
// in registers one 32-weight sub-block at a time, f32 accumulation.
//  USE_SHARED = 0  register tile, no shared memory, no barriers (CPU devices):
//                  invocation l of workgroup (gx, gy) computes TM rows of X
//                  (gy*TM.., uniform over the workgroup) times TN rows of W
//                  (gx*WG*TN + j*WG + l); each W sub-block is decoded once and
//                  used for all TM rows.
//  USE_SHARED = 1  GPUs: a TILE_M x TILE_N output tile per workgroup; each
//                  32-deep K slab of X and of dequantized W is staged in shared
//                  memory, each invocation a TM x TN sub-tile
//                  (WG == (TILE_M/TM) * (TILE_N/TN)).
#include "contract.glsl"
#include "spec/linear_gemm_q.h"
#include "linear_q_common.glsl"

const uint WG = gl_WorkGroupSize.x;
const uint XS_STRIDE = 33;   // 32 + 1: no bank conflicts on the column reads
shared float xs[TILE_M * XS_STRIDE];
shared float ws[TILE_N * XS_STRIDE];

void gemm_registers() {
  const uint l = gl_LocalInvocationID.x;
  const uint m0 = gl_WorkGroupID.y * TM;
  const uint n0 = gl_WorkGroupID.x * WG * TN + l;
  const uint M = p.M, N = p.N, K = p.K;
  float acc[TM * TN];
  for (uint t = 0; t < TM * TN; ++t) acc[t] = 0.0;
  for (uint c = 0; c < K / 32; ++c) {
    XSub x[TM];
    for (uint i = 0; i < TM; ++i) x[i] = load_xsub_reg(p.x_off + min(m0 + i, M - 1) * K + 32 * c);
    for (uint j = 0; j < TN; ++j) {
      uint qb, mb, s;
      sub_units(min(n0 + j * WG, N - 1), c, K, qb, mb, s);
      vec4 q[8];
      vec4 ab;
      decode_sub_reg(qb, mb, s, q, ab);
      for (uint i = 0; i < TM; ++i) acc[i * TN + j] += sub_dot(q, ab, x[i]);
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

void gemm_shared() {
  const uint l = gl_LocalInvocationID.x;
  const uint TX = TILE_N / TN;   // invocations along N
  const uint tx = l % TX, ty = l / TX;
  const uint m0 = gl_WorkGroupID.y * TILE_M, n0 = gl_WorkGroupID.x * TILE_N;
  const uint M = p.M, N = p.N, K = p.K;
  float acc[TM * TN];
  for (uint t = 0; t < TM * TN; ++t) acc[t] = 0.0;

  for (uint c = 0; c < K / 32; ++c) {
    // X: consecutive invocations read consecutive k.
    for (uint idx = l; idx < TILE_M * 32; idx += WG) {
      const uint r = idx / 32, k = idx % 32, m = m0 + r;
      xs[r * XS_STRIDE + k] = m < M ? x1_at(p.x_off + m * K + 32 * c + k) : 0.0;
    }
    // W: a quarter sub-block (8 weights) per task.
    for (uint idx = l; idx < TILE_N * 4; idx += WG) {
      const uint r = idx / 4, part = idx % 4, n = min(n0 + r, N - 1);
      uint qb, mb, s;
      sub_units(n, c, K, qb, mb, s);
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
    barrier();
    for (uint kk = 0; kk < 32; ++kk) {
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
  else gemm_registers();
}
