#pragma once
// MXFP4 (OCP microscaling FP4 as ggml stores it, WType::mxfp4): blocks of 32 weights, one E8M0 scale byte
// then 16 bytes of E2M1 codes (weight i in the low nibble of byte i, weight i + 16 in its high nibble).
// The host side of the type: dequantizing (the reference the kernels are checked against) and repacking
// OpenAI's checkpoint layout (separate scales, codes paired along the row) into ggml's blocks.
#include <cstdint>

namespace reach {

// ggml's value table (kvalues_mxfp4): twice the E2M1 values, the scale halved to match.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ggml_e8m0_to_fp32_half: 2^(e - 128), bit for bit (subnormal below e = 2).
float mxfp4_scale(uint8_t e);

// `n_blocks` blocks (17 bytes each) to 32 floats each.
void dequantize_mxfp4(const void* blocks, uint64_t n_blocks, float* out);

// OpenAI's MXFP4 tensors (transformers' *_blocks / *_scales): `codes` [n_blocks][16] with weights 2i / 2i + 1
// in the low / high nibble of byte i, `scales` [n_blocks] E8M0 bytes -> ggml blocks (17 bytes each).
void mxfp4_from_openai(const uint8_t* codes, const uint8_t* scales, uint64_t n_blocks, void* out_blocks);

}  // namespace reach
