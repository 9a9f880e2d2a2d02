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
#include "kernels/quant_binding.hpp"
#include "kernels/quant_layout.hpp"
#include "kernels/spec.hpp"

namespace reach {

using spec::LinearQPush;
// linear_gemm_q.comp and linear_matvec_q.comp declare the same bindings (linear_q_common.glsl).
using LinearQBindings = spec::LinearGemmQBindings;
static_assert(LinearQBindings::count == spec::LinearMatvecQBindings::count &&
              LinearQBindings::B_X == spec::LinearMatvecQBindings::B_X &&
              LinearQBindings::B_WQUANT == spec::LinearMatvecQBindings::B_WQUANT &&
              LinearQBindings::B_Y == spec::LinearMatvecQBindings::B_Y &&
              LinearQBindings::B_WMETA == spec::LinearMatvecQBindings::B_WMETA);
static_assert(sizeof(LinearQPush) == 32);

void record_linear_quant(Device& device, const KernelConfig& cfg, CommandList& cmd, const Act& x, const Mat& w,
                         const Act& y, bool use_matvec) {
  const char* op = use_matvec ? "linear_matvec_q" : "linear_gemm_q";
  const auto& caps = device.caps();
  const uint32_t M = x.rows, N = w.rows, K = w.cols;
  if (x.offset % 4 || y.offset % 4)
    throw Error(ErrorCode::internal, std::string(op) + ": X and Y offsets must be multiples of 4");
  const QuantWeightBinding wb = plan_quant_weight(caps, cfg, w, op);
  const QuantPlanes& planes = wb.planes;
  const uint64_t blocks_per_row = wb.blocks_per_row, quant_total = wb.quant_total;
  const uint32_t meta_texel = wb.meta_texel;
  const VkFormat meta_format = wb.meta_format;
  const bool tex = wb.tex;
  const uint64_t align = wb.align, walign = wb.walign, room = wb.room;
  const std::vector<RowChunk>& chunks = wb.chunks;

  const uint64_t row_bytes = std::max<uint64_t>(uint64_t(K) * 4, uint64_t(N) * 4);
  if (row_bytes > room)
    throw Error(ErrorCode::unsupported, std::string(op) + ": one activation row of " + std::to_string(row_bytes) +
                                            " bytes exceeds maxStorageBufferRange");
  const uint32_t m_step = static_cast<uint32_t>(std::min<uint64_t>(M, room / row_bytes));
  const bool x_arena_tex = arena_texel_readable(x.buffer->arena());
  const uint32_t qtype = static_cast<uint32_t>(w.type);

  spec::MatvecQSpec mv;
  spec::GemmQSpec gm;
  uint32_t gx_per = 1, gy_per = 1, xrows = 1;
  if (use_matvec) {
    const uint32_t wg = cfg.matvec_wg;
    uint32_t rows = 1;
    cfg.matvec_tiling(m_step, xrows, rows);
    if (wg == 0 || wg > caps.max_workgroup_invocations ||
        (cfg.matvec_mode == spec::MATVEC_MODE_SHARED && (wg & (wg - 1))) || cfg.matvec_mode > spec::MATVEC_MODE_SHARED)
      throw Error(ErrorCode::internal, "matvec: bad config (wg " + std::to_string(wg) + ", mode " +
                                           std::to_string(cfg.matvec_mode) + ")");
    gx_per = cfg.matvec_mode == spec::MATVEC_MODE_ROW_PER_LANE ? wg * rows : rows;
    mv.wg = wg;
    mv.rows = rows;
    mv.mode = cfg.matvec_mode;
    mv.qtype = qtype;
    mv.xrows = xrows;
    mv.xsh = cfg.matvec_xsh(K, xrows, rows, caps);
  } else {
    // The register variant has its own tile for quantized W (KernelConfig::qgemm_*).
    const bool own = !cfg.gemm_shared;
    const uint32_t tm = std::max(own && cfg.qgemm_tm ? cfg.qgemm_tm : cfg.gemm_tm, 1u);
    const uint32_t tn = std::max(own && cfg.qgemm_tn ? cfg.qgemm_tn : cfg.gemm_tn, 1u);
    uint32_t wg = cfg.gemm_wg, tile_m = 1, tile_n = 1;
    if (cfg.gemm_shared) {
      tile_m = cfg.gemm_tile_m;
      tile_n = cfg.gemm_tile_n;
      if (tile_m % tm || tile_n % tn)
        throw Error(ErrorCode::internal, "gemm: shared tile must be a multiple of the register tile");
      wg = (tile_m / tm) * (tile_n / tn);
      if (uint64_t(tile_m + tile_n) * 33 * 4 > caps.max_shared_memory)
        throw Error(ErrorCode::internal, "gemm: shared tiles exceed maxComputeSharedMemorySize");
      gx_per = tile_n;
      gy_per = tile_m;
    } else {
      // The subgroup-broadcast variant of the float kernel has no quantized twin:
      // decoding dominates, and each decoded W sub-block is already reused TM times.
      gx_per = wg * tn;
      gy_per = tm;
    }
    if (wg == 0 || wg > caps.max_workgroup_invocations)
      throw Error(ErrorCode::internal, "gemm: workgroup of " + std::to_string(wg) + " invocations not allowed");
    gm.wg = wg;
    gm.tm = tm;
    gm.tn = tn;
    gm.use_shared = cfg.gemm_shared ? 1u : 0u;
    gm.tile_m = tile_m;
    gm.tile_n = tile_n;
    gm.qtype = qtype;
  }

  static constexpr ShaderId kShaders[2][3] = {{ShaderId::linear_gemm_q, ShaderId::linear_gemm_q_tex, ShaderId::linear_gemm_q_xtex},
                                              {ShaderId::linear_matvec_q, ShaderId::linear_matvec_q_tex, ShaderId::linear_matvec_q_xtex}};
  for (uint32_t m0 = 0; m0 < M; m0 += m_step) {
    const uint32_t mc = std::min(m_step, M - m0);
    const Bound xb = bind_aligned(*x.buffer, x.offset + VkDeviceSize(m0) * K * 4, VkDeviceSize(mc) * K * 4, 4, walign);
    const Bound yb = bind_aligned(*y.buffer, y.offset + VkDeviceSize(m0) * N * 4, VkDeviceSize(mc) * N * 4, 4, align);
    const bool aligned = xb.elem_off % 4 == 0;
    const bool xtex = tex && aligned && cfg.activations_texel && x_arena_tex && xb.range.size % 16 == 0 &&
                      xb.range.size / 16 <= caps.max_texel_buffer_elements;
    mv.aligned = gm.aligned = aligned ? 1u : 0u;
    using B = LinearQBindings;
    PipelineDesc desc{kShaders[use_matvec ? 1 : 0][xtex ? 2 : tex ? 1 : 0], B::count, sizeof(LinearQPush),
                      use_matvec ? mv.constants() : gm.constants()};
    if (tex) desc.texel(B::B_WQUANT, VK_FORMAT_R32G32B32A32_UINT).texel(B::B_WMETA, meta_format);
    if (xtex) desc.texel(B::B_X, VK_FORMAT_R32G32B32A32_SFLOAT);
    const auto& pipe = device.pipelines().get(desc);
    for (const RowChunk& c : chunks) {
      const uint64_t blocks0 = uint64_t(c.first_row) * blocks_per_row, nblocks = uint64_t(c.rows) * blocks_per_row;
      const Bound qb = bind_aligned(*w.buffer, w.offset + blocks0 * planes.quant_bytes, nblocks * planes.quant_bytes,
                                    16, walign);
      // Texel meta: bound in whole meta texels (each chunk starts at a block, and
      // meta_texel divides both 16 and the block's meta bytes); the push offset stays in 2-byte units.
      // mxfp4 (1-byte meta) binds byte offsets and its push offset counts bytes.
      const uint32_t unit = quant_meta_unit_bytes(w.type), meta_unit = tex && unit == 2 ? meta_texel : unit;
      Bound mb = bind_aligned(*w.buffer, w.offset + quant_total + blocks0 * planes.meta_bytes,
                              nblocks * planes.meta_bytes, meta_unit, walign);
      mb.range.size = (mb.range.size + 1) / 2 * 2;   // whole 16-bit units (mxfp4's device copy is padded)
      const uint32_t m_off = mb.elem_off * meta_unit / unit;
      const LinearQPush push{mc, c.rows, K, xb.elem_off, qb.elem_off, m_off, yb.elem_off + c.first_row, N};
      const uint32_t gx = groups_for(c.rows, gx_per);
      const uint32_t gy = groups_for(mc, use_matvec ? xrows : gy_per);
      cmd.dispatch(pipe,
                   spec::bound<B>(
                       {{B::B_X, xb.range}, {B::B_WQUANT, qb.range}, {B::B_Y, yb.range}, {B::B_WMETA, mb.range}}),
                   &push, sizeof push, gx, gy, 1, op);
    }
  }
}

}  // namespace reach
