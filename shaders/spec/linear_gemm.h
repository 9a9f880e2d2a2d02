// linear_gemm.comp: Y[M, N] = X[M, K] · Wᵀ.
SPEC_WG(wg)
SPEC_UINT(1, TM, tm, 4)                  // register tile: rows of X per invocation
SPEC_UINT(2, TN, tn, 2)                  // register tile: rows of W per invocation
SPEC_UINT(3, USE_SHARED, use_shared, 0)   // shared-memory tiles (GPUs) vs register tiles (CPU devices)
SPEC_UINT(4, TILE_M, tile_m, 32)         // shared variant: output tile
SPEC_UINT(5, TILE_N, tile_n, 32)
SPEC_UINT(6, BK, bk, 16)                 // shared variant: K depth of a staged slab
// K % 4 == 0 and every element offset % 4 == 0, so vec4 views may be used.
SPEC_UINT(7, ALIGNED, aligned, 0)
// Register variant: lanes load different X rows and share them by subgroup
// shuffle; SUBGROUP must then be the real subgroup size.
SPEC_UINT(8, BCAST, bcast, 0)
SPEC_UINT(9, SUBGROUP, subgroup, 8)
#include "linear_bindings.h"
