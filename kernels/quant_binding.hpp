#pragma once
// How a quantized weight is bound for the linear kernels (linear_quant.cpp's exact path, linear_q8.cpp's
// integer-dot path): its two planes, storage or uniform texel views (CPU devices), and the row chunks
// each of which fits one binding of each plane.
#include <cstdint>
#include <vector>

#include "kernels/binding.hpp"
#include "kernels/kernels.hpp"
#include "kernels/quant_layout.hpp"

namespace reach {

struct QuantWeightBinding {
  QuantPlanes planes;
  uint64_t blocks_per_row = 0;
  uint64_t quant_total = 0;     // bytes of the quant plane; the meta plane follows it
  uint32_t meta_texel = 0;      // bytes per meta texel (a whole block's meta where that is a texel size)
  VkFormat meta_format = VK_FORMAT_UNDEFINED;
  bool tex = false;             // both planes through uniform texel buffers
  uint64_t align = 0;           // storage binding offset alignment (>= 16)
  uint64_t walign = 0;          // the weight views' offset alignment (texel alignment too with tex)
  uint64_t room = 0;            // bytes one storage binding may span past its alignment
  std::vector<RowChunk> chunks; // W's rows, cut so each chunk's planes fit one view each
};

// The two views of row chunk c of quantized W: the quant plane (its elem_off counts 16-byte units) and
// the meta plane, whose push offset m_off counts meta units (quant_meta_unit_bytes: 2 bytes; 1 for mxfp4).
// With tex the meta plane is bound in whole meta texels.
struct QuantChunkViews {
  Bound quant;
  Bound meta;
  uint32_t m_off = 0;
};
QuantChunkViews bind_quant_chunk(const Mat& w, const RowChunk& c, bool tex, uint64_t walign);
inline QuantChunkViews bind_quant_chunk(const QuantWeightBinding& b, const Mat& w, const RowChunk& c) {
  return bind_quant_chunk(w, c, b.tex, b.walign);
}

// Checks what every quantized linear needs of W (K a multiple of the block, a 16-byte start, inside its
// buffer: internal errors naming `op`) and plans its binding.
QuantWeightBinding plan_quant_weight(const Capabilities& caps, const KernelConfig& cfg, const Mat& w, const char* op);

}  // namespace reach
