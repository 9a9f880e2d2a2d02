#version 450
#extension GL_GOOGLE_include_directive : require   // glslangValidator compiles these (glslc implies it)
// Y[M, N] = X[M, K] · Wᵀ with W in a GGML block format (QTYPE) on cooperative matrices
// (kernels/linear_coopmat.cpp): linear_gemm_coopmat.glsl with quantized W (W_QUANT), each 32-deep
// slab of K one sub-block of every W row, decoded and rounded to f16 in shared memory.
#include "contract.glsl"
#include "spec/linear_gemm_coopmat_q.h"
#include "linear_gemm_coopmat.glsl"
