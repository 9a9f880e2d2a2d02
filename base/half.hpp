#pragma once
// IEEE half and bfloat16 <-> f32 on the host: the one copy the library uses
// (weights converted at load, blocks' f16 scales, GGUF writing).
#include <cstdint>
#include <cstring>

namespace reach {

// f32 -> IEEE half, round to nearest even (subnormals, overflow to inf, NaN
// stays NaN), as numpy's astype(float16) and ggml's GGML_FP32_TO_FP16.
uint16_t f32_to_f16_bits(float x);
// f32 -> bfloat16, round to nearest even, NaN kept quiet (ggml_compute_fp32_to_bf16).
uint16_t f32_to_bf16_bits(float x);
// Exact widenings (subnormals renormalized, inf / NaN payload kept).
float f16_to_f32(uint16_t bits);
float bf16_to_f32(uint16_t bits);

// The bits of an f32.
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace reach
