// linear_gemm_q.comp: Y[M, N] = X[M, K] · Wᵀ, W quantized (kernels/quant_layout.hpp).
SPEC_WG(wg)
SPEC_UINT(1, TM, tm, 1)                  // register tile: rows of X per invocation
SPEC_UINT(2, TN, tn, 4)                  // register tile: rows of W per invocation
SPEC_UINT(3, USE_SHARED, use_shared, 0)  // shared-memory tiles (GPUs) vs register tiles (CPU devices)
SPEC_UINT(4, TILE_M, tile_m, 1)          // shared variant: output tile (K depth: one 32-weight sub-block)
SPEC_UINT(5, TILE_N, tile_n, 1)
SPEC_UINT(6, ALIGNED, aligned, 0)        // x_off % 4 == 0: X read as vec4
SPEC_UINT(7, QTYPE, qtype, 4)            // WType of W (q8_0 = 3 ... q6_k = 10)
#include "linear_q_bindings.h"
