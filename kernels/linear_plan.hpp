#pragma once
// The plans the linear kernels share, written once (kernels/linear.cpp defines them): the
// mat-vec's and the GEMM's tiles (float and quantized W alike, plain and fused), and the view of a
// row chunk of float W.  A quantized W's views: kernels/quant_binding.hpp.
#include <cstdint>

#include "kernels/binding.hpp"
#include "kernels/kernels.hpp"

namespace reach {

// The mat-vec's spec constants (linear_matvec_shape.h) and grid for m_step X rows of K columns.
struct MatvecPlan {
  uint32_t wg = 1, rows = 1, mode = 0, xrows = 1, xsh = 0;
  uint32_t gx_per = 1;   // W rows per workgroup: the grid is groups_for(W rows, gx_per) x groups_for(M, xrows)
};
// Throws internal on a config the shaders cannot run (a workgroup the device lacks, MODE_SHARED
// without a power of two).
MatvecPlan plan_matvec(const KernelConfig& cfg, const Capabilities& caps, uint32_t m_step, uint32_t K);

// The GEMM's tiles (linear_gemm.h, linear_gemm_q.h) and its grid: groups_for(N, gx_per) x groups_for(M, gy_per).
// Quantized W stages one 32-weight sub-block per K step (bk 32 in the shared-memory budget) and has its own
// register tile (KernelConfig::qgemm_*) and no subgroup-broadcast variant.
struct GemmPlan {
  uint32_t wg = 1, tm = 1, tn = 1, tile_m = 1, tile_n = 1, bk = 1;
  bool shared = false, bcast = false;
  uint32_t gx_per = 1, gy_per = 1;
};
GemmPlan plan_gemm(const KernelConfig& cfg, const Capabilities& caps, bool quant);

// Row chunk c of float W [N, K] of `esize`-byte elements: through a texel view of whole texels when tex
// and the rounded view stays inside the buffer (tex true), else through a storage view.
struct FloatChunkView {
  Bound w;
  bool tex = false;
};
FloatChunkView bind_float_chunk(const Capabilities& caps, const Mat& w, const RowChunk& c, uint32_t esize, bool tex,
                                uint64_t walign, uint64_t align, const char* op);

}  // namespace reach
