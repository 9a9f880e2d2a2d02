// The fused mat-vecs: Kernels::linear_matvec_fused (shaders/linear_matvec_fused.comp
// for f32 / f16 / bf16 W, shaders/linear_matvec_fused_q.comp for the block types).
// Decode's small kernels around the projections (RMSNorm before q/k/v and
// gate/up, SiLU or GELU-tanh times up before down, the bias of q/k/v, the
// residual add after o and down) move into the mat-vec's input loads and
// stores, and q/k/v (or gate/up) share one dispatch: on lavapipe those small
// dispatches cost about a third of a decode step.
//
// The binding rules are linear.cpp's / linear_quant.cpp's: aligned starts with
// element offsets in push constants, weights past the binding span in row
// chunks, X and Y split along M, texel buffers on CPU devices.  Outputs of one
// weight type whose W each fits one binding are one dispatch, the grid's x
// workgroups split between them (push constants g1, g2); otherwise each
// output chunk is its own dispatch (with the same fusions: bias and
// accumulate are per element, the norm per X row).  Unused output bindings
// repeat output 0's ranges, never read: the kernels' OUTS folds them away.
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

namespace {

using FB = spec::LinearMatvecFusedBindings;
using QB = spec::LinearMatvecFusedQBindings;
static_assert(sizeof(spec::LinearFusedPush) == 88 && sizeof(spec::LinearFusedQPush) == 100);
static_assert(static_cast<uint32_t>(GateActivation::silu) == spec::GATE_SILU &&
              static_cast<uint32_t>(GateActivation::gelu_tanh) == spec::GATE_GELU_TANH &&
              static_cast<uint32_t>(GateActivation::none) == spec::GATE_NONE);

VkFormat float_texel_format(WType t) {
  switch (t) {
    case WType::f32: return VK_FORMAT_R32G32B32A32_SFLOAT;
    case WType::f16: return VK_FORMAT_R16G16B16A16_SFLOAT;
    default: return VK_FORMAT_R16G16B16A16_UINT;   // bf16 bits, decoded by shift
  }
}

// A range `bytes` long at `off` inside r, from a start aligned down to `align`
// (f32 elements: elem_off in floats).
Bound align_range(const BufferRange& r, VkDeviceSize off, VkDeviceSize bytes, uint64_t align) {
  const VkDeviceSize at = r.offset + off, base = at / align * align;
  return {BufferRange{r.buffer, base, at - base + bytes}, static_cast<uint32_t>((at - base) / 4)};
}

bool overlap(const Buffer* a, VkDeviceSize ao, VkDeviceSize an, const Buffer* b, VkDeviceSize bo, VkDeviceSize bn) {
  return a == b && ao < bo + bn && bo < ao + an;
}

// One output's rows [chunk.first_row, + chunk.rows) in a dispatch.
struct Part {
  const MatvecOutput* out;
  RowChunk chunk;
};

// Bindings and push fields of one part, filled per kernel kind.
struct PartBinding {
  BufferRange w, meta, y, bias;
  uint32_t w_off = 0, m_off = 0, y_off = 0, b_off = 0;
  bool tex = false;
};

class FusedRecorder {
 public:
  FusedRecorder(Device& device, const KernelConfig& cfg, CommandList& cmd, const Act& x, const MatvecInput& in)
      : device_(device), caps_(device.caps()), cfg_(cfg), cmd_(cmd), x_(x), in_(in) {
    gated_ = in.gate != GateActivation::none;
    K_ = gated_ ? x.cols / 2 : x.cols;
    align_ = std::max<uint64_t>(caps_.min_storage_buffer_offset_alignment, 16);
    max_binding_ = binding_span(caps_, cfg.max_binding);
    if (max_binding_ <= 2 * align_) throw Error(ErrorCode::internal, "linear_matvec_fused: max_binding too small");
    room_ = max_binding_ - align_;
    plan_matvec(cfg, caps_, 1, K_);   // the config's checks, before anything is bound
  }

  // The outputs of one weight type.
  void record_type(const std::vector<const MatvecOutput*>& outs) {
    const WType type = outs[0]->w.type;
    quant_ = wtype_is_quant(type);
    uint32_t n_max = 0;
    for (const auto* o : outs) n_max = std::max(n_max, o->w.rows);
    const uint64_t row_bytes = std::max<uint64_t>(uint64_t(x_.cols) * 4, uint64_t(n_max) * 4);
    if (row_bytes > room_)
      throw Error(ErrorCode::unsupported, "linear_matvec_fused: one activation row of " + std::to_string(row_bytes) +
                                              " bytes exceeds maxStorageBufferRange");
    const uint32_t M = x_.rows;
    m_step_ = static_cast<uint32_t>(std::min<uint64_t>(M, room_ / row_bytes));
    x_tex_arena_ = arena_texel_readable(x_.buffer->arena());

    // The texel variants read the norm weights as a texel buffer too.
    bool arenas_tex = cfg_.weights_texel && (!in_.norm || in_.norm_texel);
    for (const auto* o : outs) arenas_tex = arenas_tex && arena_texel_readable(o->w.buffer->arena());
    std::vector<std::vector<RowChunk>> chunks;
    const uint64_t max_texels = caps_.max_texel_buffer_elements;
    if (quant_) {
      const uint32_t be = wtype_block_elems(type);
      if (K_ % be)
        throw Error(ErrorCode::internal, std::string("linear_matvec_fused: ") + wtype_name(type) + " weights need K (" +
                                             std::to_string(K_) + ") to be a multiple of " + std::to_string(be));
      meta_texel_ = quant_meta_texel_bytes(type);
      meta_format_ = meta_texel_ == 16 ? VK_FORMAT_R32G32B32A32_UINT : VK_FORMAT_R16_UINT;
      tex_ = arenas_tex && caps_.supports_uniform_texel(VK_FORMAT_R32G32B32A32_UINT) &&
             caps_.supports_uniform_texel(meta_format_);
      walign_ = tex_ ? std::max<uint64_t>(align_, caps_.min_texel_buffer_offset_alignment) : align_;
      const uint64_t tex_span = std::min<uint64_t>(max_binding_, 2 * max_texels);
      if (tex_ && tex_span <= 2 * walign_) tex_ = false;
      if (!tex_) require_16bit_storage(caps_, std::string("linear_matvec_fused: ") + wtype_name(type) + " weights");
      const uint64_t wroom = tex_ ? tex_span - walign_ : room_;
      for (const auto* o : outs) {
        if (o->w.offset % 16)
          throw Error(ErrorCode::internal, "linear_matvec_fused: a quantized weight must start at a multiple of 16 bytes");
        chunks.push_back(split_rows(o->w.rows, wtype_row_bytes(type, K_), wroom, 1));
      }
    } else {
      esize_ = wtype_size(type);
      tformat_ = float_texel_format(type);
      const uint64_t tbytes = 4ull * esize_;
      tex_ = arenas_tex && caps_.supports_uniform_texel(tformat_) && max_texels * tbytes > 1024;
      const uint64_t talign = caps_.min_texel_buffer_offset_alignment;
      if (tex_ && std::min<uint64_t>(max_binding_, max_texels * tbytes - tbytes) <= 2 * std::max<uint64_t>(align_, talign))
        tex_ = false;
      if (type != WType::f32 && !tex_)
        require_16bit_storage(caps_, std::string("linear_matvec_fused: ") + wtype_name(type) + " weights");
      walign_ = tex_ ? std::max<uint64_t>(align_, talign) : align_;
      const uint64_t wroom = tex_ ? std::min<uint64_t>(max_binding_, max_texels * tbytes - tbytes) - walign_ : room_;
      for (const auto* o : outs) {
        if (o->w.offset % esize_)
          throw Error(ErrorCode::internal, "linear_matvec_fused: W offset must be a multiple of the element size");
        chunks.push_back(split_rows(o->w, wroom, o->w.offset % walign_ ? 1 : walign_));
      }
    }
    // One dispatch for all outputs when each W fits one binding, else one per chunk.
    std::vector<std::vector<Part>> sets;
    const bool one = std::all_of(chunks.begin(), chunks.end(), [](const auto& c) { return c.size() == 1; });
    if (one) {
      sets.emplace_back();
      for (size_t i = 0; i < outs.size(); ++i) sets.back().push_back({outs[i], chunks[i][0]});
    } else {
      for (size_t i = 0; i < outs.size(); ++i)
        for (const RowChunk& c : chunks[i]) sets.push_back({{outs[i], c}});
    }
    for (uint32_t m0 = 0; m0 < M; m0 += m_step_) {
      const uint32_t mc = std::min(m_step_, M - m0);
      for (const auto& set : sets) record_set(set, m0, mc);
    }
  }

 private:
  PartBinding bind_part(const Part& part, uint32_t m0, uint32_t mc) const {
    const MatvecOutput& o = *part.out;
    const RowChunk& c = part.chunk;
    const uint32_t N = o.w.rows;
    PartBinding b;
    if (quant_) {
      const QuantChunkViews v = bind_quant_chunk(o.w, c, tex_, walign_);
      b.w = v.quant.range;
      b.w_off = v.quant.elem_off;
      b.meta = v.meta.range;
      b.m_off = v.m_off;
      b.tex = tex_;
    } else {
      // As linear.cpp: a texel view spans whole texels, or the chunk uses storage buffers.
      const FloatChunkView v = bind_float_chunk(caps_, o.w, c, esize_, tex_, walign_, align_, "linear_matvec_fused");
      b.w = v.w.range;
      b.w_off = v.w.elem_off;
      b.tex = v.tex;
    }
    const Bound yb = bind_aligned(*o.y.buffer, o.y.offset + VkDeviceSize(m0) * N * 4, VkDeviceSize(mc) * N * 4, 4, align_);
    b.y = yb.range;
    b.y_off = yb.elem_off + c.first_row;
    if (o.bias.size) {
      const Bound bb = align_range(o.bias, VkDeviceSize(c.first_row) * 4, VkDeviceSize(c.rows) * 4, align_);
      b.bias = bb.range;
      b.b_off = bb.elem_off;
    } else {
      b.bias = b.y;   // never read (BIAS_MASK)
    }
    return b;
  }

  void record_set(const std::vector<Part>& set, uint32_t m0, uint32_t mc) {
    std::vector<PartBinding> pb;
    for (const Part& p : set) pb.push_back(bind_part(p, m0, mc));
    // Float W chunks that fall back from texel to storage buffers cannot share a kernel with texel ones.
    if (set.size() > 1 &&
        std::any_of(pb.begin(), pb.end(), [&](const PartBinding& b) { return b.tex != pb[0].tex; })) {
      for (const Part& p : set) record_set({p}, m0, mc);
      return;
    }
    const bool tex = pb[0].tex;
    const Bound xb = bind_aligned(*x_.buffer, x_.offset + VkDeviceSize(m0) * x_.cols * 4,
                                  VkDeviceSize(mc) * x_.cols * 4, 4, tex ? walign_ : align_);
    Bound nb{pb[0].y, 0};   // never read without NORM
    if (in_.norm) nb = align_range(*in_.norm, 0, VkDeviceSize(K_) * 4, tex ? walign_ : align_);
    bool aligned = xb.elem_off % 4 == 0 && nb.elem_off % 4 == 0;
    if (!quant_) {
      aligned = aligned && K_ % 4 == 0;
      for (const auto& b : pb) aligned = aligned && b.w_off % 4 == 0;
    }
    // Texel variants: the norm binding is a texel buffer, vec4 texels where ALIGNED (then its range is
    // whole texels: elem_off and K are multiples of 4), floats otherwise.  Without a norm it is one float
    // of W's view, never read.
    const VkFormat norm_format = aligned && in_.norm ? VK_FORMAT_R32G32B32A32_SFLOAT : VK_FORMAT_R32_SFLOAT;
    if (tex && !in_.norm) nb = Bound{BufferRange{pb[0].w.buffer, pb[0].w.offset, 4}, 0};
    const uint64_t max_texels = caps_.max_texel_buffer_elements;
    const bool xtex = tex && aligned && cfg_.activations_texel && x_tex_arena_ && xb.range.size % 16 == 0 &&
                      xb.range.size / 16 <= max_texels;

    const MatvecPlan plan = plan_matvec(cfg_, caps_, m_step_, K_);
    const uint32_t xrows = plan.xrows, rows = plan.rows, wg = plan.wg, gx_per = plan.gx_per;
    uint32_t g[4] = {0, 0, 0, 0};   // first workgroup of each output, then the total
    for (size_t i = 0; i < set.size(); ++i) g[i + 1] = g[i] + groups_for(set[i].chunk.rows, gx_per);
    const uint32_t outs = static_cast<uint32_t>(set.size());
    uint32_t bias_mask = 0, acc_mask = 0;
    for (uint32_t i = 0; i < outs; ++i) {
      if (set[i].out->bias.size) bias_mask |= 1u << i;
      if (set[i].out->accumulate) acc_mask |= 1u << i;
    }
    auto at = [&](uint32_t i) -> const PartBinding& { return pb[i < outs ? i : 0]; };
    auto rows_of = [&](uint32_t i) { return i < outs ? set[i].chunk.rows : 0u; };
    const uint32_t norm = !in_.norm ? spec::NORM_NONE
                          : cfg_.matvec_norm_subgroup && caps_.has_subgroup_arithmetic() ? spec::NORM_SUBGROUP
                                                                                          : spec::NORM_LANE;
    const uint32_t gate = static_cast<uint32_t>(in_.gate);
    const uint32_t xsh = plan.xsh;
    const uint32_t gy = groups_for(mc, xrows);
    const uint32_t ldy[3] = {set[0].out->w.rows, outs > 1 ? set[1].out->w.rows : 0u, outs > 2 ? set[2].out->w.rows : 0u};
    if (quant_) {
      spec::MatvecFusedQSpec s;
      s.wg = wg, s.rows = rows, s.mode = plan.mode, s.aligned = aligned, s.xrows = xrows;
      s.qtype = static_cast<uint32_t>(set[0].out->w.type);
      s.outs = outs, s.norm = norm, s.gate = gate, s.bias_mask = bias_mask, s.acc_mask = acc_mask, s.xsh = xsh;
      static constexpr ShaderId kShaders[3] = {ShaderId::linear_matvec_fused_q, ShaderId::linear_matvec_fused_q_tex,
                                               ShaderId::linear_matvec_fused_q_xtex};
      PipelineDesc desc{kShaders[xtex ? 2 : tex ? 1 : 0], QB::count, sizeof(spec::LinearFusedQPush), s.constants()};
      if (tex)
        desc.texel(QB::B_WQUANT, VK_FORMAT_R32G32B32A32_UINT).texel(QB::B_WMETA, meta_format_)
            .texel(QB::B_WQUANT1, VK_FORMAT_R32G32B32A32_UINT).texel(QB::B_WMETA1, meta_format_)
            .texel(QB::B_WQUANT2, VK_FORMAT_R32G32B32A32_UINT).texel(QB::B_WMETA2, meta_format_)
            .texel(QB::B_NORM, norm_format);
      if (xtex) desc.texel(QB::B_X, VK_FORMAT_R32G32B32A32_SFLOAT);
      const spec::LinearFusedQPush push{mc, K_, xb.elem_off, in_.eps, nb.elem_off, g[1], g[2],
                                        rows_of(0), rows_of(1), rows_of(2),
                                        at(0).w_off, at(1).w_off, at(2).w_off, at(0).m_off, at(1).m_off, at(2).m_off,
                                        at(0).y_off, at(1).y_off, at(2).y_off, ldy[0], ldy[1], ldy[2],
                                        at(0).b_off, at(1).b_off, at(2).b_off};
      cmd_.dispatch(device_.pipelines().get(desc),
                    spec::bound<QB>({{QB::B_X, xb.range}, {QB::B_WQUANT, at(0).w}, {QB::B_Y, at(0).y},
                                     {QB::B_WMETA, at(0).meta}, {QB::B_WQUANT1, at(1).w}, {QB::B_WMETA1, at(1).meta},
                                     {QB::B_WQUANT2, at(2).w}, {QB::B_WMETA2, at(2).meta}, {QB::B_Y1, at(1).y},
                                     {QB::B_Y2, at(2).y}, {QB::B_BIAS, at(0).bias}, {QB::B_BIAS1, at(1).bias},
                                     {QB::B_BIAS2, at(2).bias}, {QB::B_NORM, nb.range}}),
                    &push, sizeof push, g[outs], gy, 1, "linear_matvec_fused_q");
    } else {
      spec::MatvecFusedSpec s;
      s.wg = wg, s.rows = rows, s.mode = plan.mode, s.aligned = aligned, s.xrows = xrows;
      s.outs = outs, s.norm = norm, s.gate = gate, s.bias_mask = bias_mask, s.acc_mask = acc_mask, s.xsh = xsh;
      static constexpr ShaderId kShaders[3][3] = {
          {ShaderId::linear_matvec_fused_f32, ShaderId::linear_matvec_fused_f16, ShaderId::linear_matvec_fused_bf16},
          {ShaderId::linear_matvec_fused_tex_f32, ShaderId::linear_matvec_fused_tex_f16,
           ShaderId::linear_matvec_fused_tex_bf16},
          {ShaderId::linear_matvec_fused_xtex_f32, ShaderId::linear_matvec_fused_xtex_f16,
           ShaderId::linear_matvec_fused_xtex_bf16}};
      const auto wt = static_cast<uint32_t>(set[0].out->w.type);
      PipelineDesc desc{kShaders[xtex ? 2 : tex ? 1 : 0][wt], FB::count, sizeof(spec::LinearFusedPush), s.constants()};
      if (tex)
        desc.texel(FB::B_W, tformat_).texel(FB::B_W1, tformat_).texel(FB::B_W2, tformat_).texel(FB::B_NORM, norm_format);
      if (xtex) desc.texel(FB::B_X, VK_FORMAT_R32G32B32A32_SFLOAT);
      const spec::LinearFusedPush push{mc, K_, xb.elem_off, in_.eps, nb.elem_off, g[1], g[2],
                                       rows_of(0), rows_of(1), rows_of(2),
                                       at(0).w_off, at(1).w_off, at(2).w_off,
                                       at(0).y_off, at(1).y_off, at(2).y_off, ldy[0], ldy[1], ldy[2],
                                       at(0).b_off, at(1).b_off, at(2).b_off};
      cmd_.dispatch(device_.pipelines().get(desc),
                    spec::bound<FB>({{FB::B_X, xb.range}, {FB::B_W, at(0).w}, {FB::B_Y, at(0).y},
                                     {FB::B_W1, at(1).w}, {FB::B_Y1, at(1).y}, {FB::B_W2, at(2).w},
                                     {FB::B_Y2, at(2).y}, {FB::B_BIAS, at(0).bias}, {FB::B_BIAS1, at(1).bias},
                                     {FB::B_BIAS2, at(2).bias}, {FB::B_NORM, nb.range}}),
                    &push, sizeof push, g[outs], gy, 1, "linear_matvec_fused");
    }
  }

  Device& device_;
  const Capabilities& caps_;
  const KernelConfig& cfg_;
  CommandList& cmd_;
  const Act& x_;
  const MatvecInput& in_;
  bool gated_ = false, quant_ = false, tex_ = false, x_tex_arena_ = false;
  uint32_t K_ = 0, m_step_ = 1, esize_ = 4, meta_texel_ = 2;
  uint64_t align_ = 16, max_binding_ = 0, room_ = 0, walign_ = 16;
  VkFormat tformat_ = VK_FORMAT_UNDEFINED, meta_format_ = VK_FORMAT_UNDEFINED;
};

}  // namespace

void Kernels::linear_matvec_fused(CommandList& cmd, const Act& x, const MatvecInput& in,
                                  std::span<const MatvecOutput> outs) {
  const std::string op = "linear_matvec_fused";
  if (outs.empty() || outs.size() > 3) throw Error(ErrorCode::internal, op + ": 1 to 3 outputs");
  if (!x.buffer) throw Error(ErrorCode::internal, op + ": null buffer");
  const bool gated = in.gate != GateActivation::none;
  if (static_cast<uint32_t>(in.gate) > spec::GATE_GELU_TANH) throw Error(ErrorCode::internal, op + ": bad gate");
  if (gated && x.cols % 2) throw Error(ErrorCode::internal, op + ": gated X rows must be [gate | up], 2K wide");
  const uint32_t K = gated ? x.cols / 2 : x.cols;
  if (K == 0) throw Error(ErrorCode::internal, op + ": K = 0");
  if (x.offset % 4) throw Error(ErrorCode::internal, op + ": X offset must be a multiple of 4");
  if (in.norm && (in.norm->buffer == VK_NULL_HANDLE || in.norm->size < VkDeviceSize(K) * 4 || in.norm->offset % 4))
    throw Error(ErrorCode::internal, op + ": norm must be f32 [K] at a multiple of 4 bytes");
  for (const MatvecOutput& o : outs) {
    if (!o.w.buffer || !o.y.buffer) throw Error(ErrorCode::internal, op + ": null buffer");
    if (o.w.cols != K || o.y.cols != o.w.rows || o.y.rows != x.rows)
      throw Error(ErrorCode::internal, op + ": shape mismatch X[" + std::to_string(x.rows) + "," +
                                           std::to_string(x.cols) + "] W[" + std::to_string(o.w.rows) + "," +
                                           std::to_string(o.w.cols) + "] Y[" + std::to_string(o.y.rows) + "," +
                                           std::to_string(o.y.cols) + "]");
    if (o.y.offset % 4) throw Error(ErrorCode::internal, op + ": Y offset must be a multiple of 4");
    if (o.w.offset + o.w.bytes() > o.w.buffer->size()) throw Error(ErrorCode::internal, op + ": W overruns its buffer");
    if (o.bias.size && (o.bias.size < VkDeviceSize(o.w.rows) * 4 || o.bias.offset % 4))
      throw Error(ErrorCode::internal, op + ": bias must be f32 [N] at a multiple of 4 bytes");
    if (overlap(o.y.buffer, o.y.offset, o.y.bytes(), x.buffer, x.offset, x.bytes()))
      throw Error(ErrorCode::internal, op + ": Y overlaps X");
    for (const MatvecOutput& q : outs)
      if (&q != &o && overlap(o.y.buffer, o.y.offset, o.y.bytes(), q.y.buffer, q.y.offset, q.y.bytes()))
        throw Error(ErrorCode::internal, op + ": two outputs overlap");
  }
  if (x.rows == 0) return;
  // Outputs by weight type, in order of first appearance; empty W contribute nothing.
  std::vector<std::vector<const MatvecOutput*>> by_type;
  for (const MatvecOutput& o : outs) {
    if (o.w.rows == 0) continue;
    auto it = std::find_if(by_type.begin(), by_type.end(), [&](const auto& g) { return g[0]->w.type == o.w.type; });
    if (it == by_type.end()) by_type.push_back({&o});
    else it->push_back(&o);
  }
  FusedRecorder rec(device_, config_, cmd, x, in);
  for (const auto& group : by_type) rec.record_type(group);
}

}  // namespace reach
