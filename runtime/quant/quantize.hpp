#pragma once
// Block quantization on the host (GGML formats), for quantizing safetensors
// weights at load and for writing GGUF files.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/wtype.hpp"

namespace reach {

// The types quantize_matrix produces (q8_0, q4_0, q4_k).
bool quantize_supported(WType t);

// Quantizes a row-major [rows, cols] f32 matrix into rows * cols / wtype_block_elems(t)
// GGML blocks of type t written to `out_blocks` in file order, byte-identical to the
// PyPI gguf package's gguf.quants.quantize.  Rows are split over `threads` host threads
// (0: the hardware's count).  Throws unsupported for other types, internal when cols is
// not a multiple of the block size.
void quantize_matrix(WType t, const float* src, uint32_t rows, uint32_t cols, void* out_blocks, unsigned threads = 0);

// "q8_0, q4_0, q4_k": the types quantize_matrix produces, for messages.
std::string quantize_type_names();


}  // namespace reach
