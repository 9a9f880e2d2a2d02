// The chosen experts' mat-vec (shaders/moe_matvec.comp, moe_matvec_q.comp): for decode rows, one dispatch per
// projection multiplies every (row, expert) slot the router chose by its expert's matrix, the expert id read
// on the device.  The experts of a projection are one stack (ExpertStack: expert e at a fixed stride in one
// buffer); a stack larger than one binding is bound a group of experts at a time, one dispatch per group,
// each of whose workgroups leaves at once when its slot's expert is another group's.
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
#include "kernels/quant_binding.hpp"
#include "kernels/spec.hpp"

namespace reach {

namespace {

static_assert(sizeof(spec::MoeMatvecPush) == 80);
static_assert(uint32_t(MoeActivation::none) == spec::MOE_ACT_NONE && uint32_t(MoeActivation::silu) == spec::MOE_ACT_SILU &&
              uint32_t(MoeActivation::gelu_tanh) == spec::MOE_ACT_GELU_TANH &&
              uint32_t(MoeActivation::swiglu_clamped) == spec::MOE_ACT_SWIGLU_CLAMPED);

ShaderId float_shader(WType t) {
  switch (t) {
    case WType::f32: return ShaderId::moe_matvec_f32;
    case WType::f16: return ShaderId::moe_matvec_f16;
    case WType::bf16: return ShaderId::moe_matvec_bf16;
    default: throw Error(ErrorCode::internal, std::string("moe_matvec: no float kernel for ") + wtype_name(t));
  }
}

}  // namespace

ExpertStack expert_stack(std::span<const Mat> experts) {
  if (experts.empty()) throw Error(ErrorCode::internal, "expert_stack: no experts");
  ExpertStack s{experts[0], 0, uint32_t(experts.size())};
  if (experts.size() > 1) s.stride = experts[1].offset - experts[0].offset;
  for (size_t e = 0; e < experts.size(); ++e) {
    const Mat& m = experts[e];
    if (m.buffer != s.first.buffer || m.type != s.first.type || m.rows != s.first.rows || m.cols != s.first.cols ||
        m.offset != s.first.offset + e * s.stride || (e > 0 && s.stride < m.bytes()))
      throw Error(ErrorCode::internal, "expert_stack: expert " + std::to_string(e) +
                                           " is not at its place in one stacked buffer (same type and shape, a "
                                           "fixed stride)");
  }
  return s;
}

void Kernels::moe_matvec(CommandList& cmd, std::span<const Mat> experts, const MoeMatvecArgs& a) {
  const ExpertStack st = expert_stack(experts);
  const Mat& w0 = st.first;
  const uint32_t N = w0.rows, K = w0.cols, E = st.count;
  const bool gated = a.act != MoeActivation::none;
  const Capabilities& caps = device_.caps();
  if (a.x.cols != (gated ? 2 * K : K) || a.x_div == 0 || uint64_t(a.x.rows) * a.x_div < a.slots ||
      a.y.cols < N || a.y.rows < a.slots || a.ids.size < uint64_t(a.slots) * 4 ||
      (a.bias.size && a.bias.size < uint64_t(E) * N * 4) || (a.norm.size && (gated || a.norm.size < uint64_t(K) * 4)))
    throw Error(ErrorCode::internal, "moe_matvec: shapes disagree (W [" + std::to_string(N) + ", " + std::to_string(K) +
                                         "], x [" + std::to_string(a.x.rows) + ", " + std::to_string(a.x.cols) +
                                         "], " + std::to_string(a.slots) + " slots)");
  if (a.slots == 0) return;
  const uint64_t align = std::max<uint64_t>(caps.min_storage_buffer_offset_alignment, 16);
  // X from a start a texel view may take too (moe_matvec_q_xtex).
  const uint64_t xalign = std::max<uint64_t>(align, caps.min_texel_buffer_offset_alignment);
  const Bound xb = bind_aligned(*a.x.buffer, a.x.offset, uint64_t(a.x.rows) * a.x.cols * 4, 4, xalign);
  const Bound ib = bind_aligned(a.ids, uint64_t(a.slots) * 4, 4, align);
  const Bound yb = bind_aligned(*a.y.buffer, a.y.offset, (uint64_t(a.slots - 1) * a.y.cols + N) * 4, 4, align);
  const Bound bb = a.bias.size ? bind_aligned(a.bias, a.bias.size, 4, align) : yb;
  const Bound nb = a.norm.size ? bind_aligned(a.norm, uint64_t(K) * 4, 4, align) : yb;   // unread without a norm

  const KernelConfig& cfg = config_;
  const uint32_t mode = cfg.matvec_mode != spec::MATVEC_MODE_ROW_PER_LANE && caps.has_subgroup_arithmetic()
                            ? spec::MATVEC_MODE_SUBGROUP
                            : spec::MATVEC_MODE_ROW_PER_LANE;
  const uint32_t wg = cfg.matvec_wg, rows = std::max<uint32_t>(1, cfg.matvec_rows);
  const uint32_t gx = groups_for(N, mode == spec::MATVEC_MODE_ROW_PER_LANE ? uint64_t(wg) * rows : rows);

  spec::MoeMatvecPush push{};
  push.N = N, push.K = K, push.slots = a.slots, push.x_div = a.x_div, push.x_stride = a.x.cols;
  push.x_off = xb.elem_off, push.ids_off = ib.elem_off, push.y_off = yb.elem_off, push.ldy = a.y.cols;
  push.b_off = a.bias.size ? bb.elem_off : 0, push.alpha = a.alpha, push.limit = a.limit;
  push.eps = a.eps, push.norm_off = a.norm.size ? nb.elem_off : 0;
  const bool quant = wtype_is_quant(w0.type);
  const uint64_t wbytes = w0.bytes();

  // Experts per binding: as many whole strides as the binding span holds (the last expert's own bytes).
  uint64_t span = 0, walign = align;
  QuantWeightBinding qb;
  if (quant) {
    qb = plan_quant_weight(caps, cfg, w0, "moe_matvec");
    walign = qb.walign;
    span = qb.tex ? std::min<uint64_t>(binding_span(caps, cfg.max_binding), 2 * uint64_t(caps.max_texel_buffer_elements)) -
                        qb.walign
                  : qb.room;
  } else {
    if (w0.type != WType::f32) require_16bit_storage(caps, std::string("moe_matvec: ") + wtype_name(w0.type) + " experts");
    if (w0.offset % wtype_size(w0.type) || st.stride % wtype_size(w0.type))
      throw Error(ErrorCode::internal, "moe_matvec: experts not at whole elements");
    span = binding_span(caps, cfg.max_binding) - align;
  }
  if (wbytes > span)
    throw Error(ErrorCode::unsupported, "moe_matvec: one expert's matrix (" + std::to_string(wbytes) +
                                            " bytes) exceeds one binding (" + std::to_string(span) + " bytes)");
  const uint32_t per = E == 1 || st.stride == 0 ? E
                       : uint32_t(std::min<uint64_t>(E, (span - wbytes) / st.stride + 1));
  if (per > 1 && st.stride % walign)
    throw Error(ErrorCode::internal, "moe_matvec: the experts' stride is not a multiple of the binding alignment");

  for (uint32_t e0 = 0; e0 < E; e0 += per) {
    const uint32_t cnt = std::min(per, E - e0);
    const uint64_t start = w0.offset + uint64_t(e0) * st.stride, bytes = uint64_t(cnt - 1) * st.stride + wbytes;
    push.e0 = e0, push.ecount = cnt;
    if (quant) {
      const Bound wq = bind_aligned(*w0.buffer, start, bytes, 16, walign);
      BufferRange wr = wq.range;
      // Whole 16-byte units and texels (the 256-byte stride pads every expert; mxfp4's meta ends mid-unit).
      wr.size = (wr.size + 15) / 16 * 16;
      push.q_off = wq.elem_off, push.w_stride = uint32_t(st.stride / 16);
      const uint64_t meta_unit = w0.type == WType::mxfp4 ? 1 : 2;
      push.m_off = uint32_t((uint64_t(wq.elem_off) * 16 + qb.quant_total) / meta_unit);
      push.m_stride = uint32_t(st.stride / meta_unit);
      const bool aligned = xb.elem_off % 4 == 0 && a.x.cols % 4 == 0;
      // X through texels too where the dense mat-vec would (CPU devices: vectorised gathers).
      const bool xtex = qb.tex && aligned && cfg.activations_texel && arena_texel_readable(a.x.buffer->arena()) &&
                        xb.range.size % 16 == 0 && xb.range.size / 16 <= caps.max_texel_buffer_elements;
      spec::MoeMatvecQSpec s;
      s.wg = wg, s.rows = rows, s.mode = mode, s.aligned = aligned, s.act = uint32_t(a.act);
      s.has_bias = a.bias.size != 0, s.qtype = uint32_t(w0.type), s.has_norm = a.norm.size != 0;
      using B = spec::MoeMatvecQBindings;
      PipelineDesc desc{xtex ? ShaderId::moe_matvec_q_xtex : qb.tex ? ShaderId::moe_matvec_q_tex : ShaderId::moe_matvec_q,
                        B::count, sizeof push, s.constants()};
      if (qb.tex) desc.texel(B::B_WQUANT, VK_FORMAT_R32G32B32A32_UINT).texel(B::B_WMETA, qb.meta_format);
      if (xtex) desc.texel(B::B_X, VK_FORMAT_R32G32B32A32_SFLOAT);
      cmd.dispatch(device_.pipelines().get(desc),
                   spec::bound<B>({{B::B_X, xb.range}, {B::B_WQUANT, wr}, {B::B_Y, yb.range}, {B::B_WMETA, wr},
                                   {B::B_IDS, ib.range}, {B::B_BIAS, bb.range}, {B::B_NORM, nb.range}}),
                   &push, sizeof push, gx, a.slots, 1, "moe_matvec");
    } else {
      const uint32_t es = wtype_size(w0.type);
      const Bound wb = bind_aligned(*w0.buffer, start, bytes, es, align);
      push.q_off = wb.elem_off, push.w_stride = uint32_t(st.stride / es), push.m_off = 0, push.m_stride = 0;
      const bool aligned = K % 4 == 0 && xb.elem_off % 4 == 0 && a.x.cols % 4 == 0 && wb.elem_off % 4 == 0 &&
                           push.w_stride % 4 == 0;
      spec::MoeMatvecSpec s;
      s.wg = wg, s.rows = rows, s.mode = mode, s.aligned = aligned, s.act = uint32_t(a.act);
      s.has_bias = a.bias.size != 0, s.has_norm = a.norm.size != 0;
      using B = spec::MoeMatvecBindings;
      cmd.dispatch(device_.pipelines().get({float_shader(w0.type), B::count, sizeof push, s.constants()}),
                   spec::bound<B>({{B::B_X, xb.range}, {B::B_W, wb.range}, {B::B_Y, yb.range}, {B::B_IDS, ib.range},
                                   {B::B_BIAS, bb.range}, {B::B_NORM, nb.range}}),
                   &push, sizeof push, gx, a.slots, 1, "moe_matvec");
    }
  }
}

}  // namespace reach
