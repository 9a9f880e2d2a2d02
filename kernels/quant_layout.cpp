#include "kernels/quant_layout.hpp"

#include <cstring>
#include <string>

#include "base/error.hpp"

namespace reach {

namespace {

// One copy step: `bytes` bytes at `src` of a file block go to the quant (q) or meta plane.
struct Field {
  uint16_t src, bytes;
  bool quant;
};

// The fields of each block in file order (ggml-common.h), listed as where they go.
struct Blocks {
  Field f[4];
  int n;
};

Blocks fields(WType t) {
  switch (t) {
    case WType::q8_0: return {{{0, 2, false}, {2, 32, true}}, 2};                          // d, qs[32]
    case WType::q4_0: return {{{0, 2, false}, {2, 16, true}}, 2};                          // d, qs[16]
    case WType::q4_1: return {{{0, 4, false}, {4, 16, true}}, 2};                          // d, m, qs[16]
    case WType::q5_0: return {{{0, 6, false}, {6, 16, true}}, 2};                          // d, qh[4], qs[16]
    case WType::q5_1: return {{{0, 8, false}, {8, 16, true}}, 2};                          // d, m, qh[4], qs[16]
    case WType::q4_k: return {{{0, 16, false}, {16, 128, true}}, 2};                       // d, dmin, scales[12], qs
    case WType::q5_k: return {{{0, 16, false}, {16, 160, true}}, 2};                       // ..., qh[32], qs[128]
    case WType::q6_k: return {{{0, 192, true}, {208, 2, false}, {192, 16, false}}, 3};     // ql, qh, scales, d
    case WType::mxfp4: return {{{0, 1, false}, {1, 16, true}}, 2};                        // e, qs[16]
    default: throw Error(ErrorCode::internal, std::string("quant layout: ") + wtype_name(t) + " is not a block format");
  }
}

}  // namespace

QuantPlanes quant_planes(WType t) {
  const Blocks b = fields(t);
  QuantPlanes p;
  for (int i = 0; i < b.n; ++i) (b.f[i].quant ? p.quant_bytes : p.meta_bytes) += b.f[i].bytes;
  return p;
}

uint32_t quant_meta_texel_bytes(WType t) {
  return quant_planes(t).meta_bytes == 16 ? 16 : 2;
}

uint32_t quant_meta_unit_bytes(WType t) { return t == WType::mxfp4 ? 1 : 2; }

uint64_t quant_device_bytes(WType t, uint32_t rows, uint32_t cols) {
  const uint64_t bytes = uint64_t(rows) * wtype_row_bytes(t, cols);
  // mxfp4's 1-byte meta: padded to whole 16-byte texels, so any range of its meta plane rounds up to whole
  // 16-bit units (and texels) inside the buffer.
  return t == WType::mxfp4 ? (bytes + 15) / 16 * 16 : bytes;
}

void quant_to_device_layout(WType t, uint32_t rows, uint32_t cols, const void* blocks, void* out) {
  const Blocks b = fields(t);
  const QuantPlanes p = quant_planes(t);
  const uint64_t n = uint64_t(rows) * (wtype_row_bytes(t, cols) / wtype_block_bytes(t));
  const uint32_t bb = wtype_block_bytes(t);
  const auto* src = static_cast<const uint8_t*>(blocks);
  auto* q = static_cast<uint8_t*>(out);
  uint8_t* m = q + n * p.quant_bytes;
  // q6_k keeps d first in the meta plane (after it come the scales): the kernels read d at unit 0 for every type.
  for (uint64_t i = 0; i < n; ++i, src += bb) {
    for (int j = 0; j < b.n; ++j) {
      const Field& f = b.f[j];
      uint8_t*& dst = f.quant ? q : m;
      std::memcpy(dst, src + f.src, f.bytes);
      dst += f.bytes;
    }
  }
}

}  // namespace reach
