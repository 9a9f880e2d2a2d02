#pragma once
// Weight types: plain data shared by the file formats, the quantizers and the
// kernels.  The ids are the shaders' too: both sides read base/wtype_list.h,
// so they never change and cannot drift.
#include <cstdint>
#include <optional>
#include <string_view>

namespace reach {

// Weight types.  The quantized ones are GGML's block formats (kernels/quant_layout.hpp):
// a row of `cols` weights is cols / wtype_block_elems blocks of wtype_block_bytes each.
enum class WType : uint32_t {
#define WTYPE(id, name, NAME) name = id,
#include "base/wtype_list.h"
#undef WTYPE
};
constexpr uint32_t kWTypeCount = 0
#define WTYPE(id, name, NAME) +1
#include "base/wtype_list.h"
#undef WTYPE
    ;
bool wtype_is_quant(WType t);
uint32_t wtype_block_elems(WType t);   // 1 for f32/f16/bf16; 32 or 256 for the block formats
uint32_t wtype_block_bytes(WType t);   // bytes per block (the element size for f32/f16/bf16)
uint32_t wtype_size(WType t);          // element size of f32/f16/bf16; throws internal for block formats
// Bytes of one row of `cols` weights; cols must be a multiple of wtype_block_elems (throws internal).
uint64_t wtype_row_bytes(WType t, uint64_t cols);
const char* wtype_name(WType t);       // "f16", "q4_k", ...
// "q8_0", "Q4_K", ... -> the type, for any name wtype_name gives (case-insensitive);
// nullopt for anything else.
std::optional<WType> wtype_from_name(std::string_view name);

}  // namespace reach
