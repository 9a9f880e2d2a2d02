// linear_matvec.comp: y = W · x per row of X.
SPEC_WG(wg)
SPEC_UINT(1, ROWS, rows, 4)        // output rows per workgroup (mode 0: per invocation)
SPEC_UINT(2, MODE, mode, 0)        // 0 row per lane, 1 subgroupAdd over K, 2 shared-memory reduction
SPEC_UINT(3, ALIGNED, aligned, 0)
SPEC_UINT(4, XROWS, xrows, 1)      // X rows per workgroup (1..8): W is read once for all of them
