// Bindings shared by linear_matvec_q.comp and linear_gemm_q.comp: X (f32) at 0,
// W's quant plane at 1, Y at 2, W's meta plane at 3 (shaders/quant_blocks.glsl).
// With X_TEX, X is a uniform texel buffer of 4 floats (CPU devices; ALIGNED only).
#include "quant_blocks.glsl"

#if defined(X_TEX)
layout(binding = B_X) uniform samplerBuffer xt;
vec4 load_x4(uint e) { return texelFetch(xt, int(e >> 2)); }
float x1_at(uint e) { return texelFetch(xt, int(e >> 2))[e & 3u]; }
#else
layout(binding = B_X) readonly buffer X1 { float x1[]; };
layout(binding = B_X) readonly buffer X4 { vec4 x4[]; };
float x1_at(uint e) { return x1[e]; }
vec4 load_x4(uint e) {
  if (ALIGNED != 0) return x4[e >> 2];
  return vec4(x1[e], x1[e + 1], x1[e + 2], x1[e + 3]);
}
#endif
layout(binding = B_Y) writeonly buffer Y1 { float y1[]; };

layout(push_constant) uniform LinearQPush {
#include "spec/linear_q_push.h"
} p;

// The 32 activations of sub-block c of X row base e, and their two half sums
// (needed for the offsets b of decode_sub).
struct XSub {
  vec4 v[8];
  vec2 s;
};
XSub load_xsub(uint e) {
  XSub x;
  for (uint w = 0; w < 8; ++w) x.v[w] = load_x4(e + 4 * w);
  if (QHAS_B) {
    const vec4 lo = (x.v[0] + x.v[1]) + (x.v[2] + x.v[3]);
    const vec4 hi = (x.v[4] + x.v[5]) + (x.v[6] + x.v[7]);
    x.s = vec2(dot(lo, vec4(1.0)), dot(hi, vec4(1.0)));
  } else {
    x.s = vec2(0.0);
  }
  return x;
}

// Register paths (matvec MODE 0, register GEMM), q4_0 / q4_1: nibbles are masked
// in place, not shifted down (the nibble at bit 8k + 4h reads as n · 2^(8k+4h)),
// and the X of the sub-block is scaled by the inverse powers of two once for
// all the W rows it meets.  Both scalings are exact, so every product, and the
// dot, is bit for bit what the shifted decode gives, with ~1/3 fewer ops per row.
const bool QNIB = QTYPE == QT_Q4_0 || QTYPE == QT_Q4_1;
const vec4 NIB_LO = vec4(1.0, 1.0 / 256.0, 1.0 / 65536.0, 1.0);
const vec4 NIB_HI = vec4(1.0 / 16.0, 1.0 / 4096.0, 1.0 / 1048576.0, 1.0);
XSub load_xsub_reg(uint e) {
  XSub x = load_xsub(e);
  if (QNIB)
    for (uint w = 0; w < 4; ++w) {
      x.v[w] *= NIB_LO;
      x.v[w + 4] *= NIB_HI;
    }
  return x;
}
void decode_sub_reg(uint qb, uint mb, uint s, out vec4 q[8], out vec4 ab) {
  if (QNIB) {
    const uvec4 u = qload(qb);
    for (uint w = 0; w < 4; ++w) {
      const uint v = u[w];
      q[w] = vec4(uvec4(v & 0xFu, v & 0xF00u, v & 0xF0000u, (v >> 24) & 0xFu));
      q[w + 4] = vec4(uvec4(v & 0xF0u, v & 0xF000u, v & 0xF00000u, v >> 28));
    }
    const float d = qf16(mload(mb));
    const float b = QTYPE == QT_Q4_1 ? qf16(mload(mb + 1)) : -QOFF * d;
    ab = vec4(d, b, d, b);
  } else {
    decode_sub(qb, mb, s, q, ab);
  }
}

// Σ w·x over one sub-block from its decoded quants.
float sub_dot(vec4 q[8], vec4 ab, XSub x) {
  const float lo = (dot(q[0], x.v[0]) + dot(q[1], x.v[1])) + (dot(q[2], x.v[2]) + dot(q[3], x.v[3]));
  const float hi = (dot(q[4], x.v[4]) + dot(q[5], x.v[5])) + (dot(q[6], x.v[6]) + dot(q[7], x.v[7]));
  float r = ab.x * lo + ab.z * hi;
  if (QHAS_B) r += ab.y * x.s.x + ab.w * x.s.y;
  return r;
}

// Plane units of sub-block c (0 .. K/32) of W row n (relative to the bound rows).
void sub_units(uint n, uint c, uint K, out uint qb, out uint mb, out uint s) {
  const uint blk = n * (K / (32 * QSUBS)) + c / QSUBS;
  qb = p.q_off + blk * QU;
  mb = p.m_off + blk * MU;
  s = c % QSUBS;
}
