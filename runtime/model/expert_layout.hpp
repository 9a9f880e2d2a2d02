#pragma once
// Host-side reshaping of expert tensors into the kernels' layout ([rows = outputs, cols = inputs] per expert).
// transformers' gpt-oss keeps its experts as x @ W: gate_up_proj [E, hidden, 2 ffn] with gate and up
// interleaved along the last axis (gate = [..., ::2], up = [..., 1::2]) and down_proj [E, ffn, hidden].
#include <cstddef>
#include <cstdint>
#include <vector>

namespace reach {

// Elements of `esize` bytes, src [n][rows][cols] -> out [n][m][rows] with m = ceil((cols - first) / step):
// out[e][j][r] = src[e][r][first + step * j].  step 1, first 0: each [rows, cols] matrix transposed; step 2:
// the even (first 0) or odd (first 1) columns, transposed (gpt-oss's gate / up).
std::vector<std::byte> experts_transposed(const std::byte* src, uint64_t esize, int64_t n, int64_t rows, int64_t cols,
                                          int64_t first, int64_t step);

// Every `step`-th element of each row of src [rows][cols] from `first` (gpt-oss's interleaved biases).
std::vector<std::byte> columns_every(const std::byte* src, uint64_t esize, int64_t rows, int64_t cols, int64_t first,
                                     int64_t step);

// OpenAI's MXFP4 experts (transformers' *_blocks [n][rows][cols / 32][16] and *_scales [n][rows][cols / 32])
// as ggml mxfp4 blocks (17 bytes each) of rows first, first + step, ... of each expert: [n][m][cols / 32].
// gpt-oss's gate_up_proj_blocks hold gate in the even rows and up in the odd ones (step 2).
std::vector<std::byte> mxfp4_experts_from_openai(const uint8_t* codes, const uint8_t* scales, int64_t n, int64_t rows,
                                                 int64_t cols, int64_t first, int64_t step);

}  // namespace reach
