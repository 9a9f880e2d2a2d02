#pragma once
// The KV cache's storage types on the CPU, written from their rule (ggml's
// quantize_row_q8_0 / q4_0 reference and dequantize_row_*), independent of the
// kernels' codec (shaders/attention_kv_codec.glsl): what a row of values reads
// back as after the cache stores it.
#include <cstddef>

#include "base/kv_type.hpp"

namespace reach::test {

// Rounds the n values at x (n a multiple of kKvBlock for q8_0 / q4_0) in place
// to what a cache of type t holds.  Scales are rounded to f16 as stored; the
// quantization uses the unrounded scale, as ggml does.
void kv_round_trip(KvType t, float* x, size_t n);

// The same for a cache that stores each block of 32 Walsh-Hadamard rotated
// (base/kv_type.hpp kv_hadamard): x becomes H·round(H·x), what the kernels'
// arithmetic amounts to.  H·x is formed in f32 by the butterflies of
// shaders/attention_hadamard.glsl, in its order, so that the rounding sees the
// f32s the kernels quantize; the turn back is the matrix
// H[i][j] = (-1)^popcount(i & j) / sqrt(32) itself, in double.
void kv_round_trip_hadamard(KvType t, float* x, size_t n);

// The f32 butterflies alone, in place on the n values at x (n a multiple of 32).
void hadamard32_f32(float* x, size_t n);

}  // namespace reach::test
