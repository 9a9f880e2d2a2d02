#include "tests/support/kv_quant_reference.hpp"

#include <algorithm>
#include <cmath>

#include "base/half.hpp"

namespace reach::test {

namespace {
float to_half(float x) { return f16_to_f32(f32_to_f16_bits(x)); }
}  // namespace

void kv_round_trip(KvType t, float* x, size_t n) {
  if (t == KvType::f32) return;
  if (t == KvType::f16) {
    for (size_t i = 0; i < n; ++i) x[i] = to_half(x[i]);
    return;
  }
  for (size_t b = 0; b < n; b += kKvBlock) {
    float* blk = x + b;
    float d = 0;
    if (t == KvType::q8_0) {
      float amax = 0;
      for (uint32_t j = 0; j < kKvBlock; ++j) amax = std::max(amax, std::fabs(blk[j]));
      d = amax / 127.0f;
    } else {
      float amax = 0, mx = 0;
      for (uint32_t j = 0; j < kKvBlock; ++j)
        if (std::fabs(blk[j]) > amax) amax = std::fabs(blk[j]), mx = blk[j];
      d = mx / -8.0f;
    }
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const float dh = to_half(d);
    for (uint32_t j = 0; j < kKvBlock; ++j) {
      if (t == KvType::q8_0) {
        const float q = std::clamp(std::round(blk[j] * id), -127.0f, 127.0f);   // round half away from 0
        blk[j] = q * dh;
      } else {
        const float q = std::min(15.0f, std::floor(blk[j] * id + 8.5f));
        blk[j] = (q - 8.0f) * dh;
      }
    }
  }
}

}  // namespace reach::test
