#version 450
// Y[M, N] = X[M, K] · Wᵀ, W [N, K] in a GGML block format or mxfp4 (QTYPE),
// dequantized in registers (register tiles, CPU devices) or into shared
// memory (shared tiles, GPUs) one 32-weight sub-block at a time, f32
// accumulation: linear_gemm.glsl with quantized W (W_QUANT).
#include "contract.glsl"
#include "spec/linear_gemm_q.h"
#include "linear_gemm.glsl"
