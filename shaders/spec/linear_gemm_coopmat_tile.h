// The tile constants of linear_gemm_coopmat.comp and linear_gemm_coopmat_q.comp
// (kernels/linear_coopmat.cpp chooses them: choose_coopmat_tile).  A workgroup
// of SG_M x SG_N subgroups computes a BM x BN tile of Y; each subgroup a
// (BM / SG_M) x (BN / SG_N) block of CM x CN cooperative matrices.
SPEC_WG(wg)                               // SG_M * SG_N * SUBGROUP invocations
SPEC_UINT(1, BM, bm, 64)                  // output tile: rows of X
SPEC_UINT(2, BN, bn, 64)                  // output tile: rows of W
SPEC_UINT(3, BK, bk, 32)                  // K depth of a staged slab (32: one quantized sub-block)
SPEC_UINT(4, CM, cm, 16)                  // the device's cooperative-matrix shape M x N x K
SPEC_UINT(5, CN, cn, 16)
SPEC_UINT(6, CK, ck, 16)
SPEC_UINT(7, SG_M, sg_m, 2)               // subgroups along M
SPEC_UINT(8, SG_N, sg_n, 2)               // subgroups along N
SPEC_UINT(9, ALIGNED, aligned, 0)         // K % 4 == 0 and offsets % 4 == 0: vec4 loads
SPEC_UINT(11, XSPLIT, xsplit, 1)          // X staged as two f16 halves, hi + lo: products near f32 precision
