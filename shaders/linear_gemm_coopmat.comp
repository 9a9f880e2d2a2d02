#version 450
#extension GL_GOOGLE_include_directive : require   // glslangValidator compiles these (glslc implies it)
// Y[M, N] = X[M, K] · Wᵀ with f32, f16 or bf16 W [N, K] on cooperative matrices (prefill GEMMs on
// GPUs with VK_KHR_cooperative_matrix; kernels/linear_coopmat.cpp): linear_gemm_coopmat.glsl, W
// converted to f16 as it is staged.
#include "contract.glsl"
#include "spec/linear_gemm_coopmat.h"
#include "linear_gemm_coopmat.glsl"
