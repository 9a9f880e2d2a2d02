#include "kernels/quant_binding.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"

namespace reach {

QuantWeightBinding plan_quant_weight(const Capabilities& caps, const KernelConfig& cfg, const Mat& w, const char* op) {
  const uint32_t N = w.rows, K = w.cols;
  const uint32_t be = wtype_block_elems(w.type);
  if (K % be)
    throw Error(ErrorCode::internal, std::string(op) + ": " + wtype_name(w.type) + " weights need K (" +
                                         std::to_string(K) + ") to be a multiple of " + std::to_string(be));
  if (w.offset % 16)
    throw Error(ErrorCode::internal, std::string(op) + ": a " + wtype_name(w.type) + " weight must start at a multiple "
                                         "of 16 bytes (offset " + std::to_string(w.offset) + ")");
  if (w.offset + w.bytes() > w.buffer->size())
    throw Error(ErrorCode::internal, std::string(op) + ": W overruns its buffer");

  QuantWeightBinding b;
  b.planes = quant_planes(w.type);
  b.blocks_per_row = K / be;
  b.quant_total = uint64_t(N) * b.blocks_per_row * b.planes.quant_bytes;
  b.meta_texel = quant_meta_texel_bytes(w.type);
  b.meta_format = b.meta_texel == 16 ? VK_FORMAT_R32G32B32A32_UINT : VK_FORMAT_R16_UINT;
  b.tex = cfg.weights_texel && arena_texel_readable(w.buffer->arena()) &&
          caps.supports_uniform_texel(VK_FORMAT_R32G32B32A32_UINT) && caps.supports_uniform_texel(b.meta_format);
  b.align = std::max<uint64_t>(caps.min_storage_buffer_offset_alignment, 16);
  const uint64_t max_binding = binding_span(caps, cfg.max_binding);
  if (max_binding <= 2 * b.align) throw Error(ErrorCode::internal, std::string(op) + ": max_binding too small");
  b.room = max_binding - b.align;
  // Texel views: aligned to minTexelBufferOffsetAlignment and at most maxTexelBufferElements texels;
  // the meta plane (texels of 2 bytes or more) is the tighter.
  b.walign = b.tex ? std::max<uint64_t>(b.align, caps.min_texel_buffer_offset_alignment) : b.align;
  const uint64_t tex_span = std::min<uint64_t>(max_binding, 2 * uint64_t(caps.max_texel_buffer_elements));
  if (b.tex && tex_span <= 2 * b.walign) b.tex = false;
  if (!b.tex) require_16bit_storage(caps, std::string(op) + ": " + wtype_name(w.type) + " weights");
  // Each plane's share of a chunk is at most the chunk's file bytes.
  b.chunks = split_rows(N, wtype_row_bytes(w.type, K), b.tex ? tex_span - b.walign : b.room, 1);
  return b;
}

QuantChunkViews bind_quant_chunk(const Mat& w, const RowChunk& c, bool tex, uint64_t walign) {
  const QuantPlanes planes = quant_planes(w.type);
  const uint64_t bpr = w.cols / wtype_block_elems(w.type);
  const uint64_t blocks0 = uint64_t(c.first_row) * bpr, nblocks = uint64_t(c.rows) * bpr;
  const uint64_t quant_total = uint64_t(w.rows) * bpr * planes.quant_bytes;
  QuantChunkViews v;
  v.quant = bind_aligned(*w.buffer, w.offset + blocks0 * planes.quant_bytes, nblocks * planes.quant_bytes, 16, walign);
  // Texel meta: bound in whole meta texels (each chunk starts at a block, and the meta texel divides
  // both 16 and the block's meta bytes); the push offset stays in meta units.  mxfp4 (1-byte meta)
  // binds byte offsets and its push offset counts bytes.
  const uint32_t unit = quant_meta_unit_bytes(w.type), meta_unit = tex && unit == 2 ? quant_meta_texel_bytes(w.type) : unit;
  v.meta = bind_aligned(*w.buffer, w.offset + quant_total + blocks0 * planes.meta_bytes, nblocks * planes.meta_bytes,
                        meta_unit, walign);
  v.meta.range.size = (v.meta.range.size + 1) / 2 * 2;   // whole 16-bit units (mxfp4's device copy is padded)
  v.m_off = v.meta.elem_off * meta_unit / unit;
  return v;
}

}  // namespace reach
