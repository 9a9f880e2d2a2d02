// linear_gemm_coopmat_q.comp: Y[M, N] = X[M, K] · Wᵀ, W quantized (kernels/quant_layout.hpp), on
// cooperative matrices.
#include "linear_gemm_coopmat_tile.h"
SPEC_UINT(10, QTYPE, qtype, 4)            // WType of W (q8_0 = 3 ... q6_k = 10)
// Bindings: those of linear_gemm_q.comp (shaders/linear_q_common.glsl, quant_blocks.glsl declare them).
BINDING(0, X)        // activations [M, K]
BINDING(1, WQUANT)   // quant plane of W (uvec4 units)
BINDING(2, Y)        // output [M, N]
BINDING(3, WMETA)    // meta plane of W (16-bit units)
// Push constants: spec/linear_q_push.h.
