#include "base/kv_type.hpp"

namespace reach {

namespace {
constexpr const char* kNames[] = {"f32", "f16", "q8_0", "q4_0"};
}

const char* kv_type_name(KvType t) {
  const auto i = uint32_t(t);
  return i < 4 ? kNames[i] : "?";
}

std::optional<KvType> parse_kv_type(std::string_view name) {
  for (uint32_t i = 0; i < 4; ++i)
    if (name == kNames[i]) return KvType(i);
  return std::nullopt;
}

std::string kv_type_names() { return "f32, f16, q8_0 or q4_0"; }

uint64_t kv_row_bytes(KvType t, uint32_t head_dim) {
  const uint64_t d = head_dim;
  const uint64_t scale_words = (d / kKvBlock + 1) / 2;   // two f16 scales per word
  switch (t) {
    case KvType::f32: return d * 4;
    case KvType::f16: return d * 2;
    case KvType::q8_0: return d + scale_words * 4;
    case KvType::q4_0: return d / 2 + scale_words * 4;
  }
  return d * 4;
}

bool kv_type_fits(KvType t, uint32_t head_dim, std::string* why) {
  if (!kv_quantized(t) || head_dim % kKvBlock == 0) return true;
  if (why)
    *why = std::string(kv_type_name(t)) + " stores blocks of " + std::to_string(kKvBlock) +
           " values, and this model's head_dim " + std::to_string(head_dim) + " is not a multiple of " +
           std::to_string(kKvBlock) + ": use f16 or f32";
  return false;
}

}  // namespace reach
