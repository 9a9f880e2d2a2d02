#pragma once
// Block quantization on the host (GGML formats), for quantizing safetensors
// weights at load and for writing GGUF files.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/kernels.hpp"

namespace reach {

// The types quantize_matrix produces (q8_0, q4_0, q4_k).
bool quantize_supported(WType t);

// Quantizes a row-major [rows, cols] f32 matrix into rows * cols / wtype_block_elems(t)
// GGML blocks of type t written to `out_blocks` in file order, byte-identical to the
// PyPI gguf package's gguf.quants.quantize.  Rows are split over `threads` host threads
// (0: the hardware's count).  Throws unsupported for other types, internal when cols is
// not a multiple of the block size.
void quantize_matrix(WType t, const float* src, uint32_t rows, uint32_t cols, void* out_blocks, unsigned threads = 0);

// "q8_0", "Q4_K", ... -> the type, for any weight type name wtype_name gives
// (case-insensitive); nullopt for anything else.
std::optional<WType> wtype_from_name(std::string_view name);
// "q8_0, q4_0, q4_k": the types quantize_matrix produces, for messages.
std::string quantize_type_names();

// f32 -> IEEE half, round to nearest even (subnormals, overflow to inf), as
// numpy's astype(float16) and ggml's GGML_FP32_TO_FP16.
uint16_t f32_to_f16_bits(float x);
// f32 -> bfloat16, round to nearest even, NaN kept quiet (ggml_compute_fp32_to_bf16).
uint16_t f32_to_bf16_bits(float x);

}  // namespace reach
