#include "runtime/quant/mxfp4.hpp"

#include <cstring>

namespace reach {

float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e - 1) << 23);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void dequantize_mxfp4(const void* blocks, uint64_t n_blocks, float* out) {
  const auto* b = static_cast<const uint8_t*>(blocks);
  for (uint64_t i = 0; i < n_blocks; ++i, b += 17, out += 32) {
    const float d = mxfp4_scale(b[0]);
    for (int j = 0; j < 16; ++j) {
      out[j] = d * float(kMxfp4Values[b[1 + j] & 15]);
      out[j + 16] = d * float(kMxfp4Values[b[1 + j] >> 4]);
    }
  }
}

void mxfp4_from_openai(const uint8_t* codes, const uint8_t* scales, uint64_t n_blocks, void* out_blocks) {
  auto* o = static_cast<uint8_t*>(out_blocks);
  for (uint64_t i = 0; i < n_blocks; ++i, codes += 16, o += 17) {
    o[0] = scales[i];
    // Weight k's code: byte k / 2, low nibble for even k.
    auto code = [&](int k) { return uint8_t((codes[k / 2] >> (4 * (k & 1))) & 15); };
    for (int j = 0; j < 16; ++j) o[1 + j] = uint8_t(code(j) | (code(j + 16) << 4));
  }
}

}  // namespace reach
