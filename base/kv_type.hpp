#pragma once
// How the KV cache stores keys and values (--cache-type-k / --cache-type-v):
// f32, f16, or blocks of 32 values with one f16 scale (q8_0: int8, q4_0: 4-bit),
// quantized as they are written.  Plain host data: the kernels' codec is
// shaders/attention_kv_codec.glsl, the values its KV_* constants.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace reach {

enum class KvType : uint32_t { f32 = 0, f16 = 1, q8_0 = 2, q4_0 = 3 };

const char* kv_type_name(KvType t);                        // "f32", "f16", "q8_0", "q4_0"
std::optional<KvType> parse_kv_type(std::string_view name);   // exact names only
std::string kv_type_names();                               // "f32, f16, q8_0 or q4_0"

// Values per quantized block, and whether a type is block-quantized.
inline constexpr uint32_t kKvBlock = 32;
inline bool kv_quantized(KvType t) { return t == KvType::q8_0 || t == KvType::q4_0; }
// Whether a cache of type t stores each block of 32 values Walsh-Hadamard
// rotated (shaders/attention_hadamard.glsl): q4_0, whose 16 levels an outlier
// channel otherwise spends on itself.  Keys only where the kernels score the
// stored key as it is (Attention: a rotated or NoPE cache, not raw keys that
// the kernel turns by their position); values always.  q8_0 is left as ggml
// stores it: its rounding already costs little.
inline bool kv_hadamard(KvType t) { return t == KvType::q4_0; }

// Bytes of one cache row of head_dim values (one key or value of one kv head).
// Quantized rows are the values' words, then the blocks' f16 scales two per
// 32-bit word; head_dim must then be a multiple of kKvBlock (kv_type_fits).
uint64_t kv_row_bytes(KvType t, uint32_t head_dim);
// Whether rows of head_dim values can be stored as t; false names why in *why.
bool kv_type_fits(KvType t, uint32_t head_dim, std::string* why = nullptr);

}  // namespace reach
