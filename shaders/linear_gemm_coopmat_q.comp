#version 450
#extension GL_GOOGLE_include_directive : require   // glslangValidator compiles these (glslc implies it)
// Y[M, N] = X[M, K] · Wᵀ with W in a GGML block format (QTYPE) on cooperative matrices
// (kernels/linear_coopmat.cpp).  Each BK = 32 slab of K is one sub-block of every W row, decoded
// by quant_blocks.glsl's decode_sub (as linear_gemm_q.comp's shared variant does) and rounded to
// f16 in shared memory.
#include "contract.glsl"
#include "spec/linear_gemm_coopmat_q.h"
#include "linear_q_common.glsl"
#include "linear_gemm_coopmat.glsl"

void stage_w(uint n0, uint k0) {
  // A quarter sub-block (8 weights) per task; rows past N repeat row N - 1 (never stored).
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

void main() { gemm_coopmat(); }
