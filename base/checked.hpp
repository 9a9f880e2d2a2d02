#pragma once
// Sizes computed from untrusted values (config.json, flags, file headers):
// arithmetic that reports overflow instead of wrapping or invoking undefined
// behaviour.  Saturating forms give UINT64_MAX, which then fails every limit
// it is compared with.
#include <cstdint>
#include <initializer_list>
#include <optional>

namespace reach {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline uint64_t saturating_mul(std::initializer_list<uint64_t> factors) {
  uint64_t r = 1;
  for (uint64_t f : factors)
    if (__builtin_mul_overflow(r, f, &r)) return UINT64_MAX;
  return r;
}

inline uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// "12 MiB", rounded up; safe for UINT64_MAX.
inline uint64_t mib_ceil(uint64_t bytes) { return bytes / (1u << 20) + (bytes % (1u << 20) != 0); }

}  // namespace reach
