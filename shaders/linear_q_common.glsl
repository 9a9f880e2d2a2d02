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
float load_x(uint e) { return x1_at(e); }
// linear_matvec_io.glsl declares the fused kernel's Y and push constants; OWN_IO kernels (moe_matvec) their own.
#if !defined(FUSED) && !defined(OWN_IO)
layout(binding = B_Y) writeonly buffer Y1 { float y1[]; };

layout(push_constant) uniform LinearQPush {
#include "spec/linear_q_push.h"
} p;
#endif

// The 32 activations of sub-block c of X row base e, and their two half sums
// (needed for the offsets b of decode_sub).
struct XSub {
  vec4 v[8];
  vec2 s;
};
XSub xsub_sums(XSub x) {
  if (QHAS_B) {
    const vec4 lo = (x.v[0] + x.v[1]) + (x.v[2] + x.v[3]);
    const vec4 hi = (x.v[4] + x.v[5]) + (x.v[6] + x.v[7]);
    x.s = vec2(dot(lo, vec4(1.0)), dot(hi, vec4(1.0)));
  } else {
    x.s = vec2(0.0);
  }
  return x;
}
XSub load_xsub(uint e) {
  XSub x;
  for (uint w = 0; w < 8; ++w) x.v[w] = load_x4(e + 4 * w);
  return xsub_sums(x);
}

// Register paths (matvec MODE 0, register GEMM), q4_0 / q4_1: nibbles are masked
// in place, not shifted down (the nibble at bit 8k + 4h reads as n · 2^(8k+4h)),
// and the X of the sub-block is scaled by the inverse powers of two once for
// all the W rows it meets.  Both scalings are exact, so every product, and the
// dot, is bit for bit what the shifted decode gives, with ~1/3 fewer ops per row.
const bool QNIB = QTYPE == QT_Q4_0 || QTYPE == QT_Q4_1;
const vec4 NIB_LO = vec4(1.0, 1.0 / 256.0, 1.0 / 65536.0, 1.0);
const vec4 NIB_HI = vec4(1.0 / 16.0, 1.0 / 4096.0, 1.0 / 1048576.0, 1.0);
XSub xsub_reg(XSub x) {
  if (QNIB)
    for (uint w = 0; w < 4; ++w) {
      x.v[w] *= NIB_LO;
      x.v[w + 4] *= NIB_HI;
    }
  return x;
}
XSub load_xsub_reg(uint e) { return xsub_reg(load_xsub(e)); }
void decode_sub_reg(QO_P uint qb, uint mb, uint s, out vec4 q[8], out vec4 ab) {
  if (QNIB) {
    const uvec4 u = qload(QO_A qb);
    for (uint w = 0; w < 4; ++w) {
      const uint v = u[w];
      q[w] = vec4(uvec4(v & 0xFu, v & 0xF00u, v & 0xF0000u, (v >> 24) & 0xFu));
      q[w + 4] = vec4(uvec4(v & 0xF0u, v & 0xF000u, v & 0xF00000u, v >> 28));
    }
    const float d = qf16(mload(QO_A mb));
    const float b = QTYPE == QT_Q4_1 ? qf16(mload(QO_A mb + 1)) : -QOFF * d;
    ab = vec4(d, b, d, b);
  } else {
    decode_sub(QO_A qb, mb, s, q, ab);
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
#if defined(FUSED)
#define Q_BASE (o == 0 ? p.q_off0 : o == 1 ? p.q_off1 : p.q_off2)
#define M_BASE (o == 0 ? p.m_off0 : o == 1 ? p.m_off1 : p.m_off2)
#else
#define Q_BASE p.q_off
#define M_BASE p.m_off
#endif
void sub_units(QO_P uint n, uint c, uint K, out uint qb, out uint mb, out uint s) {
  const uint blk = n * (K / (32 * QSUBS)) + c / QSUBS;
  qb = Q_BASE + blk * QU;
  mb = M_BASE + blk * MU;
  s = c % QSUBS;
}
