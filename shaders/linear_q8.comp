#version 450
// Y[M, N] = X[M, K] · Wᵀ with X in Q8 blocks (linear_quantize_q8.comp) and W in
// a GGML block format (QTYPE), as llama.cpp multiplies them: per 32-weight
// sub-block the weights are unpacked to int8 (4 per word), dotted with the
// activations' int8 by one integer dot-product instruction per 4 pairs
// (OpSDot), the exact int32 sum scaled in f32, and the sub-blocks summed in f32:
//   Σ w·x = dx · (a0 · Σ_lo q·qx + a1 · Σ_hi q·qx) + b · dx · Σ qx
// with a0 = a1 but for q6_k (scale per 16 weights), b the format's offset
// (q4_1 / q5_1's m, the K-quants' -dmin·min; 0 where the offset is folded into
// the int8 weights: q4_0's q - 8, q5_0's q - 16, q6_k's q - 32).
// Register tile, no shared memory (as linear_gemm_q.comp's register variant):
// invocation l of workgroup (gx, gy) computes TM rows of X (gy*TM.., uniform
// over the workgroup) times TN rows of W (gx*WG*TN + j*WG + l).
#extension GL_EXT_spirv_intrinsics : require
#include "contract.glsl"
#include "spec/linear_q8.h"
#include "quant_blocks.glsl"

// OpSDot (4450) on two int8x4 packed in 32-bit words (PackedVectorFormat4x8Bit = 0).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int packed_format);

// With X_TEX (CPU devices, with W_TEX) both X planes are R32G32B32A32_UINT texel
// buffers, the meta plane two blocks per texel: llvmpipe runs storage-buffer
// loads inside loops lane by lane but a texel fetch as one gather.
#if defined(X_TEX)
layout(binding = B_XQUANT) uniform usamplerBuffer xqt;
layout(binding = B_XMETA) uniform usamplerBuffer xmt;
uvec4 xq_load(uint i) { return texelFetch(xqt, int(i)); }
vec2 xm_load(uint i) {
  const uvec4 t = texelFetch(xmt, int(i >> 1));
  return uintBitsToFloat((i & 1u) != 0 ? t.zw : t.xy);
}
#else
layout(binding = B_XQUANT) readonly buffer XQ { uvec4 xq[]; };
layout(binding = B_XMETA) readonly buffer XM { vec2 xm[]; };
uvec4 xq_load(uint i) { return xq[i]; }
vec2 xm_load(uint i) { return xm[i]; }
#endif
layout(binding = B_Y) writeonly buffer Y1 { float y1[]; };
layout(push_constant) uniform P {
#include "spec/linear_q8_push.h"
} p;

const uint WG = gl_WorkGroupSize.x;
const bool QSPLIT = QTYPE == QT_Q6_K;   // a0 != a1
const bool QHAS_M = QTYPE == QT_Q4_1 || QTYPE == QT_Q5_1 || QTYPE == QT_Q4_K || QTYPE == QT_Q5_K;

// One sub-block of W as int8: q[w] packs weights 4w..4w+3; the weights are
// a0 · q (0..15), a1 · q (16..31), plus b.
struct WSub {
  uint q[8];
  float a0, a1, b;
};

const uint LO4 = 0x0F0F0F0Fu;
// Bytes of v (each < 128) minus k, as int8 (no borrow between bytes).
uint sub_bytes(uint v, uint k) { return ((v | 0x80808080u) - k * 0x01010101u) ^ 0x80808080u; }
// Bits 4i..4i+3 of h spread to bit 4 of byte 0..3 (the fifth bit of q5 weights).
uint spread4(uint h) { return ((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4; }

WSub decode_i8(uint qb, uint mb, uint s) {
  WSub r;
  r.b = 0.0;
  const uvec4 mw = QTYPE == QT_Q6_K ? uvec4(mload(mb), 0u, 0u, 0u) : meta_words(mb);
  const float d = qf16(mw.x);
  r.a0 = d;
  if (QTYPE == QT_Q8_0) {
    const uvec4 u0 = qload(qb), u1 = qload(qb + 1);
    r.q = uint[8](u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w);
  } else if (QTYPE <= QT_Q5_1) {
    // qs[i]: low nibble weight i, high nibble weight i + 16; q5: bit i of qh is weight i's fifth bit.
    const uvec4 u = qload(qb);
    const uint qh = QTYPE == QT_Q5_1 ? mw.y : (mw.x >> 16) | (mw.y << 16);
    for (uint w = 0; w < 4; ++w) {
      uint lo = u[w] & LO4, hi = (u[w] >> 4) & LO4;
      if (QTYPE == QT_Q5_0 || QTYPE == QT_Q5_1) {
        lo |= spread4(qh >> (4 * w));
        hi |= spread4(qh >> (16 + 4 * w));
      }
      if (QTYPE == QT_Q4_0 || QTYPE == QT_Q5_0) {
        const uint off = QTYPE == QT_Q4_0 ? 8u : 16u;
        lo = sub_bytes(lo, off);
        hi = sub_bytes(hi, off);
      }
      r.q[w] = lo;
      r.q[w + 4] = hi;
    }
    if (QTYPE == QT_Q4_1 || QTYPE == QT_Q5_1) r.b = unpackHalf2x16(mw.x).y;
  } else if (QTYPE == QT_Q4_K || QTYPE == QT_Q5_K) {
    // The 32 qs bytes of chunk s/2 hold sub-block s in their low (s even) or high nibbles.
    const uint qsb = qb + (QTYPE == QT_Q5_K ? 2 : 0) + 2 * (s >> 1);
    const uvec4 u0 = qload(qsb), u1 = qload(qsb + 1);
    const uint words[8] = uint[8](u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w);
    const uint sh = (s & 1u) * 4u;
    for (uint w = 0; w < 8; ++w) r.q[w] = (words[w] >> sh) & LO4;
    if (QTYPE == QT_Q5_K) {
      // Bit s of qh[l] is the fifth bit of weight l of sub-block s.
      const uvec4 h0 = qload(qb), h1 = qload(qb + 1);
      const uint hw[8] = uint[8](h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w);
      for (uint w = 0; w < 8; ++w) r.q[w] |= ((hw[w] >> s) & 0x01010101u) << 4;
    }
    // 6-bit scale and min of sub-block s from the 12 scale bytes (meta bytes 4..15).
    uint sc, m;
    if (s < 4) {
      sc = mbyte(mw, 4 + s) & 63u;
      m = mbyte(mw, 8 + s) & 63u;
    } else {
      const uint hi = mbyte(mw, 8 + s);
      sc = (hi & 15u) | ((mbyte(mw, s) >> 6) << 4);
      m = (hi >> 4) | ((mbyte(mw, 4 + s) >> 6) << 4);
    }
    r.a0 = d * float(sc);
    r.b = -(unpackHalf2x16(mw.x).y * float(m));
  } else {   // q6_k: see quant_blocks.glsl's decode_sub
    const uint h = s >> 2, t = s & 3u;
    const uvec4 l0 = qload(qb + 4 * h + 2 * (t & 1u)), l1 = qload(qb + 4 * h + 2 * (t & 1u) + 1);
    const uvec4 h0 = qload(qb + 8 + 2 * h), h1 = qload(qb + 9 + 2 * h);
    const uint lw[8] = uint[8](l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w);
    const uint hw[8] = uint[8](h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w);
    const uint sh = t < 2 ? 0u : 4u;
    for (uint w = 0; w < 8; ++w)
      r.q[w] = sub_bytes(((lw[w] >> sh) & LO4) | (((hw[w] >> (2 * t)) & 0x03030303u) << 4), 32u);
    const uint sw = mload(mb + 1 + 4 * h + t);
    r.a0 = d * float((int(sw) << 24) >> 24);
    r.a1 = d * float((int(sw) << 16) >> 24);
  }
  return r;
}

void main() {
  const uint l = gl_LocalInvocationID.x;
  const uint m0 = gl_WorkGroupID.y * TM;
  const uint n0 = gl_WorkGroupID.x * WG * TN + l;
  const uint M = p.M, N = p.N, K = p.K;
  const uint subs = K / 32, wblocks = K / (32 * QSUBS);
  float acc[TM * TN];
  for (uint t = 0; t < TM * TN; ++t) acc[t] = 0.0;
  for (uint c = 0; c < subs; ++c) {
    uint xw[TM * 8];
    vec2 xd[TM];
    for (uint i = 0; i < TM; ++i) {
      const uint blk = min(m0 + i, M - 1) * subs + c;
      const uvec4 u0 = xq_load(p.xq_off + 2 * blk), u1 = xq_load(p.xq_off + 2 * blk + 1);
      xw[8 * i + 0] = u0.x; xw[8 * i + 1] = u0.y; xw[8 * i + 2] = u0.z; xw[8 * i + 3] = u0.w;
      xw[8 * i + 4] = u1.x; xw[8 * i + 5] = u1.y; xw[8 * i + 6] = u1.z; xw[8 * i + 7] = u1.w;
      xd[i] = xm_load(p.xm_off + blk);
    }
    for (uint j = 0; j < TN; ++j) {
      const uint n = min(n0 + j * WG, N - 1);
      const uint wb = n * wblocks + c / QSUBS;
      const WSub ws = decode_i8(p.q_off + wb * QU, p.m_off + wb * MU, c % QSUBS);
      for (uint i = 0; i < TM; ++i) {
        int lo = 0, hi = 0;
        for (uint w = 0; w < 4; ++w) {
          lo += sdot4x8(ws.q[w], xw[8 * i + w], 0);
          hi += sdot4x8(ws.q[w + 4], xw[8 * i + w + 4], 0);
        }
        float r = QSPLIT ? ws.a0 * float(lo) + ws.a1 * float(hi) : ws.a0 * float(lo + hi);
        if (QHAS_M) r += ws.b * xd[i].y;
        acc[i * TN + j] += xd[i].x * r;
      }
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
