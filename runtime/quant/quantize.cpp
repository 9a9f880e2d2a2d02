#include "runtime/quant/quantize.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/half.hpp"
#include "runtime/formats/safetensors.hpp"   // f16_to_f32

// Byte identity with the references needs every float operation rounded on
// its own, in the reference's order: no fused multiply-adds.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace reach {

namespace {

void put_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// A float -> int conversion as x86's cvttss2si does it (numpy's astype and
// ggml's casts compile to it): truncation, and INT_MIN for NaN and values out
// of range, whose low byte is 0.  Defined for every input, unlike a C++ cast.
int32_t trunc_i32(float v) {
  if (!(std::fabs(v) < 2147483648.0f)) return INT32_MIN;
  return static_cast<int32_t>(v);
}

// ggml's nearest_int: round to nearest, ties to even, through the mantissa of
// v + 1.5 * 2^23 (exact for |v| < 2^22; other inputs give what ggml gives).
int nearest_int(float v) {
  const float s = v + 12582912.f;
  return static_cast<int>(f32_bits(s) & 0x007fffff) - 0x00400000;
}

// ---- Q8_0: d = amax / 127 (f16), qs = round-half-away(x / d).
void q8_0_row(const float* x, uint32_t cols, uint8_t* out) {
  for (uint32_t b = 0; b < cols / 32; ++b, x += 32, out += 34) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_u16(out, f32_to_f16_bits(d));
    for (int j = 0; j < 32; ++j) {
      const float r = std::round(x[j] * id);   // half away from zero, as gguf's np_roundf and ggml's roundf
      out[2 + j] = static_cast<uint8_t>(trunc_i32(r) & 0xff);
    }
  }
}

// ---- Q4_0: d = (the signed value of largest magnitude, first one on ties) / -8,
// q = min(15, trunc(x / d + 8.5)); low nibbles hold elements 0..15, high 16..31.
void q4_0_row(const float* x, uint32_t cols, uint8_t* out) {
  for (uint32_t b = 0; b < cols / 32; ++b, x += 32, out += 18) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_u16(out, f32_to_f16_bits(d));
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[16 + j] * id;
      const int q0 = std::min(15, trunc_i32(x0 + 8.5f) & 0xff);
      const int q1 = std::min(15, trunc_i32(x1 + 8.5f) & 0xff);
      out[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// ---- Q4_K (ggml's quantize_row_q4_K_ref, the path llama.cpp takes without an
// importance matrix): 8 sub-blocks of 32 with a 6-bit scale and min each, fitted
// by make_qkx2_quants, under f16 super-block scales d and dmin.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i], fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// Block: d (f16), dmin (f16), scales[12], qs[128].
void q4_k_row(const float* x, uint32_t cols, uint8_t* out) {
  uint8_t L[256], Laux[32];
  float weights[32], mins[8], scales[8];
  for (uint32_t b = 0; b < cols / 256; ++b, x += 256, out += 144) {
    uint8_t* sc = out + 4;
    uint8_t* qs = out + 16;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
      scales[j] = make_qkx2_quants(32, 15, xs, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::memset(sc, 0, 12);
    for (int j = 0; j < 8; ++j) {
      uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
      uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
      ls = std::min<uint8_t>(63, ls);
      lm = std::min<uint8_t>(63, lm);
      if (j < 4) {
        sc[j] = ls;
        sc[j + 4] = lm;
      } else {
        sc[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        sc[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        sc[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    const uint16_t dh = f32_to_f16_bits(max_scale / 63.f), mh = f32_to_f16_bits(max_min / 63.f);
    put_u16(out, dh);
    put_u16(out + 2, mh);
    const float df = f16_to_f32(dh), dminf = f16_to_f32(mh);   // the stored scales, as ggml re-reads them
    for (int j = 0; j < 8; ++j) {
      uint8_t s, m;
      scale_min_k4(j, sc, &s, &m);
      const float d = df * static_cast<float>(s);
      if (d == 0) continue;   // keeps make_qkx2_quants' levels, as ggml does
      const float dm = dminf * static_cast<float>(m);
      for (int ii = 0; ii < 32; ++ii) {
        const int l = nearest_int((x[32 * j + ii] + dm) / d);
        L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(15, l)));
      }
    }
    for (int j = 0; j < 256; j += 64, qs += 32)
      for (int l = 0; l < 32; ++l) qs[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

}  // namespace

bool quantize_supported(WType t) { return t == WType::q8_0 || t == WType::q4_0 || t == WType::q4_k; }

std::string quantize_type_names() { return "q8_0, q4_0, q4_k"; }

void quantize_matrix(WType t, const float* src, uint32_t rows, uint32_t cols, void* out_blocks, unsigned threads) {
  void (*row_fn)(const float*, uint32_t, uint8_t*) = nullptr;
  switch (t) {
    case WType::q8_0: row_fn = q8_0_row; break;
    case WType::q4_0: row_fn = q4_0_row; break;
    case WType::q4_k: row_fn = q4_k_row; break;
    default:
      throw Error(ErrorCode::unsupported, std::string("quantizing to ") + wtype_name(t) +
                                              " is not supported; reach quantizes to " + quantize_type_names());
  }
  const uint64_t row_bytes = wtype_row_bytes(t, cols);   // throws internal for a partial block
  auto* out = static_cast<uint8_t*>(out_blocks);
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  // Rows are independent: contiguous chunks per thread, at least a few rows each.
  const uint64_t min_rows = std::max<uint64_t>(1, (uint64_t(1) << 16) / std::max<uint32_t>(cols, 1));
  const unsigned n = static_cast<unsigned>(std::min<uint64_t>(threads, std::max<uint64_t>(1, rows / min_rows)));
  auto work = [&](uint64_t r0, uint64_t r1) {
    for (uint64_t r = r0; r < r1; ++r) row_fn(src + r * cols, cols, out + r * row_bytes);
  };
  if (n <= 1) {
    work(0, rows);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(n);
  for (unsigned i = 0; i < n; ++i) {
    const uint64_t r0 = uint64_t(rows) * i / n, r1 = uint64_t(rows) * (i + 1) / n;
    pool.emplace_back([&, i, r0, r1] {
      try {
        work(r0, r1);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace reach
