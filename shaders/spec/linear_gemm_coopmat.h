// linear_gemm_coopmat.comp: Y[M, N] = X[M, K] · Wᵀ, f32 / f16 / bf16 W, on cooperative matrices.
#include "linear_gemm_coopmat_tile.h"
#include "linear_bindings.h"
// Push constants: spec/linear_push.h.
