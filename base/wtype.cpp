#include "base/wtype.hpp"

#include <cctype>
#include <string>

#include "base/error.hpp"

namespace reach {

namespace {
struct WTypeInfo {
  const char* name;
  uint32_t block_elems, block_bytes;
};
// Block layouts per the GGML/GGUF specification (ggml-common.h's block_* structs).
constexpr WTypeInfo kWTypes[kWTypeCount] = {
    {"f32", 1, 4},     {"f16", 1, 2},     {"bf16", 1, 2},    {"q8_0", 32, 34},  {"q4_0", 32, 18},  {"q4_1", 32, 20},
    {"q5_0", 32, 22},  {"q5_1", 32, 24},  {"q4_k", 256, 144}, {"q5_k", 256, 176}, {"q6_k", 256, 210},
    {"mxfp4", 32, 17},   // OCP microscaling FP4: an E8M0 scale byte, 16 bytes of E2M1 pairs
};
const WTypeInfo& info(WType t) {
  const auto i = static_cast<uint32_t>(t);
  if (i >= kWTypeCount) throw Error(ErrorCode::internal, "unknown weight type " + std::to_string(i));
  return kWTypes[i];
}
}  // namespace

bool wtype_is_quant(WType t) { return info(t).block_elems > 1; }
uint32_t wtype_block_elems(WType t) { return info(t).block_elems; }
uint32_t wtype_block_bytes(WType t) { return info(t).block_bytes; }
uint32_t wtype_size(WType t) {
  if (wtype_is_quant(t)) throw Error(ErrorCode::internal, std::string("wtype_size: ") + info(t).name + " is a block format");
  return info(t).block_bytes;
}
uint64_t wtype_row_bytes(WType t, uint64_t cols) {
  const WTypeInfo& i = info(t);
  if (cols % i.block_elems)
    throw Error(ErrorCode::internal, std::string("a ") + i.name + " row of " + std::to_string(cols) +
                                         " weights is not a whole number of " + std::to_string(i.block_elems) +
                                         "-weight blocks");
  return cols / i.block_elems * i.block_bytes;
}
const char* wtype_name(WType t) {
  const auto i = static_cast<uint32_t>(t);
  return i < kWTypeCount ? kWTypes[i].name : "?";
}

std::optional<WType> wtype_from_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (uint32_t i = 0; i < kWTypeCount; ++i)
    if (lower == wtype_name(static_cast<WType>(i))) return static_cast<WType>(i);
  return std::nullopt;
}

}  // namespace reach
