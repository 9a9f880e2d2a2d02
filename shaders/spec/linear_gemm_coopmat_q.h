// linear_gemm_coopmat_q.comp: Y[M, N] = X[M, K] · Wᵀ, W quantized (kernels/quant_layout.hpp), on
// cooperative matrices.
#include "linear_gemm_coopmat_tile.h"
SPEC_UINT(10, QTYPE, qtype, 4)            // WType of W (q8_0 = 3 ... q6_k = 10)
#include "linear_q_bindings.h"
// Push constants: spec/linear_q_push.h.
