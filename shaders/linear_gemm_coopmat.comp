#version 450
#extension GL_GOOGLE_include_directive : require   // glslangValidator compiles these (glslc implies it)
// Y[M, N] = X[M, K] · Wᵀ with f32, f16 or bf16 W [N, K] on cooperative matrices (prefill GEMMs on
// GPUs with VK_KHR_cooperative_matrix; kernels/linear_coopmat.cpp).  W is converted to f16 as it
// is staged (bf16 and f32 weights lose mantissa bits there; the tests bound the error).
#include "contract.glsl"
#include "spec/linear_gemm_coopmat.h"
#include "linear_load_weight.glsl"
#include "linear_gemm_coopmat.glsl"

void stage_w(uint n0, uint k0) {
  for (uint idx = gl_LocalInvocationID.x; idx < BN * BK; idx += WG) {
    const uint r = idx / BK, k = idx % BK, n = n0 + r, kk = k0 + k;
    ws[r * SK + k] = float16_t(n < p.N && kk < p.K ? load_w(p.w_off + n * p.K + kk) : 0.0);
  }
}

void main() { gemm_coopmat(); }
