#include "base/half.hpp"

#include <cstring>

namespace reach {

uint16_t f32_to_f16_bits(float f) {
  uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00 | ((x >> 13) & 0x3ff));   // NaN stays NaN
  if (x >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);   // >= 65520 (and inf): inf
  if (x < 0x38800000) {                                                // below 2^-14: subnormal or zero
    if (x <= 0x33000000) return sign;                                  // <= 2^-25 rounds (to even) to 0
    const uint32_t e = x >> 23, m = (x & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;                                    // m * 2^(e-150) in units of 2^-24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  x -= 0x38000000;   // rebias the exponent from 127 to 15
  uint32_t q = x >> 13;
  const uint32_t rem = x & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) ++q;   // a carry into the exponent is right, up to 0x7bff
  return static_cast<uint16_t>(sign | q);
}

uint16_t f32_to_bf16_bits(float f) {
  uint32_t n = f32_bits(f);
  if ((n & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((n >> 16) | 64);   // quiet NaN
  return static_cast<uint16_t>((uint64_t(n) + (0x7fff + ((n >> 16) & 1))) >> 16);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);   // inf / nan (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {   // subnormal: renormalize
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace reach
