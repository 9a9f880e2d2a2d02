#version 450
// out[i] = f16 bits of in[i], round to nearest even, in integer arithmetic so
// the result is the same on every device (GLSL leaves the rounding of
// packHalf2x16 / float16_t() conversions to the implementation).
// Overflow -> ±inf, NaN -> quiet NaN (sign kept), f16 subnormals rounded
// correctly, tiny values -> ±0.
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise_f32_to_f16.h"
layout(binding = B_IN) readonly buffer In { uint a[]; };   // f32 bit patterns
layout(binding = B_OUT) writeonly buffer Out { uint16_t b[]; };
layout(push_constant) uniform P { uint n; } p;

uint f32_to_f16_rne(uint x) {
  const uint sign = (x >> 16) & 0x8000u;
  const uint e32 = (x >> 23) & 0xffu;
  uint mant = x & 0x7fffffu;
  if (e32 == 0xffu) return sign | 0x7c00u | (mant != 0u ? 0x200u : 0u);   // inf / NaN
  const int e = int(e32) - 112;                                           // f16 biased exponent
  if (e >= 31) return sign | 0x7c00u;                                     // overflow
  if (e <= 0) {                                                           // f16 subnormal or zero
    if (e < -10) return sign;
    mant |= 0x800000u;
    const uint shift = uint(14 - e);                                      // 14..24
    uint h = mant >> shift;
    const uint rem = mant & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (h & 1u) != 0u)) ++h;             // may carry into the smallest normal: right
    return sign | h;
  }
  uint h = (uint(e) << 10) | (mant >> 13);
  const uint rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) ++h;          // a carry into the exponent (even to inf) is right
  return sign | h;
}

void main() {
  GRID_STRIDE_LOOP(i, p.n) { b[i] = uint16_t(f32_to_f16_rne(a[i])); }
}
