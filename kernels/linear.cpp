// The linear family: Kernels::linear / linear_gemm / linear_matvec, Y[M, N] = X[M, K] · Wᵀ,
// W [N, K] in f32, f16 or bf16, f32 accumulation (shaders/linear_gemm.comp,
// shaders/linear_matvec.comp).
//
// Binding rules (kernels/binding.hpp) as they apply here:
//  * every descriptor offset is rounded down to minStorageBufferOffsetAlignment
//    and the remainder passed as an element offset in push constants;
//  * a weight larger than max_binding (maxStorageBufferRange) is bound as row
//    chunks (split_rows), one dispatch each, writing output columns
//    [first_row, first_row + rows) of Y through the push-constant y offset;
//  * X and Y larger than max_binding are split along M the same way.
//  * with KernelConfig::weights_texel (CPU devices), W in Arena::weights is
//    read through a uniform texel buffer of 4 weights per texel (*_tex_*
//    kernels): the view starts at a multiple of minTexelBufferOffsetAlignment,
//    spans whole texels and at most maxTexelBufferElements; a chunk whose last
//    texel would pass the end of the buffer uses the storage-buffer kernel.
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
#include "kernels/linear_plan.hpp"
#include "kernels/spec.hpp"

namespace reach {

void KernelConfig::choose_linear(const Capabilities& caps) {
  const uint32_t max_inv = std::max(caps.max_workgroup_invocations, 1u);
  if (caps.is_cpu()) {
    // llvmpipe-style: a workgroup runs on one thread, 8 lanes at a time, and a
    // barrier switches lane groups.  Register tiles, no shared memory, no
    // reduction; loads of X are uniform across the lanes.
    gemm_shared = false;
    // With a fixed subgroup size the lanes load different X rows and share
    // them by subgroupBroadcast: ~2x fewer per-lane loads (llvmpipe 22.x
    // turns every non-uniform SSBO load into a scalar per-lane loop, so
    // loads, not FMAs, bound the kernel).  Measured on lavapipe (2 cores).
    gemm_bcast = caps.subgroup_min == caps.subgroup_max && caps.subgroup_size >= 1 &&
                 caps.subgroup_size <= max_inv && (caps.subgroup_ops & VK_SUBGROUP_FEATURE_BALLOT_BIT) &&
                 (caps.subgroup_ops & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    gemm_wg = gemm_bcast ? caps.subgroup_size : std::min(64u, max_inv);
    // 1 x 4: measured best on lavapipe with texel X and W (576^3 f16: 6.7
    // GFLOP/s per CPU-second vs 2.8 at 4 x 4, whose accumulators spill).
    gemm_tm = 1;
    gemm_tn = 4;
    matvec_mode = spec::MATVEC_MODE_ROW_PER_LANE;
    // One subgroup per workgroup and 16 W rows per invocation: decode's small matrices (k/v 192 rows,
    // q/o 576) then spread over more, smaller workgroups that llvmpipe's threads share evenly (measured on
    // SmolLM2-135M tg128: WG 16 x 8 rows 23.4 tok/s f16 / 29.5 Q4_1, WG 8 x 16 rows 26.1 / 37.7; 8 x 24
    // the same as 8 x 16, WG 4 17 tok/s).
    matvec_wg = std::min(8u, max_inv);
    matvec_rows = 16;
    // Batched decode (M = 2..8) reads W once per workgroup for all X rows.
    // Mode 0 keeps rows x xrows accumulators per lane; llvmpipe spills them
    // to the stack at 8 x 8, but that is L1 traffic and still the fastest
    // (measured on lavapipe, 1536x576 at M = 8: 64 accumulators 0.75 ms f16 /
    // 0.65 ms q4_1, 32: 1.0 / 0.92, 8: 1.5 / 1.46, one W read per X row:
    // 1.9 / 1.0), so no cap.
    linear_matvec_max_m = 8;
    matvec_xrows = 8;
    matvec_max_acc = 64;
    // llvmpipe (Mesa 22.3) compiles a texelFetch to a vectorised gather but a
    // per-lane SSBO load to a scalar loop with a bounds check per element:
    // measured on lavapipe, 4096x4096 f16 matvec 0.43 -> 1.3 GB/s per CPU-second.
    // Used only where the weight format supports uniform texel buffers
    // (checked when recording).
    weights_texel = true;
    // The same for the activations X (with texel weights and aligned shapes).
    activations_texel = true;
  } else {
    // GPUs: shared-memory tiled GEMM; matvec with lanes splitting K and a
    // subgroup (or shared-memory) reduction, so W reads are coalesced.
    gemm_bcast = false;
    gemm_shared = caps.max_shared_memory >= 16384;
    gemm_tile_m = gemm_tile_n = 64;
    gemm_tm = gemm_tn = 4;
    gemm_bk = 16;
    gemm_wg = (gemm_tile_m / gemm_tm) * (gemm_tile_n / gemm_tn);   // 256
    if (gemm_wg > max_inv || !gemm_shared) {
      gemm_shared = false;
      gemm_wg = std::min(64u, max_inv);
      gemm_tm = 4;
      gemm_tn = 1;
    }
    const uint32_t sg = std::max(caps.subgroup_size, 1u);
    matvec_mode = caps.has_subgroup_arithmetic() ? spec::MATVEC_MODE_SUBGROUP : spec::MATVEC_MODE_SHARED;
    // X staged once per workgroup in shared memory, read by 256 lanes' rows (8 subgroups of
    // 32): on an H100, with 64-lane workgroups re-reading X per row, 1B f16 decode moved 975 GB/s
    // of weights and Q4_0 only 186.
    matvec_xshared = true;
    matvec_wg = std::min(std::max(sg, 256u), max_inv);
    // One row per subgroup: 8 rows per 64-lane workgroup left an H200 at a few
    // percent occupancy on a 4096-row decode matvec (512 workgroups), 588 GB/s.
    matvec_rows = matvec_mode == spec::MATVEC_MODE_SUBGROUP ? std::max(1u, matvec_wg / sg) : 8;
    // Batched decode: a subgroup reduces up to 8 X rows per W row it reads.
    linear_matvec_max_m = 8;
    matvec_xrows = 8;
    matvec_max_acc = 0;
    weights_texel = false;   // SSBO loads are coalesced on GPUs
    activations_texel = false;
  }
}

uint32_t KernelConfig::matvec_xsh(uint32_t K, uint32_t xrows, uint32_t rows, const Capabilities& caps) const {
  // Subgroups of at least 8 lanes: the shader keeps one partial sum per 8 invocations.
  if (!matvec_xshared || matvec_mode == spec::MATVEC_MODE_ROW_PER_LANE || K % 4 || caps.subgroup_min < 8) return 0;
  const uint64_t red = matvec_mode == spec::MATVEC_MODE_SHARED ? uint64_t(rows) * matvec_wg * 4 : 4;
  const uint64_t partials = uint64_t(xrows) * ((matvec_wg + 7) / 8) * 4 + red;
  const uint32_t exact = xrows * (K / 4);
  if (uint64_t(exact) * 16 + partials > caps.max_shared_memory) return 0;
  // The shader loops to K (a push constant); XSH only sizes the array, and each value is its own pipeline.
  // Rounded up to 1 KiB where that still fits, shapes whose K differ a little share one pipeline; the K of
  // real models (multiples of 256) keep their exact size.
  const uint32_t rounded = (exact + 63) / 64 * 64;
  return uint64_t(rounded) * 16 + partials <= caps.max_shared_memory ? rounded : exact;
}

void KernelConfig::matvec_tiling(uint32_t M, uint32_t& xrows, uint32_t& rows) const {
  const uint32_t cap = std::clamp(matvec_xrows, 1u, 8u);
  xrows = 1;
  while (xrows < M && xrows < cap) xrows *= 2;
  if (xrows > cap) xrows = cap;
  rows = std::max(matvec_rows, 1u);
  if (matvec_mode == spec::MATVEC_MODE_ROW_PER_LANE && matvec_max_acc)
    rows = std::max(1u, std::min(rows, matvec_max_acc / xrows));
}

namespace {

using spec::LinearPush;
static_assert(sizeof(LinearPush) == 32);

VkFormat texel_format(WType t) {
  switch (t) {
    case WType::f32: return VK_FORMAT_R32G32B32A32_SFLOAT;
    case WType::f16: return VK_FORMAT_R16G16B16A16_SFLOAT;
    default: return VK_FORMAT_R16G16B16A16_UINT;   // bf16 bits, decoded by shift
  }
}

// linear_gemm.comp and linear_matvec.comp declare the same bindings (spec/linear_bindings.h).
using LinearBindings = spec::LinearGemmBindings;

// Kernel variants by [op][read path][weight type]; read path 0: storage
// buffers, 1: W through texel buffers, 2: W and X through texel buffers.
constexpr ShaderId kLinearKernels[2][3][3] = {
    {{ShaderId::linear_gemm_f32, ShaderId::linear_gemm_f16, ShaderId::linear_gemm_bf16},
     {ShaderId::linear_gemm_tex_f32, ShaderId::linear_gemm_tex_f16, ShaderId::linear_gemm_tex_bf16},
     {ShaderId::linear_gemm_xtex_f32, ShaderId::linear_gemm_xtex_f16, ShaderId::linear_gemm_xtex_bf16}},
    {{ShaderId::linear_matvec_f32, ShaderId::linear_matvec_f16, ShaderId::linear_matvec_bf16},
     {ShaderId::linear_matvec_tex_f32, ShaderId::linear_matvec_tex_f16, ShaderId::linear_matvec_tex_bf16},
     {ShaderId::linear_matvec_xtex_f32, ShaderId::linear_matvec_xtex_f16, ShaderId::linear_matvec_xtex_bf16}}};

std::string shape(const Act& x, const Mat& w, const Act& y) {
  return "X[" + std::to_string(x.rows) + "," + std::to_string(x.cols) + "] W[" + std::to_string(w.rows) + "," +
         std::to_string(w.cols) + "]:" + wtype_name(w.type) + " Y[" + std::to_string(y.rows) + "," +
         std::to_string(y.cols) + "]";
}

}  // namespace

MatvecPlan plan_matvec(const KernelConfig& cfg, const Capabilities& caps, uint32_t m_step, uint32_t K) {
  MatvecPlan p;
  p.wg = cfg.matvec_wg;
  p.mode = cfg.matvec_mode;   // a spec::MATVEC_MODE_* value
  if (p.wg == 0 || p.wg > caps.max_workgroup_invocations ||
      (p.mode == spec::MATVEC_MODE_SHARED && (p.wg & (p.wg - 1))) || p.mode > spec::MATVEC_MODE_SHARED)
    throw Error(ErrorCode::internal, "matvec: bad config (wg " + std::to_string(p.wg) + ", mode " +
                                         std::to_string(p.mode) + ")");
  cfg.matvec_tiling(m_step, p.xrows, p.rows);
  p.gx_per = p.mode == spec::MATVEC_MODE_ROW_PER_LANE ? p.wg * p.rows : p.rows;
  p.xsh = cfg.matvec_xsh(K, p.xrows, p.rows, caps);
  return p;
}

GemmPlan plan_gemm(const KernelConfig& cfg, const Capabilities& caps, bool quant) {
  GemmPlan p;
  p.shared = cfg.gemm_shared;
  // The register variant has its own tile for quantized W (KernelConfig::qgemm_*).
  const bool own = quant && !p.shared;
  p.tm = std::max(own && cfg.qgemm_tm ? cfg.qgemm_tm : cfg.gemm_tm, 1u);
  p.tn = std::max(own && cfg.qgemm_tn ? cfg.qgemm_tn : cfg.gemm_tn, 1u);
  p.wg = cfg.gemm_wg;
  if (p.shared) {
    p.tile_m = cfg.gemm_tile_m;
    p.tile_n = cfg.gemm_tile_n;
    p.bk = quant ? 32 : std::max(cfg.gemm_bk, 1u);   // quantized W: one sub-block per K step
    if (p.tile_m % p.tm || p.tile_n % p.tn)
      throw Error(ErrorCode::internal, "gemm: shared tile must be a multiple of the register tile");
    p.wg = (p.tile_m / p.tm) * (p.tile_n / p.tn);
    if (uint64_t(p.tile_m + p.tile_n) * (p.bk + 1) * 4 > caps.max_shared_memory)
      throw Error(ErrorCode::internal, "gemm: shared tiles exceed maxComputeSharedMemorySize");
    p.gx_per = p.tile_n;
    p.gy_per = p.tile_m;
  } else {
    // The shared arrays are still declared: keep them tiny (tile 1 x 1, bk 1).  The subgroup-broadcast
    // variant of the float kernel has no quantized twin: decoding dominates, and each decoded W
    // sub-block is already reused TM times.
    p.bcast = !quant && cfg.gemm_bcast;
    if (p.bcast && (cfg.subgroup == 0 || p.wg % cfg.subgroup || caps.subgroup_min != caps.subgroup_max ||
                    cfg.subgroup != caps.subgroup_size))
      throw Error(ErrorCode::internal, "gemm: the shuffle variant needs a fixed subgroup size dividing the workgroup");
    p.gx_per = p.wg * p.tn;
    p.gy_per = p.bcast ? cfg.subgroup * p.tm : p.tm;
  }
  if (p.wg == 0 || p.wg > caps.max_workgroup_invocations)
    throw Error(ErrorCode::internal, "gemm: workgroup of " + std::to_string(p.wg) + " invocations not allowed");
  return p;
}

FloatChunkView bind_float_chunk(const Capabilities& caps, const Mat& w, const RowChunk& c, uint32_t esize, bool tex,
                                uint64_t walign, uint64_t align, const char* op) {
  const uint64_t K = w.cols;
  const VkDeviceSize start = w.offset + VkDeviceSize(c.first_row) * K * esize;
  const VkDeviceSize bytes = VkDeviceSize(c.rows) * K * esize;
  FloatChunkView v;
  v.w = bind_aligned(*w.buffer, start, bytes, esize, tex ? walign : align);
  // A texel view spans whole texels; if rounding up would pass the end
  // of the buffer this chunk falls back to the storage-buffer kernel.
  const uint64_t tbytes = 4ull * esize;
  const VkDeviceSize tsize = (v.w.range.size + tbytes - 1) / tbytes * tbytes;
  if (tex && v.w.range.offset + tsize <= w.buffer->size()) {
    v.w.range.size = tsize;
    v.tex = true;
  } else if (tex) {
    if (w.type != WType::f32)
      require_16bit_storage(caps, std::string(op) + ": " + wtype_name(w.type) + " weights (a chunk of partial texels)");
    v.w = bind_aligned(*w.buffer, start, bytes, esize, align);
  }
  return v;
}

// Quantized weights (kernels/linear_quant.cpp), called once shapes are valid and non-empty.
void record_linear_quant(Device& device, const KernelConfig& cfg, CommandList& cmd, const Act& x, const Mat& w,
                         const Act& y, bool use_matvec);

// Shared driver of gemm() and matvec(): validation, splitting, dispatch.
static void record_linear(Device& device, const KernelConfig& cfg, CommandList& cmd, const Act& x, const Mat& w,
                          const Act& y, bool use_matvec) {
  const char* op = use_matvec ? "linear_matvec" : "linear_gemm";
  if (!x.buffer || !w.buffer || !y.buffer)
    throw Error(ErrorCode::internal, std::string(op) + ": null buffer");
  if (x.cols != w.cols || y.cols != w.rows || y.rows != x.rows || x.cols == 0)
    throw Error(ErrorCode::internal, std::string(op) + ": shape mismatch " + shape(x, w, y));
  if (x.rows == 0 || w.rows == 0) return;
  if (wtype_is_quant(w.type)) return record_linear_quant(device, cfg, cmd, x, w, y, use_matvec);
  const auto& caps = device.caps();
  const uint32_t esize = wtype_size(w.type);
  // Texel-buffer weights: only from arenas whose buffers have
  // UNIFORM_TEXEL_BUFFER usage and where the format is supported.
  const VkFormat tformat = texel_format(w.type);
  const uint64_t tbytes = 4ull * esize;   // 4 weights per texel
  const uint64_t max_texels = caps.max_texel_buffer_elements;
  bool tex = cfg.weights_texel && arena_texel_readable(w.buffer->arena()) && caps.supports_uniform_texel(tformat) &&
             max_texels * tbytes > 1024;
  if (w.type != WType::f32 && !tex) require_16bit_storage(caps, std::string(op) + ": " + wtype_name(w.type) + " weights");
  if (x.offset % 4 || y.offset % 4 || w.offset % esize)
    throw Error(ErrorCode::internal, std::string(op) + ": offsets must be multiples of the element size");
  const uint64_t align = std::max<uint64_t>(caps.min_storage_buffer_offset_alignment, 16);
  const uint64_t max_binding = binding_span(caps, cfg.max_binding);
  if (max_binding <= 2 * align) throw Error(ErrorCode::internal, std::string(op) + ": max_binding too small");
  const uint64_t room = max_binding - align;   // an aligned-down start adds < align bytes

  const uint32_t M = x.rows, N = w.rows, K = w.cols;
  // Rows of X/Y per pass so that both bindings fit.
  const uint64_t row_bytes = std::max<uint64_t>(uint64_t(K) * 4, uint64_t(N) * 4);
  if (row_bytes > room)
    throw Error(ErrorCode::unsupported, std::string(op) + ": one activation row of " + std::to_string(row_bytes) +
                                            " bytes exceeds maxStorageBufferRange");
  uint32_t m_step = static_cast<uint32_t>(std::min<uint64_t>(M, room / row_bytes));

  // Weight row chunks.  With an aligned W start, split_rows keeps every chunk
  // start aligned; otherwise each chunk start is rounded down when bound,
  // which `room` leaves space for.
  // Texel views also need minTexelBufferOffsetAlignment (a power of two like
  // the storage alignment) and at most maxTexelBufferElements texels, plus up
  // to one texel of rounding at the end.
  const uint64_t talign = caps.min_texel_buffer_offset_alignment;
  if (tex && std::min<uint64_t>(max_binding, max_texels * tbytes - tbytes) <= 2 * std::max<uint64_t>(align, talign))
    tex = false;
  const uint64_t walign = tex ? std::max<uint64_t>(align, talign) : align;
  uint64_t wroom = room;
  if (tex) wroom = std::min<uint64_t>(max_binding, max_texels * tbytes - tbytes) - walign;
  const auto chunks = split_rows(w, wroom, w.offset % walign ? 1 : walign);

  // Spec constants and grid.
  const auto& kernels = kLinearKernels[use_matvec ? 1 : 0];
  const auto wt = static_cast<uint32_t>(w.type);
  // X through a texel buffer too (with texel weights and aligned shapes).
  const bool x_arena_tex = arena_texel_readable(x.buffer->arena());
  uint32_t gx_per = 1, gy_per = 1;
  spec::MatvecSpec mv;
  spec::GemmSpec gm;
  const bool aligned = K % 4 == 0;
  if (use_matvec) {
    const MatvecPlan plan = plan_matvec(cfg, caps, m_step, K);
    gx_per = plan.gx_per;
    gy_per = plan.xrows;
    mv.wg = plan.wg;
    mv.rows = plan.rows;
    mv.mode = plan.mode;
    mv.xrows = plan.xrows;
    mv.xsh = plan.xsh;
  } else {
    const GemmPlan plan = plan_gemm(cfg, caps, false);
    gx_per = plan.gx_per;
    gy_per = plan.gy_per;
    gm.wg = plan.wg;
    gm.tm = plan.tm;
    gm.tn = plan.tn;
    gm.use_shared = plan.shared ? 1u : 0u;
    gm.tile_m = plan.tile_m;
    gm.tile_n = plan.tile_n;
    gm.bk = plan.bk;
    gm.bcast = plan.bcast ? 1u : 0u;
    gm.subgroup = std::max(cfg.subgroup, 1u);
  }

  for (uint32_t m0 = 0; m0 < M; m0 += m_step) {
    const uint32_t mc = std::min(m_step, M - m0);
    const Bound xb = bind_aligned(*x.buffer, x.offset + VkDeviceSize(m0) * K * 4, VkDeviceSize(mc) * K * 4, 4,
                          tex ? walign : align);
    const Bound yb = bind_aligned(*y.buffer, y.offset + VkDeviceSize(m0) * N * 4, VkDeviceSize(mc) * N * 4, 4, align);
    for (const RowChunk& c : chunks) {
      const FloatChunkView v = bind_float_chunk(caps, w, c, esize, tex, walign, align, op);
      const Bound& wb = v.w;
      const bool tex_chunk = v.tex;
      const bool al = aligned && xb.elem_off % 4 == 0 && wb.elem_off % 4 == 0;
      mv.aligned = gm.aligned = al ? 1u : 0u;
      const bool xtex = tex_chunk && al && cfg.activations_texel && x_arena_tex && xb.range.size % 16 == 0 &&
                        xb.range.size / 16 <= max_texels;
      using B = LinearBindings;
      PipelineDesc desc{kernels[xtex ? 2 : tex_chunk ? 1 : 0][wt], B::count, sizeof(LinearPush),
                        use_matvec ? mv.constants() : gm.constants()};
      if (tex_chunk) desc.texel(B::B_W, tformat);
      if (xtex) desc.texel(B::B_X, VK_FORMAT_R32G32B32A32_SFLOAT);
      const auto& pipe = device.pipelines().get(desc);
      LinearPush push{mc, c.rows, K, xb.elem_off, wb.elem_off, yb.elem_off + c.first_row, N, 0};
      const uint32_t gx = groups_for(c.rows, gx_per);
      const uint32_t gy = groups_for(mc, gy_per);
      cmd.dispatch(pipe, spec::bound<B>({{B::B_X, xb.range}, {B::B_W, wb.range}, {B::B_Y, yb.range}}), &push,
                   sizeof push, gx, gy, 1, op);
    }
  }
}

void Kernels::linear_gemm(CommandList& cmd, const Act& x, const Mat& w, const Act& y) {
  if (linear_int8(cmd, x, w, y)) return;
  record_linear(device_, config_, cmd, x, w, y, false);
}

void Kernels::linear_matvec(CommandList& cmd, const Act& x, const Mat& w, const Act& y) {
  if (linear_int8(cmd, x, w, y)) return;
  record_linear(device_, config_, cmd, x, w, y, true);
}

void Kernels::linear(CommandList& cmd, const Act& x, const Mat& w, const Act& y) {
  if (linear_int8(cmd, x, w, y)) return;
  const bool matvec = x.rows <= config_.linear_matvec_max_m;
  if (!matvec && use_coopmat(x, w)) return linear_gemm_coopmat(cmd, x, w, y);
  record_linear(device_, config_, cmd, x, w, y, matvec);
}

}  // namespace reach
