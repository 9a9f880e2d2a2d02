// Reading GGML block formats in the device layout of kernels/quant_layout.hpp:
// a quant plane of uvec4s (packed quants, QU per block) and a meta plane of
// 16-bit units (d first, then m / dmin / scales / q5 qh, MU per block).
//
// decode_sub(qb, mb, s, q, ab) decodes sub-block s (32 weights) of the block
// whose planes start at quant unit qb and meta unit mb: q[w] holds the raw
// quants of weights 4w..4w+3 (unsigned, as stored) and the weights are
//   w = ab.x * q + ab.y  for weights 0..15,   ab.z * q + ab.w  for 16..31
// (q6_k's scale changes at 16; the other types have ab.xy == ab.zw).  For the
// symmetric types ab.y = -QOFF * ab.x, and dequant() computes ab.x * (q - QOFF)
// as the specification does, so gathered weights are exact.
//
// Needs before inclusion: QTYPE (a specialization constant, WType's value) and
// B_WQUANT / B_WMETA (binding numbers).  With W_TEX the planes are uniform
// texel buffers (R32G32B32A32_UINT, R16_UINT), else storage buffers.
// QT_F32 = 0 ... QT_Q6_K = 10: WType's ids, from the one list of both sides.
#define WTYPE(id, name, NAME) const uint QT_##NAME = id;
#include "base/wtype_list.h"
#undef WTYPE
const bool QK = QTYPE >= QT_Q4_K && QTYPE <= QT_Q6_K;   // 256-weight super-blocks of 8 sub-blocks
const uint QSUBS = QK ? 8 : 1;                 // sub-blocks of 32 per block
const uint QU = QTYPE == QT_Q8_0 ? 2 : QTYPE == QT_Q4_K ? 8 : QTYPE == QT_Q5_K ? 10 : QTYPE == QT_Q6_K ? 12 : 1;
// Meta units per block: 16-bit units, except mxfp4 whose one E8M0 byte makes its meta units bytes (its
// meta offsets count bytes: kernels/quant_layout.hpp's quant_meta_unit_bytes).
const uint MU = QTYPE == QT_Q4_1 ? 2 : QTYPE == QT_Q5_0 ? 3 : QTYPE == QT_Q5_1 ? 4 : QTYPE == QT_Q6_K ? 9 : QK ? 8 : 1;
const float QOFF = QTYPE == QT_Q4_0 ? 8.0 : QTYPE == QT_Q5_0 ? 16.0 : QTYPE == QT_Q6_K ? 32.0 : 0.0;
// Whether ab.y / ab.w can be non-zero (all but q8_0 and mxfp4).
const bool QHAS_B = QTYPE != QT_Q8_0 && QTYPE != QT_MXFP4;

// Meta units per meta texel on the texel path (kernels/quant_layout.hpp's
// quant_meta_texel_bytes / 2): q4_k / q5_k read their whole 16-byte meta (d,
// dmin, 12 scale bytes) in one R32G32B32A32 fetch instead of one R16 fetch per
// field; on llvmpipe each fetch is a gather, and fetches bound the kernels.
// (One R32 fetch for q4_1's d and m measured slower there than two R16 ones.)
const uint MTU = QTYPE == QT_Q4_K || QTYPE == QT_Q5_K ? 8 : 1;

// With FUSED (linear_matvec_fused_q.comp) there are three W (one per output):
// the loads and decode_sub take the output index first (QO_P / QO_A expand
// to `uint o,` / `o,`, to nothing otherwise); o is a constant at every call
// after inlining, so the choice folds away.
#if defined(FUSED)
#define QO_P uint o,
#define QO_A o,
#else
#define QO_P
#define QO_A
#endif
#if defined(W_TEX)
layout(binding = B_WQUANT) uniform usamplerBuffer wq;
layout(binding = B_WMETA) uniform usamplerBuffer wm;
#if defined(FUSED)
layout(binding = B_WQUANT1) uniform usamplerBuffer wq1;
layout(binding = B_WMETA1) uniform usamplerBuffer wm1;
layout(binding = B_WQUANT2) uniform usamplerBuffer wq2;
layout(binding = B_WMETA2) uniform usamplerBuffer wm2;
uvec4 qload(QO_P uint i) {
  if (o == 1) return texelFetch(wq1, int(i));
  if (o == 2) return texelFetch(wq2, int(i));
  return texelFetch(wq, int(i));
}
uvec4 mtexel(QO_P uint i) {
  if (o == 1) return texelFetch(wm1, int(i));
  if (o == 2) return texelFetch(wm2, int(i));
  return texelFetch(wm, int(i));
}
#else
uvec4 qload(uint i) { return texelFetch(wq, int(i)); }
uvec4 mtexel(uint i) { return texelFetch(wm, int(i)); }
#endif
uint mload(QO_P uint i) { return mtexel(QO_A i).x; }   // MTU == 1 only
#else
layout(binding = B_WQUANT) readonly buffer WQ { uvec4 wq[]; };
#extension GL_EXT_shader_16bit_storage : require
layout(binding = B_WMETA) readonly buffer WM { uint16_t wm[]; };
#if defined(FUSED)
layout(binding = B_WQUANT1) readonly buffer WQ1 { uvec4 wq1[]; };
layout(binding = B_WMETA1) readonly buffer WM1 { uint16_t wm1[]; };
layout(binding = B_WQUANT2) readonly buffer WQ2 { uvec4 wq2[]; };
layout(binding = B_WMETA2) readonly buffer WM2 { uint16_t wm2[]; };
uvec4 qload(QO_P uint i) {
  if (o == 1) return wq1[i];
  if (o == 2) return wq2[i];
  return wq[i];
}
uint mload(QO_P uint i) {
  if (o == 1) return uint(wm1[i]);
  if (o == 2) return uint(wm2[i]);
  return uint(wm[i]);
}
#else
uvec4 qload(uint i) { return wq[i]; }
uint mload(uint i) { return uint(wm[i]); }
#endif
#endif

// The first 2 * WORDS meta units of the block at meta unit mb as 32-bit words
// (unit 2i in the low half of word i); with MTU > 1, mb % MTU == 0.
uvec4 meta_words(QO_P uint mb) {
#if defined(W_TEX)
  if (MTU > 1) return mtexel(QO_A mb / MTU);
#endif
  uvec4 w = uvec4(0u);
  const uint units = min(MU, 8u);
  for (uint i = 0; i < units / 2; ++i) w[i] = mload(QO_A mb + 2 * i) | (mload(QO_A mb + 2 * i + 1) << 16);
  if ((units & 1u) != 0) w[units / 2] = mload(QO_A mb + units - 1);
  return w;
}

float qf16(uint bits) { return unpackHalf2x16(bits).x; }
vec4 nib_lo(uint v) { return vec4(uvec4(v, v >> 8, v >> 16, v >> 24) & 15u); }
vec4 nib_hi(uint v) { return vec4(uvec4(v >> 4, v >> 12, v >> 20, v >> 28) & 15u); }
vec4 bytes_u(uint v) { return vec4(uvec4(v, v >> 8, v >> 16, v >> 24) & 255u); }
vec4 bytes_s(uint v) { return vec4(ivec4(uvec4(v << 24, v << 16, v << 8, v)) >> 24); }
vec4 bits4(uint v) { return vec4(uvec4(v, v >> 1, v >> 2, v >> 3) & 1u); }
// Byte k (< 16) of a block's meta from its meta_words.
uint mbyte(uvec4 mw, uint k) { return (mw[k >> 2] >> ((k & 3u) * 8u)) & 255u; }

// mxfp4's E2M1 codes as ggml's kvalues_mxfp4 (twice the E2M1 values; the scale below is halved to match).
const float MXFP4_VALUES[16] = float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0,
                                         0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
vec4 mx_lo(uint v) {
  return vec4(MXFP4_VALUES[v & 15u], MXFP4_VALUES[(v >> 8) & 15u], MXFP4_VALUES[(v >> 16) & 15u],
              MXFP4_VALUES[(v >> 24) & 15u]);
}
vec4 mx_hi(uint v) { return mx_lo(v >> 4); }
// ggml_e8m0_to_fp32_half: 2^(e - 128), built from its bits (subnormal below e = 2).
float e8m0_half(uint e) { return uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23)); }

void decode_sub(QO_P uint qb, uint mb, uint s, out vec4 q[8], out vec4 ab) {
  // d is meta unit 0 of every type; q6_k reads its scales by unit (below), mxfp4 its scale byte.
  const uvec4 mw = QTYPE == QT_Q6_K ? uvec4(mload(QO_A mb), 0u, 0u, 0u)
                   : QTYPE == QT_MXFP4 ? uvec4(0u) : meta_words(QO_A mb);
  const float d = qf16(mw.x);
  if (QTYPE == QT_MXFP4) {
    // qs[i]: low nibble weight i, high nibble weight i + 16 (as q4_0); the meta byte mb is the scale.
    const uint e = (mload(QO_A mb >> 1) >> ((mb & 1u) * 8u)) & 255u;
    const uvec4 u = qload(QO_A qb);
    for (uint w = 0; w < 4; ++w) {
      q[w] = mx_lo(u[w]);
      q[w + 4] = mx_hi(u[w]);
    }
    const float a = e8m0_half(e);
    ab = vec4(a, 0.0, a, 0.0);
  } else if (QTYPE == QT_Q8_0) {
    const uvec4 u0 = qload(QO_A qb), u1 = qload(QO_A qb + 1);
    q[0] = bytes_s(u0.x); q[1] = bytes_s(u0.y); q[2] = bytes_s(u0.z); q[3] = bytes_s(u0.w);
    q[4] = bytes_s(u1.x); q[5] = bytes_s(u1.y); q[6] = bytes_s(u1.z); q[7] = bytes_s(u1.w);
    ab = vec4(d, 0.0, d, 0.0);
  } else if (QTYPE <= QT_Q5_1) {
    // qs[i]: low nibble weight i, high nibble weight i + 16.
    const uvec4 u = qload(QO_A qb);
    for (uint w = 0; w < 4; ++w) {
      q[w] = nib_lo(u[w]);
      q[w + 4] = nib_hi(u[w]);
    }
    float b;
    if (QTYPE == QT_Q5_0 || QTYPE == QT_Q5_1) {
      // Bit i of qh is the fifth bit of weight i.
      // q5_0: meta units 1, 2; q5_1: units 2, 3.
      const uint qh = QTYPE == QT_Q5_1 ? mw.y : (mw.x >> 16) | (mw.y << 16);
      for (uint w = 0; w < 8; ++w) q[w] += 16.0 * bits4(qh >> (4 * w));
    }
    if (QTYPE == QT_Q4_1 || QTYPE == QT_Q5_1) b = unpackHalf2x16(mw.x).y;
    else b = -QOFF * d;
    ab = vec4(d, b, d, b);
  } else if (QTYPE == QT_Q4_K || QTYPE == QT_Q5_K) {
    // The 32 qs bytes of chunk s/2 hold sub-block s in their low (s even) or high nibbles.
    const uint qsb = qb + (QTYPE == QT_Q5_K ? 2 : 0) + 2 * (s >> 1);
    const uvec4 u0 = qload(QO_A qsb), u1 = qload(QO_A qsb + 1);
    const uint words[8] = uint[8](u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w);
    if ((s & 1u) == 0) for (uint w = 0; w < 8; ++w) q[w] = nib_lo(words[w]);
    else for (uint w = 0; w < 8; ++w) q[w] = nib_hi(words[w]);
    if (QTYPE == QT_Q5_K) {
      // Bit s of qh[l] is the fifth bit of weight l of sub-block s.
      const uvec4 h0 = qload(QO_A qb), h1 = qload(QO_A qb + 1);
      const uint hw[8] = uint[8](h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w);
      for (uint w = 0; w < 8; ++w) q[w] += 16.0 * bytes_u((hw[w] >> s) & 0x01010101u);
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
    const float a = d * float(sc), b = -(unpackHalf2x16(mw.x).y * float(m));
    ab = vec4(a, b, a, b);
  } else {   // q6_k
    // Half h = s/4, quarter t = s%4: weight l takes a nibble of ql[64h + 32(t&1) + l]
    // (low for t < 2) and bits 2t, 2t+1 of qh[32h + l]; scale 8h + 2t (+1 from l = 16).
    const uint h = s >> 2, t = s & 3u;
    const uvec4 l0 = qload(QO_A qb + 4 * h + 2 * (t & 1u)), l1 = qload(QO_A qb + 4 * h + 2 * (t & 1u) + 1);
    const uvec4 h0 = qload(QO_A qb + 8 + 2 * h), h1 = qload(QO_A qb + 9 + 2 * h);
    const uint lw[8] = uint[8](l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w);
    const uint hw[8] = uint[8](h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w);
    for (uint w = 0; w < 8; ++w)
      q[w] = (t < 2 ? nib_lo(lw[w]) : nib_hi(lw[w])) + 16.0 * bytes_u((hw[w] >> (2 * t)) & 0x03030303u);
    // Scales are int8 at meta bytes 2..17: the two of this sub-block (bytes 2 + 8h + 2t, +1) are unit 1 + 4h + t.
    const uint sw = mload(QO_A mb + 1 + 4 * h + t);
    const float a0 = d * float((int(sw) << 24) >> 24);
    const float a1 = d * float((int(sw) << 16) >> 24);
    ab = vec4(a0, -32.0 * a0, a1, -32.0 * a1);
  }
}

// The weights q of sub-block half (0: weights 0..15, 1: 16..31) from scale a and offset b,
// exactly as the specification computes them (one rounding at most).
vec4 dequant(vec4 q, float a, float b) {
  if (QOFF != 0.0) return a * (q - QOFF);
  return a * q + b;
}
