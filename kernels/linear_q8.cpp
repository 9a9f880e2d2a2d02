// The linear family's integer-dot path for quantized W (Kernels::linear_quantize_q8,
// Kernels::linear_q8; shaders/linear_quantize_q8.comp, shaders/linear_q8.comp):
// activation rows are quantized once per call to Q8 blocks (32 int8 and one f32
// scale), then multiplied by the weight blocks unpacked to int8 with packed
// int8x4 dot products, as llama.cpp does.  Not exact: X is rounded to 8 bits
// (KernelConfig::quant_int_dot chooses it; the exact path is linear_quant.cpp).
//
// W bindings follow linear_quant.cpp: a quant plane and a meta plane, row
// chunks past the binding span, texel buffers on CPU devices (there X's two
// planes too, as R32G32B32A32_UINT texels, when all its rows fit one view).
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "kernels/kernels.hpp"
#include "kernels/quant_binding.hpp"
#include "kernels/quant_layout.hpp"
#include "kernels/spec.hpp"

namespace reach {

bool linear_q8_supports(WType t) {
  switch (t) {
    case WType::q8_0: case WType::q4_0: case WType::q4_1: case WType::q5_0: case WType::q5_1:
    case WType::q4_k: case WType::q5_k: case WType::q6_k:
      return true;
    default:
      return false;
  }
}

static void check_q8(const Q8Act& q, const char* op) {
  if (!q.buffer) throw Error(ErrorCode::internal, std::string(op) + ": null Q8 buffer");
  if (q.cols % 32) throw Error(ErrorCode::internal, std::string(op) + ": Q8 rows need K (" + std::to_string(q.cols) +
                                                        ") to be a multiple of 32");
  if (q.offset % 16) throw Error(ErrorCode::internal, std::string(op) + ": Q8 activations must start at a multiple of 16 bytes");
  if (q.offset + q.bytes() > q.buffer->size()) throw Error(ErrorCode::internal, std::string(op) + ": Q8 overruns its buffer");
}

void Kernels::linear_quantize_q8(CommandList& cmd, const Act& x, const Q8Act& q) {
  const char* op = "linear_quantize_q8";
  check_q8(q, op);
  if (!x.buffer || x.rows != q.rows || x.cols != q.cols)
    throw Error(ErrorCode::internal, std::string(op) + ": X and Q8 shapes differ");
  if (x.offset % 4) throw Error(ErrorCode::internal, std::string(op) + ": X offset must be a multiple of 4");
  if (q.rows == 0 || q.cols == 0) return;
  const auto& caps = device_.caps();
  const uint64_t align = std::max<uint64_t>(caps.min_storage_buffer_offset_alignment, 16);
  const uint64_t room = binding_span(caps, config_.max_binding) - align;
  if (x.bytes() > room || q.bytes() > room)
    throw Error(ErrorCode::unsupported, std::string(op) + ": activations exceed one binding");
  const Bound xb = bind_aligned(*x.buffer, x.offset, x.bytes(), 4, align);
  const Bound qb = bind_aligned(*q.buffer, q.offset, q.quant_bytes(), 16, align);
  const Bound mb = bind_aligned(*q.buffer, q.offset + q.quant_bytes(), q.meta_bytes(), 8, align);
  using B = spec::LinearQuantizeQ8Bindings;
  spec::QuantizeQ8Spec sp;
  sp.wg = std::min(64u, caps.max_workgroup_invocations);
  const auto& pipe =
      device_.pipelines().get(PipelineDesc{ShaderId::linear_quantize_q8, B::count, sizeof(spec::QuantizeQ8Push), sp.constants()});
  const spec::QuantizeQ8Push push{q.rows, q.cols, xb.elem_off, qb.elem_off, mb.elem_off};
  cmd.dispatch(pipe, spec::bound<B>({{B::B_X, xb.range}, {B::B_XQUANT, qb.range}, {B::B_XMETA, mb.range}}), &push,
               sizeof push, groups_for(q.cols / 32, sp.wg), q.rows, 1, op);
}

void Kernels::linear_q8(CommandList& cmd, const Q8Act& x, const Mat& w, const Act& y) {
  const char* op = "linear_q8";
  check_q8(x, op);
  if (!w.buffer || !y.buffer) throw Error(ErrorCode::internal, std::string(op) + ": null buffer");
  if (!linear_q8_supports(w.type))
    throw Error(ErrorCode::internal, std::string(op) + ": no integer-dot kernel for " + wtype_name(w.type) + " weights");
  if (x.cols != w.cols || y.rows != x.rows || y.cols != w.rows)
    throw Error(ErrorCode::internal, std::string(op) + ": shape mismatch");
  const auto& caps = device_.caps();
  if (!caps.integer_dot) throw Error(ErrorCode::unsupported, std::string(op) + ": the device has no integer dot product");
  const uint32_t M = x.rows, N = w.rows, K = w.cols;
  if (M == 0 || N == 0) return;
  if (y.offset % 4) throw Error(ErrorCode::internal, std::string(op) + ": Y offset must be a multiple of 4");
  const QuantWeightBinding wb = plan_quant_weight(caps, config_, w, op);
  // X rows travel whole (one binding each plane); Y along M with them.
  const uint64_t x_row = uint64_t(K) * 5 / 4, y_row = uint64_t(N) * 4;
  if (std::max(x_row, y_row) > wb.room)
    throw Error(ErrorCode::unsupported, std::string(op) + ": one activation row exceeds maxStorageBufferRange");
  const uint32_t m_step = static_cast<uint32_t>(std::min<uint64_t>(M, wb.room / std::max(x_row, y_row)));

  // Decode-sized calls: one X row per invocation and more W rows; batches: the
  // quantized GEMM's register tile (each unpacked W sub-block meets TM rows).
  spec::LinearQ8Spec sp;
  const bool mv = M <= config_.linear_matvec_max_m;
  sp.wg = std::min(mv ? config_.matvec_wg : config_.gemm_wg, caps.max_workgroup_invocations);
  sp.tm = mv ? 1 : std::max(config_.qgemm_tm ? config_.qgemm_tm : config_.gemm_tm, 1u);
  sp.tn = mv ? std::max(config_.matvec_rows, 1u) : std::max(config_.qgemm_tn ? config_.qgemm_tn : config_.gemm_tn, 1u);
  sp.qtype = static_cast<uint32_t>(w.type);
  if (sp.wg == 0) throw Error(ErrorCode::internal, std::string(op) + ": workgroup of 0 invocations");
  // X through texel buffers with W (CPU devices) when each plane is one view: all M rows at once.
  const bool xtex = wb.tex && config_.activations_texel && arena_texel_readable(x.buffer->arena()) && m_step == M &&
                    x.quant_bytes() / 16 <= caps.max_texel_buffer_elements &&
                    x.meta_bytes() / 16 <= caps.max_texel_buffer_elements;
  using B = spec::LinearQ8Bindings;
  PipelineDesc desc{xtex ? ShaderId::linear_q8_xtex : wb.tex ? ShaderId::linear_q8_tex : ShaderId::linear_q8, B::count,
                    sizeof(spec::LinearQ8Push), sp.constants()};
  if (wb.tex) desc.texel(B::B_WQUANT, VK_FORMAT_R32G32B32A32_UINT).texel(B::B_WMETA, wb.meta_format);
  if (xtex) desc.texel(B::B_XQUANT, VK_FORMAT_R32G32B32A32_UINT).texel(B::B_XMETA, VK_FORMAT_R32G32B32A32_UINT);
  const auto& pipe = device_.pipelines().get(desc);
  const uint64_t subs = K / 32;
  for (uint32_t m0 = 0; m0 < M; m0 += m_step) {
    const uint32_t mc = std::min(m_step, M - m0);
    const Bound xqb = bind_aligned(*x.buffer, x.offset + m0 * subs * 32, mc * subs * 32, 16, wb.walign);
    // Texel meta: the whole (padded) plane in 16-byte units; the push offset stays in 8-byte blocks.
    Bound xmb;
    if (xtex) {
      xmb = bind_aligned(*x.buffer, x.offset + x.quant_bytes(), x.meta_bytes(), 16, wb.walign);
      xmb.elem_off *= 2;
    } else {
      xmb = bind_aligned(*x.buffer, x.offset + x.quant_bytes() + m0 * subs * 8, mc * subs * 8, 8, wb.align);
    }
    const Bound yb = bind_aligned(*y.buffer, y.offset + VkDeviceSize(m0) * N * 4, VkDeviceSize(mc) * N * 4, 4, wb.align);
    for (const RowChunk& c : wb.chunks) {
      const QuantChunkViews v = bind_quant_chunk(wb, w, c);
      const spec::LinearQ8Push push{mc, c.rows, K, xqb.elem_off, v.quant.elem_off, v.m_off,
                                    yb.elem_off + c.first_row, N, xmb.elem_off};
      cmd.dispatch(pipe,
                   spec::bound<B>({{B::B_XQUANT, xqb.range}, {B::B_WQUANT, v.quant.range}, {B::B_Y, yb.range},
                                   {B::B_WMETA, v.meta.range}, {B::B_XMETA, xmb.range}}),
                   &push, sizeof push, groups_for(c.rows, uint64_t(sp.wg) * sp.tn), groups_for(mc, sp.tm), 1, op);
    }
  }
}

void KernelConfig::set_activations(QuantActivations a, const Capabilities& caps) {
  if (a == QuantActivations::exact) quant_int_dot = false;
  if (a != QuantActivations::int8) return;
  if (!caps.integer_dot)
    throw Error(ErrorCode::unsupported, "int8 activations (--int8-activations): " + caps.device_name +
                                            " has no integer dot product (shaderIntegerDotProduct); use the exact "
                                            "path (the default here)");
  quant_int_dot = true;
}

bool Kernels::linear_int8(CommandList& cmd, const Act& x, const Mat& w, const Act& y) {
  if (!config_.quant_int_dot || !scratch_ || !device_.caps().integer_dot || !linear_q8_supports(w.type)) return false;
  if (!x.buffer || !w.buffer || !y.buffer || x.cols != w.cols || x.rows == 0 || w.rows == 0 || x.cols % 32) return false;
  Q8Act q{nullptr, 0, x.rows, x.cols};
  q.buffer = &cmd.keep(scratch_->allocate(Arena::scratch, q.bytes(), "q8 activations"));
  linear_quantize_q8(cmd, x, q);
  cmd.barrier();
  linear_q8(cmd, q, w, y);
  return true;
}

}  // namespace reach
