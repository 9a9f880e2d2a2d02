// linear_matvec_q.comp: y = W · x per row of X, W quantized (kernels/quant_layout.hpp).
SPEC_WG(wg)
SPEC_UINT(1, ROWS, rows, 4)        // output rows per workgroup (mode 0: per invocation)
SPEC_UINT(2, MODE, mode, 0)        // 0 row per lane, 1 subgroupAdd over K, 2 shared-memory reduction
SPEC_UINT(3, ALIGNED, aligned, 0)  // x_off % 4 == 0: X read as vec4
SPEC_UINT(4, QTYPE, qtype, 4)      // WType of W (q8_0 = 3 ... q6_k = 10)
SPEC_UINT(5, XROWS, xrows, 1)      // X rows per workgroup (1..8): W is read once for all of them
