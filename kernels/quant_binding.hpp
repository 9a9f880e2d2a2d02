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

// Checks what every quantized linear needs of W (K a multiple of the block, a 16-byte start, inside its
// buffer: internal errors naming `op`) and plans its binding.
QuantWeightBinding plan_quant_weight(const Capabilities& caps, const KernelConfig& cfg, const Mat& w, const char* op);

}  // namespace reach
