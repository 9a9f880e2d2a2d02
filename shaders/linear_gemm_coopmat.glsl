// The body of linear_gemm_coopmat.comp and linear_gemm_coopmat_q.comp (W_QUANT): Y[M, N] = X[M, K] · Wᵀ on the
// device's cooperative matrices (GL_KHR_cooperative_matrix), f16 inputs (X as two halves with
// XSPLIT) and f32 accumulation.
//
// A workgroup of SG_M x SG_N subgroups computes the BM x BN tile of Y at (gl_WorkGroupID.y * BM,
// gl_WorkGroupID.x * BN).  Per BK-deep slab of K, every invocation helps stage X (f32 -> f16) and W
// (converted or dequantized to f16 by the includer's stage_w) in shared memory; each subgroup then
// multiplies its (BM / SG_M) x (BN / SG_N) block as FM x FN accumulators of CM x CN.  Rows and columns
// past M, N and K are staged as zeros, and the result goes through a per-subgroup shared ypatch so
// edge tiles store only what is inside Y.
//
// The weight kind (W_QUANT or a float type) is linear_load_weight.glsl's, and only stage_w depends
// on it: it fills ws[r * SK + k] (r < BN, k < BK) with W[n0 + r][k0 + k] as f16, zero where
// k0 + k >= K (rows past N: anything finite).  Needs before inclusion: the tile constants
// (spec/linear_gemm_coopmat_tile.h) and the kind's bindings (spec/linear_[q_]bindings.h).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "linear_load_weight.glsl"

const uint WG = gl_WorkGroupSize.x;
// Row stride of the staged slabs in halves: BK plus 8 (16 bytes), which keeps every matrix load
// 16-byte aligned and staggers the rows across shared-memory banks.
const uint SK = BK + 8;
const uint FM = BM / (SG_M * CM);   // accumulators per subgroup along M
const uint FN = BN / (SG_N * CN);   // ... along N
shared float16_t xs[BM * SK];
// XSPLIT: x = hi + lo with hi = f16(x), each half multiplied with W: X keeps about 22 bits instead
// of 11 (rounding X alone to f16 put an f32 model's logits 8.7e-3 of their range off on an H100,
// and flipped a near-tied MoE router), for twice the matrix products.  lo is staged as
// f16((x - hi) · 2^11), in f16's normal range (a driver may flush f16 subnormals, and lavapipe does),
// into accumulators of its own scaled back by 2^-11 at the end.
shared float16_t xs_lo[XSPLIT != 0 ? BM * SK : 1];
const float LO_SCALE = 2048.0;
shared float16_t ws[BN * SK];
shared float ys[SG_M * SG_N * CM * CN];   // one CM x CN ypatch per subgroup, for the bounded store

void stage_x(uint m0, uint k0) {
  for (uint idx = gl_LocalInvocationID.x; idx < BM * BK; idx += WG) {
    const uint r = idx / BK, k = idx % BK, m = m0 + r, kk = k0 + k;
    const float v = m < p.M && kk < p.K ? load_x(p.x_off + m * p.K + kk) : 0.0;
    // hi through packHalf2x16: a compiler may fold f32(f16(v)) back to v (lavapipe's does, even
    // under precise), which would make lo zero.
    const float hi = unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x;
    xs[r * SK + k] = float16_t(hi);   // exact
    if (XSPLIT != 0) xs_lo[r * SK + k] = float16_t((v - hi) * LO_SCALE);   // v - hi is exact in f32
  }
}

#if defined(W_QUANT)
// Each BK = 32 slab of K is one sub-block of every W row, decoded by quant_blocks.glsl's decode_sub (as
// linear_gemm_q.comp's shared variant does) and rounded to f16: a quarter sub-block (8 weights) per
// task; rows past N repeat row N - 1 (never stored).
void stage_w(uint n0, uint k0) {
  for (uint idx = gl_LocalInvocationID.x; idx < BN * 4; idx += WG) {
    const uint r = idx / 4, part = idx % 4, n = min(n0 + r, p.N - 1);
    uint qb, mb, s;
    sub_units(n, k0 / 32, p.K, qb, mb, s);
    vec4 q[8];
    vec4 ab;
    decode_sub(qb, mb, s, q, ab);
    const vec4 w0 = part < 2 ? dequant(q[2 * part], ab.x, ab.y) : dequant(q[2 * part], ab.z, ab.w);
    const vec4 w1 = part < 2 ? dequant(q[2 * part + 1], ab.x, ab.y) : dequant(q[2 * part + 1], ab.z, ab.w);
    for (uint e = 0; e < 4; ++e) {
      ws[r * SK + 8 * part + e] = float16_t(w0[e]);
      ws[r * SK + 8 * part + 4 + e] = float16_t(w1[e]);
    }
  }
}
#else
// Float W converted to f16 as it is staged (bf16 and f32 weights lose mantissa bits there; the tests
// bound the error).
void stage_w(uint n0, uint k0) {
  for (uint idx = gl_LocalInvocationID.x; idx < BN * BK; idx += WG) {
    const uint r = idx / BK, k = idx % BK, n = n0 + r, kk = k0 + k;
    ws[r * SK + k] = float16_t(n < p.N && kk < p.K ? load_w(p.w_off + n * p.K + kk) : 0.0);
  }
}
#endif

void gemm_coopmat() {
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint sg = gl_SubgroupID, sm = sg / SG_N, sn = sg % SG_N;
  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[FM * FN];
  for (uint t = 0; t < FM * FN; ++t) acc[t] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);
  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc_lo[XSPLIT != 0 ? FM * FN : 1];
  for (uint t = 0; t < (XSPLIT != 0 ? FM * FN : 1); ++t)
    acc_lo[t] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);

  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    stage_x(m0, k0);
    stage_w(n0, k0);
    barrier();
    for (uint kk = 0; kk < BK; kk += CK) {
      coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> a[FM];
      for (uint i = 0; i < FM; ++i)
        coopMatLoad(a[i], xs, (sm * FM + i) * CM * SK + kk, SK, gl_CooperativeMatrixLayoutRowMajor);
      for (uint j = 0; j < FN; ++j) {
        // B[k][n] = W[n][k]: the staged W rows read column-major.
        coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b;
        coopMatLoad(b, ws, (sn * FN + j) * CN * SK + kk, SK, gl_CooperativeMatrixLayoutColumnMajor);
        for (uint i = 0; i < FM; ++i) acc[i * FN + j] = coopMatMulAdd(a[i], b, acc[i * FN + j]);
        if (XSPLIT != 0)
          for (uint i = 0; i < FM; ++i) {
            coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> lo;
            coopMatLoad(lo, xs_lo, (sm * FM + i) * CM * SK + kk, SK, gl_CooperativeMatrixLayoutRowMajor);
            acc_lo[i * FN + j] = coopMatMulAdd(lo, b, acc_lo[i * FN + j]);
          }
      }
    }
    barrier();
  }

  if (XSPLIT != 0)
    for (uint t = 0; t < FM * FN; ++t) acc[t] = acc[t] + acc_lo[t] * (1.0 / LO_SCALE);
  const uint ypatch = sg * CM * CN;
  for (uint i = 0; i < FM; ++i)
    for (uint j = 0; j < FN; ++j) {
      coopMatStore(acc[i * FN + j], ys, ypatch, CN, gl_CooperativeMatrixLayoutRowMajor);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      const uint mb = m0 + (sm * FM + i) * CM, nb = n0 + (sn * FN + j) * CN;
      for (uint e = gl_SubgroupInvocationID; e < CM * CN; e += gl_SubgroupSize) {
        const uint m = mb + e / CN, n = nb + e % CN;
        if (m < p.M && n < p.N) y1[p.y_off + m * p.ldy + n] = ys[ypatch + e];
      }
      subgroupBarrier();   // the ypatch is rewritten by the next store
    }
}

void main() { gemm_coopmat(); }
