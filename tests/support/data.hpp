#pragma once
// Deterministic test inputs, and the bit-level number conversions the CPU
// references use: written here from IEEE 754, apart from base/half.hpp on purpose, as an
// independent reference for the library's conversions and the GPU paths.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/wtype.hpp"

namespace reach::test {

// Uniform in [lo, hi) from std::mt19937(seed).
std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
// Uniform in [0, vocab) from std::mt19937(seed).
std::vector<int32_t> random_ids(size_t n, int32_t vocab, uint32_t seed);

// Cheap deterministic value in [-1, 1) for element i (for inputs of tens of millions of elements).
inline float hash_value(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(int32_t(z >> 40) - (1 << 23)) / float(1 << 23);
}

// n weights hash_value(i, seed) stored as t (f32, f16 or bf16): the stored bytes, and the values they hold.
void float_weights(WType t, uint64_t n, uint32_t seed, std::vector<uint8_t>& bytes, std::vector<float>& values);

uint16_t f32_to_f16_bits(float f);   // round to nearest even
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);  // round to nearest even
float bf16_bits_to_f32(uint16_t b);

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace reach::test
