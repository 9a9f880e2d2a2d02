// linear_gemm_coopmat.comp: Y[M, N] = X[M, K] · Wᵀ, f32 / f16 / bf16 W, on cooperative matrices.
#include "linear_gemm_coopmat_tile.h"
// Bindings: those of linear_gemm.comp (shaders/linear_load_weight.glsl declares them).
BINDING(0, X)   // activations [M, K]
BINDING(1, W)   // weights [N, K]
BINDING(2, Y)   // output [M, N]
// Push constants: spec/linear_push.h.
