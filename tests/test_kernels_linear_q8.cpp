// The integer-dot path for quantized weights (kernels/linear_q8.cpp):
// linear_quantize_q8 against a CPU quantizer of the same rule, and linear_q8
// (directly and through Kernels::linear with KernelConfig::quant_int_dot)
// against the f64 product of the dequantized weights (tests/support/quant_reference)
// and the activations quantized by that CPU rule and dequantized again.  Every
// weight type, M = 1 and M > 1, K a few blocks (not a multiple of 4 blocks),
// W through texel and storage buffers, and row chunks of a small binding span.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/quant_layout.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"
#include "tests/support/quant_reference.hpp"

using namespace reach;
using namespace reach::test;

namespace {

// One row of activations in Q8 blocks, quantized on the CPU by llama.cpp's rule
// (quantize_row_q8_1): d = max|x| / 127, q = roundf(x · (1/d)), halves away from zero.
struct Q8Row {
  std::vector<int8_t> q;
  std::vector<float> d, sum;
};
Q8Row q8_reference(const float* x, uint32_t K) {
  Q8Row r;
  r.q.resize(K);
  for (uint32_t c = 0; c < K / 32; ++c) {
    float amax = 0;
    for (uint32_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * c + i]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    int sum = 0;
    for (uint32_t i = 0; i < 32; ++i) {
      const int q = int(std::roundf(x[32 * c + i] * id));
      r.q[32 * c + i] = int8_t(q);
      sum += q;
    }
    r.d.push_back(d);
    r.sum.push_back(float(sum));
  }
  return r;
}

bool have_integer_dot() {
  if (gpu().device->caps().integer_dot) return true;
  MESSAGE("the device has no shaderIntegerDotProduct: the integer-dot kernels are not run");
  return false;
}

// Activations with exact ties: in a block whose max is 127 (d = 1, 1/d = 1),
// x = ±k.5 rounds away from zero; one block of zeros (d = 0).
std::vector<float> activations(uint32_t M, uint32_t K, uint32_t seed) {
  std::vector<float> x(size_t(M) * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = hash_value(i, seed);
  if (K >= 64 && M >= 2) {
    for (uint32_t i = 0; i < 32; ++i) x[K + i] = (i % 2 ? -1.0f : 1.0f) * (float(i) + 0.5f);
    x[K + 31] = 127.0f;
    for (uint32_t i = 0; i < 32; ++i) x[32 + i] = 0.0f;
  }
  return x;
}

TEST_CASE("linear_quantize_q8: d, q and the sum of q as the CPU rule, ties away from zero") {
  if (!have_integer_dot()) return;
  auto& g = gpu();
  Kernels k(*g.device, base_config());
  for (const auto& [M, K, x_off, q_off] : {std::tuple{1u, 32u, 0u, 0u}, std::tuple{3u, 96u, 4u, 16u},
                                           std::tuple{2u, 576u, 0u, 48u}, std::tuple{5u, 2048u, 12u, 0u}}) {
    const std::vector<float> x = activations(M, K, 7 + K);
    std::vector<float> xbuf(x_off / 4, 0.0f);
    xbuf.insert(xbuf.end(), x.begin(), x.end());
    Buffer bx = g.upload_f32(xbuf);
    const Q8Act shape{nullptr, q_off, M, K};
    const size_t words = (q_off + shape.bytes()) / 4;
    Buffer bq = g.upload_f32(std::vector<float>(words, 0.0f));
    g.run([&](CommandList& cmd) {
      k.linear_quantize_q8(cmd, Act{&bx, x_off, M, K}, Q8Act{&bq, q_off, M, K});
    });
    const std::vector<float> raw = g.download_f32(bq, words);
    std::vector<uint8_t> bytes(raw.size() * 4);
    std::memcpy(bytes.data(), raw.data(), bytes.size());
    size_t bad = 0;
    for (uint32_t m = 0; m < M; ++m) {
      const Q8Row r = q8_reference(x.data() + size_t(m) * K, K);
      for (uint32_t kk = 0; kk < K; ++kk) {
        const int8_t got = int8_t(bytes[q_off + size_t(m) * K + kk]);
        // Vulkan divides within 2.5 ulp (d and 1/d may differ from the CPU's in
        // the last bits): a q may then round the other way, but only off by one
        // and only where x / d is within ~2^-20 relative of a half.
        const float v = x[size_t(m) * K + kk] * (r.d[kk / 32] != 0 ? 1.0f / r.d[kk / 32] : 0.0f);
        const float frac = std::fabs(v - std::trunc(v));
        // The ties block (d = 127 / 127 = 1 exactly) has no such latitude.
        const bool ties_block = K >= 64 && M >= 2 && m == 1 && kk < 32;
        const bool near_half = !ties_block && std::fabs(frac - 0.5f) <= std::ldexp(std::fabs(v) + 1.0f, -20);
        if (got != r.q[kk] && !(near_half && std::abs(int(got) - int(r.q[kk])) == 1) && bad++ < 5)
          FAIL_CHECK("q at (m,k)=(" << m << "," << kk << "): got " << int(got) << ", want " << int(r.q[kk])
                                     << " (x=" << x[size_t(m) * K + kk] << ")");
      }
      for (uint32_t c = 0; c < K / 32; ++c) {
        float dm[2];
        std::memcpy(dm, bytes.data() + q_off + shape.quant_bytes() + (size_t(m) * (K / 32) + c) * 8, 8);
        // d: within 3 ulp of amax / 127 (see above); the sum: of the device's own q
        // (checked above), so equal to the CPU's unless a q rounded the other way.
        int dev_sum = 0;
        for (uint32_t i = 0; i < 32; ++i) dev_sum += int8_t(bytes[q_off + size_t(m) * K + 32 * c + i]);
        if ((std::fabs(dm[0] - r.d[c]) > 3 * std::ldexp(r.d[c], -23) || dm[1] != float(dev_sum) ||
             std::fabs(dm[1] - r.sum[c]) > 1) && bad++ < 5)
          FAIL_CHECK("block (m,c)=(" << m << "," << c << "): got d=" << std::hexfloat << dm[0] << " sum=" << dm[1]
                                     << ", want d=" << r.d[c] << " sum=" << r.sum[c]);
      }
    }
    CHECK_MESSAGE(bad == 0, "M=" << M << " K=" << K << ": " << bad << " values differ");
  }
}

std::vector<uint32_t> k_values(WType t) {
  if (wtype_block_elems(t) == 256) return {256, 768};
  return {32, 96, 160};
}

// Y = X · Wᵀ through Kernels::linear (quant_int_dot on: quantize, then linear_q8)
// or linear_q8 on a Q8 X quantized on the device first, against the exact product
// of the dequantized W and the CPU-quantized X.
void check_q8(Kernels& k, WType t, uint32_t M, uint32_t N, uint32_t K, bool through_linear,
              const std::string& variant, uint32_t seed) {
  auto& g = gpu();
  const std::vector<float> x = activations(M, K, seed * 3 + 1);
  const size_t nb = size_t(N) * K / wtype_block_elems(t);
  const std::vector<uint8_t> file = quant_random_blocks(t, nb, seed * 3 + 2);
  std::vector<uint8_t> dev(quant_device_bytes(t, N, K));
  quant_to_device_layout(t, N, K, file.data(), dev.data());
  std::vector<float> mag;
  const std::vector<float> w = quant_dequantize(t, file.data(), nb, &mag);

  std::vector<double> ref(size_t(M) * N);
  double bound = 0;
  for (uint32_t m = 0; m < M; ++m) {
    const Q8Row r = q8_reference(x.data() + size_t(m) * K, K);
    for (uint32_t n = 0; n < N; ++n) {
      double acc = 0, mg = 0;
      for (uint32_t kk = 0; kk < K; ++kk) {
        const double xv = double(r.d[kk / 32]) * r.q[kk];
        acc += xv * w[size_t(n) * K + kk];
        mg += std::fabs(xv) * mag[size_t(n) * K + kk];
      }
      ref[size_t(m) * N + n] = acc;
      bound = std::max(bound, mg);
    }
  }
  const float sentinel = -12345.0f;
  const size_t back = 3, y_total = size_t(M) * N + back;
  check_kernel({
      .op = through_linear ? "linear (quant_int_dot)" : "linear_q8",
      .params = str("M=", M, " N=", N, " K=", K, " ", wtype_name(t), " variant=", variant),
      .seed = seed,
      // The int8 sums are exact; per sub-block a few f32 roundings (scale x sum, the
      // offset term, x's scale) and then the f32 sum over K/32 sub-blocks, each
      // relative to sum |x|·(|a·q| + |b|); the reference's weights carry one
      // f32 rounding of that size.  Exact f32 activations instead of Q8 ones
      // would be off by ~|x|/254 per element, far above.
      .tol = Tolerance::max_abs((K / 32 + 16) * std::ldexp(1.0, -23) * bound + 1e-30,
                                "(K/32+16)*2^-23 * max over outputs of sum_k |x_q8_k|*(|a*q|+|b|)_k"),
      .device =
          [&] {
            Buffer bx = g.upload_f32(x);
            Buffer bw = g.upload_bytes(dev.data(), dev.size(), Arena::weights);
            Buffer by = g.upload_f32(std::vector<float>(y_total, sentinel));
            const Q8Act q8{nullptr, 0, M, K};
            Buffer bq = g.upload_f32(std::vector<float>(q8.bytes() / 4, 0.0f));
            const Act ax{&bx, 0, M, K}, ay{&by, 0, M, N};
            const Mat mw{&bw, 0, t, N, K};
            g.run([&](CommandList& cmd) {
              if (through_linear) {
                k.linear(cmd, ax, mw, ay);
              } else {
                k.linear_quantize_q8(cmd, ax, Q8Act{&bq, 0, M, K});
                cmd.barrier();
                k.linear_q8(cmd, Q8Act{&bq, 0, M, K}, mw, ay);
              }
            });
            return Values::of(g.download_f32(by, y_total));
          },
      .reference =
          [&] {
            std::vector<double> y(y_total, sentinel);
            std::copy(ref.begin(), ref.end(), y.begin());
            return Values::of(std::move(y));
          },
      .guard_back = back,
      .where = [N](size_t i) { return str("(m,n)=(", i / N, ",", i % N, ")"); },
  });
}

// texel: W (and, with x_texel, X) through texel buffers where the device's config does so.
KernelConfig int_dot_config(bool texel, bool x_texel = true, uint64_t max_binding = 0) {
  KernelConfig cfg = base_config();
  cfg.quant_int_dot = true;
  cfg.weights_texel = cfg.weights_texel && texel;
  cfg.activations_texel = cfg.activations_texel && x_texel;
  if (max_binding) cfg.max_binding = max_binding;
  return cfg;
}

void sweep(const KernelConfig& cfg, const std::string& variant, bool through_linear) {
  Kernels k(*gpu().device, cfg);
  k.use_scratch(*gpu().allocator);
  const uint32_t ms[] = {1u, 2u, 5u, 9u};
  const uint32_t per = cfg.matvec_wg * cfg.matvec_rows;
  const uint32_t ns[] = {1u, 67u, per + 1};
  for_sample("q8 " + variant, {std::size(kQuantTypes), std::size(ms), std::size(ns)}, 8, [&](const SweepPick& p) {
    const WType t = kQuantTypes[p[0]];
    const auto ks = k_values(t);
    const uint32_t M = ms[p[1]], N = ns[p[2]], seed = 1 + uint32_t(p.flat);
    check_q8(k, t, M, N, ks[(M + N + seed) % ks.size()], through_linear, variant, seed);
  });
}

}  // namespace

TEST_CASE("linear_q8: every weight type, M = 1 and M > 1, W and X as texels and as storage buffers") {
  if (!have_integer_dot()) return;
  sweep(int_dot_config(true, true), "W,X:texel", false);
  sweep(int_dot_config(true, false), "W:texel X:ssbo", false);
  sweep(int_dot_config(false), "W,X:ssbo", false);
}

TEST_CASE("linear with quant_int_dot: quantizes X, then linear_q8 (matvec and GEMM tiles)") {
  if (!have_integer_dot()) return;
  sweep(int_dot_config(true), "linear W:texel", true);
}

TEST_CASE("linear_q8: W in row chunks of a small binding span") {
  if (!have_integer_dot()) return;
  Kernels k(*gpu().device, int_dot_config(false, false, 4096));
  k.use_scratch(*gpu().allocator);
  check_q8(k, WType::q4_1, 3, 200, 96, true, "max_binding=4096", 11);
  check_q8(k, WType::q6_k, 1, 40, 256, true, "max_binding=4096", 12);
}

TEST_CASE("linear with quant_int_dot off, or without scratch: the exact path") {
  // The exact path's own tests are test_kernels_linear_quant.cpp; here only that
  // the int8 path is not taken: the result is the exact f32 product, not the Q8 one.
  if (!have_integer_dot()) return;
  auto& g = gpu();
  const uint32_t M = 2, N = 16, K = 64;
  const std::vector<float> x = activations(M, K, 5);
  const size_t nb = size_t(N) * K / 32;
  const std::vector<uint8_t> file = quant_random_blocks(WType::q8_0, nb, 6);
  std::vector<uint8_t> dev(quant_device_bytes(WType::q8_0, N, K));
  quant_to_device_layout(WType::q8_0, N, K, file.data(), dev.data());
  const std::vector<float> w = quant_dequantize(WType::q8_0, file.data(), nb);
  for (int mode = 0; mode < 2; ++mode) {
    KernelConfig cfg = base_config();
    cfg.quant_int_dot = mode == 1;   // mode 1: on, but no scratch allocator
    Kernels k(*g.device, cfg);
    Buffer bx = g.upload_f32(x);
    Buffer bw = g.upload_bytes(dev.data(), dev.size(), Arena::weights);
    Buffer by = g.zeros(size_t(M) * N * 4);
    g.run([&](CommandList& cmd) { k.linear(cmd, Act{&bx, 0, M, K}, Mat{&bw, 0, WType::q8_0, N, K}, Act{&by, 0, M, N}); });
    const std::vector<float> y = g.download_f32(by, size_t(M) * N);
    double worst = 0;
    for (uint32_t m = 0; m < M; ++m)
      for (uint32_t n = 0; n < N; ++n) {
        double acc = 0, mag = 0;
        for (uint32_t kk = 0; kk < K; ++kk) {
          acc += double(x[m * K + kk]) * w[n * K + kk];
          mag += std::fabs(double(x[m * K + kk]) * w[n * K + kk]);
        }
        worst = std::max(worst, std::fabs(y[m * N + n] - acc) / (mag + 1e-30));
      }
    // f32 accumulation over K = 64: well under 2^-16 relative to Σ|x·w|; Q8
    // activations are off by up to 2^-8 relative.
    CHECK_MESSAGE(worst < std::ldexp(1.0, -16), "mode " << mode << ": worst relative error " << worst);
  }
}
