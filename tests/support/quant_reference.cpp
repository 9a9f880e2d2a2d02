#include "tests/support/quant_reference.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "tests/support/data.hpp"

namespace reach::test {

namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_bits_to_f32(h);
}

// 6-bit scale and min of sub-block j of a q4_k / q5_k block (the 12 packed scale bytes).
void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Each function writes one block's weights to y.  Operation order (f32):
// symmetric types d * q; q4_1 / q5_1 d * q + m; K-quants (d * sc) * q - (dmin * m); q6_k (d * sc) * q.
void block_q8_0(const uint8_t* b, float* y, float* g) {
  const float d = f16_at(b);
  for (int i = 0; i < 32; ++i) {
    y[i] = float(int8_t(b[2 + i])) * d;
    g[i] = std::fabs(y[i]);
  }
}
void block_q4_0(const uint8_t* b, float* y, float* g) {
  const float d = f16_at(b);
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float((b[2 + i] & 0xF) - 8);
    y[i + 16] = d * float((b[2 + i] >> 4) - 8);
    g[i] = std::fabs(d) * float((b[2 + i] & 0xF) + 8);
    g[i + 16] = std::fabs(d) * float((b[2 + i] >> 4) + 8);
  }
}
void block_q4_1(const uint8_t* b, float* y, float* g) {
  const float d = f16_at(b), m = f16_at(b + 2);
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float(b[4 + i] & 0xF) + m;
    y[i + 16] = d * float(b[4 + i] >> 4) + m;
    g[i] = std::fabs(d * float(b[4 + i] & 0xF)) + std::fabs(m);
    g[i + 16] = std::fabs(d * float(b[4 + i] >> 4)) + std::fabs(m);
  }
}
void block_q5(const uint8_t* b, float* y, float* g, bool has_min) {
  const float d = f16_at(b), m = has_min ? f16_at(b + 2) : 0.0f;
  const uint8_t* p = b + (has_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  for (int i = 0; i < 16; ++i) {
    const int lo = (qs[i] & 0xF) | (((qh >> i) & 1) << 4);
    const int hi = (qs[i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
    if (has_min) {
      y[i] = d * float(lo) + m;
      y[i + 16] = d * float(hi) + m;
    } else {
      y[i] = d * float(lo - 16);
      y[i + 16] = d * float(hi - 16);
    }
    g[i] = std::fabs(d) * float(lo + (has_min ? 0 : 16)) + std::fabs(m);
    g[i + 16] = std::fabs(d) * float(hi + (has_min ? 0 : 16)) + std::fabs(m);
  }
}
// q4_k (qh == nullptr) and q5_k: 8 sub-blocks of 32; the 32 qs bytes of chunk j hold
// sub-block 2j in their low nibbles and 2j+1 in their high nibbles.
void block_k45(const uint8_t* b, float* y, float* g, bool five) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = five ? b + 16 : nullptr;
  const uint8_t* qs = b + (five ? 48 : 16);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    scale_min_k4(s, scales, sc, m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    const uint8_t* q = qs + 32 * (s / 2);
    for (int l = 0; l < 32; ++l) {
      int v = (s & 1) ? q[l] >> 4 : q[l] & 0xF;
      if (five) v |= ((qh[l] >> s) & 1) << 4;
      y[32 * s + l] = d1 * float(v) - m1;
      g[32 * s + l] = std::fabs(d1 * float(v)) + std::fabs(m1);
    }
  }
}
// q6_k: two halves of 128; in half h element 32t + l (t < 4) takes a nibble of
// ql[64h + 32(t&1) + l] (low for t < 2) and bits 2t..2t+1 of qh[32h + l]; scale index 8h + 2t + l/16.
void block_q6_k(const uint8_t* b, float* y, float* g) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < 4; ++t)
      for (int l = 0; l < 32; ++l) {
        const uint8_t lb = ql[64 * h + 32 * (t & 1) + l];
        const int lo = t < 2 ? lb & 0xF : lb >> 4;
        const int q = (lo | (((qh[32 * h + l] >> (2 * t)) & 3) << 4)) - 32;
        const float a = d * float(sc[8 * h + 2 * t + l / 16]);
        y[128 * h + 32 * t + l] = a * float(q);
        g[128 * h + 32 * t + l] = std::fabs(a) * float(q + 64);
      }
}

}  // namespace

// mxfp4 from the OCP MX specification: an E8M0 scale 2^(e - 127) times E2M1 values (sign, 2-bit exponent,
// 1-bit mantissa: 0, 0.5, 1, 1.5, 2, 3, 4, 6); weight i in the low nibble of byte 1 + i, i + 16 the high one.
float e2m1(uint32_t c) {
  static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (c & 8) ? -mag[c & 7] : mag[c & 7];
}
void block_mxfp4(const uint8_t* b, float* y, float* g) {
  const double scale = std::ldexp(1.0, int(b[0]) - 127);
  for (int i = 0; i < 16; ++i) {
    y[i] = float(scale * e2m1(b[1 + i] & 0xF));
    y[i + 16] = float(scale * e2m1(b[1 + i] >> 4));
    g[i] = std::fabs(y[i]);
    g[i + 16] = std::fabs(y[i + 16]);
  }
}

std::vector<float> quant_dequantize(WType t, const uint8_t* blocks, size_t n_blocks, std::vector<float>* mag) {
  const uint32_t be = wtype_block_elems(t), bb = wtype_block_bytes(t);
  std::vector<float> y(n_blocks * be), g(n_blocks * be);
  for (size_t i = 0; i < n_blocks; ++i) {
    const uint8_t* b = blocks + i * bb;
    float* o = y.data() + i * be;
    float* og = g.data() + i * be;
    switch (t) {
      case WType::q8_0: block_q8_0(b, o, og); break;
      case WType::q4_0: block_q4_0(b, o, og); break;
      case WType::q4_1: block_q4_1(b, o, og); break;
      case WType::q5_0: block_q5(b, o, og, false); break;
      case WType::q5_1: block_q5(b, o, og, true); break;
      case WType::q4_k: block_k45(b, o, og, false); break;
      case WType::q5_k: block_k45(b, o, og, true); break;
      case WType::q6_k: block_q6_k(b, o, og); break;
      case WType::mxfp4: block_mxfp4(b, o, og); break;
      default: throw Error(ErrorCode::internal, std::string("quant_dequantize: ") + wtype_name(t));
    }
  }
  if (mag) *mag = std::move(g);
  return y;
}

std::vector<uint8_t> quant_random_blocks(WType t, size_t n_blocks, uint32_t seed) {
  const uint32_t bb = wtype_block_bytes(t);
  std::vector<uint8_t> out(n_blocks * bb);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  auto next = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return uint32_t(s >> 16);
  };
  for (auto& v : out) v = uint8_t(next());
  // f16 fields: sign, exponent 6..10 (2^-9 .. 2^-5 times 1.mantissa), random mantissa.
  auto put_f16 = [&](uint8_t* p) {
    const uint32_t r = next();
    const uint16_t h = uint16_t(((r & 1) << 15) | ((6 + (r >> 1) % 5) << 10) | ((r >> 8) & 1023));
    std::memcpy(p, &h, 2);
  };
  for (size_t i = 0; i < n_blocks; ++i) {
    uint8_t* b = out.data() + i * bb;
    switch (t) {
      case WType::q4_1: case WType::q5_1: case WType::q4_k: case WType::q5_k:
        put_f16(b);
        put_f16(b + 2);
        break;
      case WType::q6_k: put_f16(b + 208); break;
      case WType::mxfp4: b[0] = uint8_t(118 + next() % 8); break;   // scales 2^-10 .. 2^-3: weights up to ~1.5
      default: put_f16(b);
    }
  }
  return out;
}

}  // namespace reach::test
