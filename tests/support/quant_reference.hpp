#pragma once
// A plain CPU dequantizer of GGML's block formats, written from the format
// specification (ggml-common.h's block structs and the dequantize_row_* rules),
// independent of the kernels: every weight is computed in f32 with the same
// operations, in the same order, as gguf.quants' dequantize, so the two agree
// bit for bit (tests/test_kernels_linear_quant.cpp checks it with tests/python/quant_tool.py).
#include <cstdint>
#include <vector>

#include "base/wtype.hpp"

namespace reach::test {

// The n_blocks blocks at `blocks` (file layout) as n_blocks * wtype_block_elems(t) floats.
// With `mag`, also |a·q| + |b| per weight, where w = a·q + b is the factoring the
// kernels evaluate (q the stored unsigned or int8 quant, a the block or sub-block
// scale, b the offset or min): rounding errors of the kernels scale with it.
std::vector<float> quant_dequantize(WType t, const uint8_t* blocks, size_t n_blocks,
                                   std::vector<float>* mag = nullptr);

// n_blocks blocks of random bits whose f16 fields (d, m, dmin) are finite normal
// numbers of magnitude in [2^-9, 2^-4): weights of order 0.01..1.
std::vector<uint8_t> quant_random_blocks(WType t, size_t n_blocks, uint32_t seed);

// The types with a device kernel.
inline constexpr WType kQuantTypes[] = {WType::q8_0, WType::q4_0, WType::q4_1, WType::q5_0,
                                        WType::q5_1, WType::q4_k, WType::q5_k, WType::q6_k};

}  // namespace reach::test
