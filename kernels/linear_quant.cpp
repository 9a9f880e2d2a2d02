// The linear family with quantized weights (GGML block formats): Kernels::linear_gemm /
// linear_matvec / linear when W's type is q8_0 ... q6_k (shaders/linear_matvec_q.comp,
// shaders/linear_gemm_q.comp; the block type is a specialization constant).
//
// W is in the device layout of kernels/quant_layout.hpp: a quant plane (16-byte
// units) followed by a meta plane (2-byte units).  Rows [r0, r1) of W are one
// contiguous range of each plane, so a row chunk (split_rows, for weights above
// max_binding) binds the two sub-ranges separately (bindings 1 and 3), each
// from an aligned start with the remainder passed as a unit offset.  On CPU
// devices (KernelConfig::weights_texel) the planes are read through uniform
// texel buffers (R32G32B32A32_UINT; the meta plane in R16_UINT units or one texel
// per block, quant_meta_texel_bytes): llvmpipe vectorises texel
// fetches but not per-lane SSBO loads (see linear.cpp).
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
#include "kernels/linear_plan.hpp"
#include "kernels/quant_binding.hpp"
#include "kernels/quant_layout.hpp"
#include "kernels/spec.hpp"

namespace reach {

using spec::LinearQPush;
// linear_gemm_q.comp and linear_matvec_q.comp declare the same bindings (spec/linear_q_bindings.h).
using LinearQBindings = spec::LinearGemmQBindings;
static_assert(sizeof(LinearQPush) == 32);

void record_linear_quant(Device& device, const KernelConfig& cfg, CommandList& cmd, const Act& x, const Mat& w,
                         const Act& y, bool use_matvec) {
  const char* op = use_matvec ? "linear_matvec_q" : "linear_gemm_q";
  const auto& caps = device.caps();
  const uint32_t M = x.rows, N = w.rows, K = w.cols;
  if (x.offset % 4 || y.offset % 4)
    throw Error(ErrorCode::internal, std::string(op) + ": X and Y offsets must be multiples of 4");
  const QuantWeightBinding wb = plan_quant_weight(caps, cfg, w, op);

  const uint64_t row_bytes = std::max<uint64_t>(uint64_t(K) * 4, uint64_t(N) * 4);
  if (row_bytes > wb.room)
    throw Error(ErrorCode::unsupported, std::string(op) + ": one activation row of " + std::to_string(row_bytes) +
                                            " bytes exceeds maxStorageBufferRange");
  const uint32_t m_step = static_cast<uint32_t>(std::min<uint64_t>(M, wb.room / row_bytes));
  const bool x_arena_tex = arena_texel_readable(x.buffer->arena());
  const uint32_t qtype = static_cast<uint32_t>(w.type);

  spec::MatvecQSpec mv;
  spec::GemmQSpec gm;
  uint32_t gx_per = 1, gy_per = 1;
  if (use_matvec) {
    const MatvecPlan plan = plan_matvec(cfg, caps, m_step, K);
    gx_per = plan.gx_per;
    gy_per = plan.xrows;
    mv.wg = plan.wg;
    mv.rows = plan.rows;
    mv.mode = plan.mode;
    mv.xrows = plan.xrows;
    mv.xsh = plan.xsh;
    mv.qtype = qtype;
  } else {
    const GemmPlan plan = plan_gemm(cfg, caps, true);
    gx_per = plan.gx_per;
    gy_per = plan.gy_per;
    gm.wg = plan.wg;
    gm.tm = plan.tm;
    gm.tn = plan.tn;
    gm.use_shared = plan.shared ? 1u : 0u;
    gm.tile_m = plan.tile_m;
    gm.tile_n = plan.tile_n;
    gm.qtype = qtype;
  }

  static constexpr ShaderId kShaders[2][3] = {{ShaderId::linear_gemm_q, ShaderId::linear_gemm_q_tex, ShaderId::linear_gemm_q_xtex},
                                              {ShaderId::linear_matvec_q, ShaderId::linear_matvec_q_tex, ShaderId::linear_matvec_q_xtex}};
  for (uint32_t m0 = 0; m0 < M; m0 += m_step) {
    const uint32_t mc = std::min(m_step, M - m0);
    const Bound xb = bind_aligned(*x.buffer, x.offset + VkDeviceSize(m0) * K * 4, VkDeviceSize(mc) * K * 4, 4, wb.walign);
    const Bound yb = bind_aligned(*y.buffer, y.offset + VkDeviceSize(m0) * N * 4, VkDeviceSize(mc) * N * 4, 4, wb.align);
    const bool aligned = xb.elem_off % 4 == 0;
    const bool xtex = wb.tex && aligned && cfg.activations_texel && x_arena_tex && xb.range.size % 16 == 0 &&
                      xb.range.size / 16 <= caps.max_texel_buffer_elements;
    mv.aligned = gm.aligned = aligned ? 1u : 0u;
    using B = LinearQBindings;
    PipelineDesc desc{kShaders[use_matvec ? 1 : 0][xtex ? 2 : wb.tex ? 1 : 0], B::count, sizeof(LinearQPush),
                      use_matvec ? mv.constants() : gm.constants()};
    if (wb.tex) desc.texel(B::B_WQUANT, VK_FORMAT_R32G32B32A32_UINT).texel(B::B_WMETA, wb.meta_format);
    if (xtex) desc.texel(B::B_X, VK_FORMAT_R32G32B32A32_SFLOAT);
    const auto& pipe = device.pipelines().get(desc);
    for (const RowChunk& c : wb.chunks) {
      const QuantChunkViews v = bind_quant_chunk(wb, w, c);
      const LinearQPush push{mc, c.rows, K, xb.elem_off, v.quant.elem_off, v.m_off, yb.elem_off + c.first_row, N};
      const uint32_t gx = groups_for(c.rows, gx_per);
      const uint32_t gy = groups_for(mc, gy_per);
      cmd.dispatch(pipe,
                   spec::bound<B>(
                       {{B::B_X, xb.range}, {B::B_WQUANT, v.quant.range}, {B::B_Y, yb.range}, {B::B_WMETA, v.meta.range}}),
                   &push, sizeof push, gx, gy, 1, op);
    }
  }
}

}  // namespace reach
