#version 450
// Y[M, N] = X[M, K] · Wᵀ, W [N, K] (f32 / f16 / bf16), f32 accumulation: the
// register-tile, subgroup-broadcast and shared-memory GEMMs of
// linear_gemm.glsl (one body for every weight kind).
#include "contract.glsl"
#include "spec/linear_gemm.h"
#include "linear_gemm.glsl"
