#include "tests/support/kv_quant_reference.hpp"

#include <algorithm>
#include <bitset>
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

void hadamard32_f32(float* x, size_t n) {
  for (size_t b = 0; b < n; b += kKvBlock) {
    float* v = x + b;
    for (uint32_t u = 0; u < 8; ++u) {   // bits 0 and 1, within each group of four
      float* e = v + 4 * u;
      const float y0 = e[0] + e[1], y1 = e[0] - e[1], y2 = e[2] + e[3], y3 = e[2] - e[3];
      e[0] = y0 + y2, e[1] = y1 + y3, e[2] = y0 - y2, e[3] = y1 - y3;
    }
    for (uint32_t h = 1; h < 8; h <<= 1)   // bits 2, 3, 4: groups u and u + h
      for (uint32_t u = 0; u < 8; ++u)
        if ((u & h) == 0)
          for (uint32_t j = 0; j < 4; ++j) {
            const float a = v[4 * u + j], c = v[4 * (u + h) + j];
            v[4 * u + j] = a + c;
            v[4 * (u + h) + j] = a - c;
          }
    for (uint32_t j = 0; j < kKvBlock; ++j) v[j] *= 0.17677669529663687f;
  }
}

void kv_round_trip_hadamard(KvType t, float* x, size_t n) {
  hadamard32_f32(x, n);
  kv_round_trip(t, x, n);
  const double s = 1.0 / std::sqrt(double(kKvBlock));
  for (size_t b = 0; b < n; b += kKvBlock) {
    double y[kKvBlock];
    for (uint32_t i = 0; i < kKvBlock; ++i) {
      double acc = 0;
      for (uint32_t j = 0; j < kKvBlock; ++j) acc += (std::bitset<8>(i & j).count() % 2 ? -s : s) * x[b + j];
      y[i] = acc;
    }
    for (uint32_t i = 0; i < kKvBlock; ++i) x[b + i] = float(y[i]);
  }
}

}  // namespace reach::test
