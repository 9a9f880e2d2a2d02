// elementwise_add, _silu_mul, _gelu_tanh_mul, _scale, _softcap, _bf16_to_f32 and _f32_to_f16 (kernels/elementwise.cpp) on the
// Vulkan device vs plain C++ references, through tests/support/kernel_check:
// sizes around the workgroup, extreme inputs, every bf16 bit pattern, f32 -> f16
// rounding ties, and the refusal of the 16-bit paths on a device without
// 16-bit storage.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "tests/support/data.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"

using namespace reach;
using namespace reach::test;

namespace {

constexpr uint32_t kGroup = 256;   // the elementwise kernels' workgroup (kernels/elementwise.cpp)

}  // namespace

// IEEE f32 addition is correctly rounded on both sides.
TEST_CASE("kernel elementwise_add: sizes and broadcast") {
  auto& g = gpu();
  for (uint32_t n : sizes_around(kGroup, {7, 100003}))
    for (uint32_t period : {n, std::min(n, 64u)}) {
      const auto a = random_floats(n, n), b = random_floats(period, n + 1);
      check_kernel({
          .op = "elementwise_add",
          .params = str("dtype=f32 n=", n, " b_period=", period, " (b seed ", n + 1, ")"),
          .seed = n,
          .tol = Tolerance::exact("f32 addition is correctly rounded"),
          .device =
              [&] {
                Buffer ba = g.upload_f32(a), bb = g.upload_f32(b), by = g.zeros(n * 4);
                g.run([&](CommandList& cmd) { g.kernels->elementwise_add(cmd, ba.range(), bb.range(), by.range(), n, period); });
                return Values::bits_of(g.download_f32(by, n));
              },
          .reference =
              [&] {
                std::vector<float> y(n);
                for (uint32_t i = 0; i < n; ++i) y[i] = a[i] + b[i % period];
                return Values::bits_of(y);
              },
      });
    }
}

// Tolerance 1e-5 relative + 1e-30 absolute: exp is <= 3+2|x| ULP (|g| <= 10:
// <= 23 ULP = 1.4e-6), the division <= 2.5 ULP and the product 0.5 ULP; the
// absolute term covers results in the f32 denormal range, which a device may
// flush to zero (g = -100 gives ~ -4e-42).
TEST_CASE("kernel elementwise_silu_mul: sizes and extreme inputs") {
  auto& g = gpu();
  const Tolerance tol = Tolerance::close(
      1e-5, 1e-30, "exp <= 23 ULP for |g| <= 10, division 2.5 ULP, product 0.5 ULP; 1e-30 absolute for denormals");
  double worst_rel = 0;
  for (uint32_t n : sizes_around(kGroup, {7, 1000, 100003})) {
    auto gv = random_floats(n, 400 + n, -10.0f, 10.0f);
    const auto u = random_floats(n, 500 + n, -2.0f, 2.0f);
    const float specials[] = {0.0f, -0.0f, 100.0f, -100.0f, 88.0f, -88.0f, 1e-8f, -1e-8f, 20.0f, -20.0f};
    for (size_t i = 0; i < std::size(specials) && i < n; ++i) gv[i] = specials[i];
    const auto s = check_kernel({
        .op = "elementwise_silu_mul",
        .params = str("dtype=f32 n=", n, " (u seed ", 500 + n, "; g[0..9] = 0, -0, +-100, +-88, +-1e-8, +-20)"),
        .seed = 400 + n,
        .tol = tol,
        .device =
            [&] {
              Buffer bg = g.upload_f32(gv), bu = g.upload_f32(u), by = g.zeros(n * 4);
              g.run([&](CommandList& cmd) { g.kernels->elementwise_silu_mul(cmd, bg.range(), bu.range(), by.range(), n); });
              return Values::of(g.download_f32(by, n));
            },
        .reference =
            [&] {
              std::vector<double> ref(n);
              for (uint32_t i = 0; i < n; ++i) ref[i] = double(gv[i]) / (1.0 + std::exp(-double(gv[i]))) * u[i];
              return Values::of(ref);
            },
    });
    worst_rel = std::max(worst_rel, s.max_rel);
  }
  MESSAGE("elementwise_silu_mul: worst relative error over all cases " << worst_rel << " (tolerance " << tol.rel << ")");
  Buffer small = g.zeros(16);
  CommandList bad(*g.device);
  bad.begin();
  CHECK_THROWS_AS(g.kernels->elementwise_silu_mul(bad, small.range(), small.range(), small.range(), 5), Error);
  bad.end();
}

// gelu_tanh(g)·u against float64 0.5·g·(1 + tanh(sqrt(2/pi)(g + 0.044715 g³)))·u (in its exp form).  Tolerance 5e-5
// relative + 1e-30 absolute: the kernel computes g / (1 + exp(−z2)), z2 = 2·sqrt(2/pi)(g + 0.044715 g³); where
// the result is above 1e-30, |z2| < 71, so a few-ULP error of z2 (3.6e-7 relative) moves exp by up to
// 71 · 3.6e-7 = 2.6e-5, and exp itself is <= 3 + 2|x| = 145 ULP (8.6e-6); the division and product add 3 ULP.
// The absolute term covers results in or near the denormal range (g <= −10), which a device may flush.
TEST_CASE("kernel elementwise_gelu_tanh_mul: sizes and extreme inputs") {
  auto& g = gpu();
  const Tolerance tol = Tolerance::close(
      5e-5, 1e-30, "|z2| < 71 where |y| > 1e-30: z2's few ULP x 71 + exp's 145 ULP; 1e-30 absolute for denormals");
  double worst_rel = 0;
  for (uint32_t n : sizes_around(kGroup, {7, 1000, 100003})) {
    auto gv = random_floats(n, 600 + n, -10.0f, 10.0f);
    const auto u = random_floats(n, 700 + n, -2.0f, 2.0f);
    const float specials[] = {0.0f, -0.0f, 100.0f, -100.0f, 88.0f, -88.0f, 1e-8f, -1e-8f, 20.0f, -20.0f};
    for (size_t i = 0; i < std::size(specials) && i < n; ++i) gv[i] = specials[i];
    const auto s = check_kernel({
        .op = "elementwise_gelu_tanh_mul",
        .params = str("dtype=f32 n=", n, " (u seed ", 700 + n, "; g[0..9] = 0, -0, +-100, +-88, +-1e-8, +-20)"),
        .seed = 600 + n,
        .tol = tol,
        .device =
            [&] {
              Buffer bg = g.upload_f32(gv), bu = g.upload_f32(u), by = g.zeros(n * 4);
              g.run([&](CommandList& cmd) { g.kernels->elementwise_gelu_tanh_mul(cmd, bg.range(), bu.range(), by.range(), n); });
              return Values::of(g.download_f32(by, n));
            },
        .reference =
            [&] {
              const double c = std::sqrt(2.0 / 3.14159265358979323846);
              std::vector<double> ref(n);
              for (uint32_t i = 0; i < n; ++i) {
                const double a = gv[i];
                // 0.5 (1 + tanh z) = 1 / (1 + exp(-2z)): the same value without double's cancellation of
                // 1 + tanh z near -1 (which gives 0 where the true result is ~1e-20).
                ref[i] = a / (1.0 + std::exp(-2.0 * c * (a + 0.044715 * a * a * a))) * u[i];
              }
              return Values::of(ref);
            },
    });
    worst_rel = std::max(worst_rel, s.max_rel);
  }
  MESSAGE("elementwise_gelu_tanh_mul: worst relative error over all cases " << worst_rel << " (tolerance " << tol.rel << ")");
  Buffer small = g.zeros(16);
  CommandList bad(*g.device);
  bad.begin();
  CHECK_THROWS_AS(g.kernels->elementwise_gelu_tanh_mul(bad, small.range(), small.range(), small.range(), 5), Error);
  bad.end();
}

// x·s in place: one f32 product, correctly rounded.
TEST_CASE("kernel elementwise_scale: in place, exact") {
  auto& g = gpu();
  for (uint32_t n : sizes_around(kGroup, {7, 100003})) {
    const auto x = random_floats(n, 800 + n, -100.0f, 100.0f);
    const float s = 25.298221f;
    check_kernel({
        .op = "elementwise_scale",
        .params = str("dtype=f32 n=", n, " s=", s, " in place"),
        .seed = 800 + n,
        .tol = Tolerance::exact("one f32 product is correctly rounded"),
        .device =
            [&] {
              Buffer bx = g.upload_f32(x);
              g.run([&](CommandList& cmd) { g.kernels->elementwise_scale(cmd, bx.range(), bx.range(), n, s); });
              return Values::bits_of(g.download_f32(bx, n));
            },
        .reference =
            [&] {
              std::vector<float> y(n);
              for (uint32_t i = 0; i < n; ++i) y[i] = x[i] * s;
              return Values::bits_of(y);
            },
    });
  }
}

// cap·tanh(x/cap) vs std::tanh in double.  Relative 4e-6: x/cap is rounded once (6e-8 relative, and tanh's
// relative slope is <= 1).  Below |x/cap| = 1/8 the kernel sums tanh's odd series to y^7 (truncation < 2e-9, a
// few f32 roundings: ~3e-7).  Above, it forms 1 - 2/(E + 1), E = exp(2|y|): Vulkan's exp is within 3 + 2|2y| ULP,
// and an error δ of E moves the result by 2E/(E² - 1)·δ relative (4x at the switch, E = e^0.25, falling as 2/E):
// ~8e-7, plus ~5e-7 from rounding 2/(E + 1) before the cancellation at the switch.  Where E overflows (|y| > 44)
// the result is exactly ±cap, and tanh is ±1 in double there too.  A wrong formula (a missing cap, tanh
// without the division) misses by far more.
TEST_CASE("kernel elementwise_softcap: in place and out of place, saturation, the series switch") {
  auto& g = gpu();
  const Tolerance tol = Tolerance::close(
      4e-6, 0, "x/cap rounded (6e-8); series below |y| = 1/8 (~3e-7); exp's 3 + 2|x| ULP x 4 at the switch (~8e-7)");
  double worst_rel = 0;
  const float inf = std::numeric_limits<float>::infinity();
  for (const float cap : {30.0f, 5.0f}) {
    for (uint32_t n : sizes_around(kGroup, {7, 100003})) {
      const bool in_place = n % 2 == 1;
      auto x = random_floats(n, 900 + n, -8.0f * cap, 8.0f * cap);
      // Zeros, tiny values, the series/exp switch at |x| = cap/8 and its neighbours, saturation, overflow of exp.
      const float sw = cap / 8.0f;
      const float specials[] = {0.0f, -0.0f, 1e-8f, -1e-8f, sw, -sw, std::nextafter(sw, 0.0f), std::nextafter(sw, inf),
                                1e4f, -1e4f, 3e38f, -3e38f, inf, -inf};
      for (size_t i = 0; i < std::size(specials) && i < n; ++i) x[i] = specials[i];
      const auto st = check_kernel({
          .op = "elementwise_softcap",
          .params = str("dtype=f32 n=", n, " cap=", cap, in_place ? " in place" : " out of place",
                        " (x[0..13] = 0, -0, +-1e-8, +-cap/8, cap/8 -+ 1 ULP, +-1e4, +-3e38, +-inf)"),
          .seed = 900 + n,
          .tol = tol,
          .device =
              [&] {
                Buffer bx = g.upload_f32(x);
                Buffer by = in_place ? Buffer{} : g.zeros(n * 4);
                const Buffer& out = in_place ? bx : by;
                g.run([&](CommandList& cmd) { g.kernels->elementwise_softcap(cmd, bx.range(), out.range(), n, cap); });
                return Values::of(g.download_f32(out, n));
              },
          .reference =
              [&] {
                std::vector<double> ref(n);
                for (uint32_t i = 0; i < n; ++i) ref[i] = double(cap) * std::tanh(double(x[i]) / double(cap));
                return Values::of(ref);
              },
      });
      worst_rel = std::max(worst_rel, st.max_rel);
    }
  }
  MESSAGE("elementwise_softcap: worst relative error over all cases " << worst_rel << " (tolerance " << tol.rel << ")");
  // A zero, negative or non-finite cap is refused (0 means no capping: the caller skips the kernel).
  Buffer small = g.zeros(16);
  CommandList bad(*g.device);
  bad.begin();
  for (const float cap : {0.0f, -30.0f, inf, std::numeric_limits<float>::quiet_NaN()})
    CHECK_THROWS_AS(g.kernels->elementwise_softcap(bad, small.range(), small.range(), 4, cap), Error);
  CHECK_THROWS_AS(g.kernels->elementwise_softcap(bad, small.range(), small.range(), 5, 30.0f), Error);
  bad.end();
}

// Exact, every one of the 65536 bit patterns (NaN payloads kept).
TEST_CASE("kernel elementwise_bf16_to_f32: all bit patterns, exact") {
  auto& g = gpu();
  if (!g.device->caps().storage_16bit) return;   // the unsupported path is tested below
  for (uint32_t n : {1u, 257u, 65536u}) {
    std::vector<uint16_t> in(n);
    for (uint32_t i = 0; i < n; ++i) in[i] = uint16_t(n == 65536 ? i : (i * 40503u + 7u));
    check_kernel({
        .op = "elementwise_bf16_to_f32",
        .params = str("n=", n, n == 65536 ? " inputs: every bf16 pattern" : " inputs: (i * 40503 + 7) & 0xffff"),
        .tol = Tolerance::exact("a bf16 is the top half of an f32: widening is exact, NaN payloads included"),
        .device =
            [&] {
              Buffer bi = g.upload_bytes(in.data(), n * 2), bo = g.zeros(n * 4);
              g.run([&](CommandList& cmd) { g.kernels->elementwise_bf16_to_f32(cmd, bi.range(), bo.range(), n); });
              return Values::bits_of(g.download_f32(bo, n));
            },
        .reference =
            [&] {
              std::vector<float> out(n);
              for (uint32_t i = 0; i < n; ++i) out[i] = bf16_bits_to_f32(in[i]);
              return Values::bits_of(out);
            },
        .where = [&](size_t i) { return str("[", i, "] bf16 0x", std::hex, in[i]); },
    });
  }
}

// Bit-exact vs the harness's RNE conversion on ties, subnormals, overflow,
// inf/NaN and 2^20 random bit patterns.
TEST_CASE("kernel elementwise_f32_to_f16: round to nearest even, bit exact") {
  auto& g = gpu();
  if (!g.device->caps().storage_16bit) return;
  std::vector<float> v;
  auto tie = [](uint32_t f16_bits_below) {   // the f32 exactly halfway above an f16 normal
    return bits_f32(f32_bits(f16_bits_to_f32(uint16_t(f16_bits_below))) + 0x1000u);
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {1.0f, -1.0f}) {
    for (float f : {0.0f, 1.0f, 65504.0f, 65519.0f, 65519.996f, 65520.0f, 65536.0f, 1e10f, inf,
                    std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                    std::numeric_limits<float>::min(),
                    std::ldexp(1.0f, -14), std::ldexp(1.0f, -15), std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                    std::ldexp(1.0f, -26), std::ldexp(3.0f, -25), std::ldexp(5.0f, -25), std::ldexp(1.5f, -25),
                    std::ldexp(1023.5f, -24), std::ldexp(2047.0f, -25), std::ldexp(1.0f, -24) * 0.75f,
                    tie(0x3c00), tie(0x3c01), tie(0x3bff), tie(0x7bff) /* tie above max -> inf */, tie(0x0400),
                    bits_f32(f32_bits(1.0f) + 0x0fffu), bits_f32(f32_bits(1.0f) + 0x1001u), 0.1f, 3.14159265f})
      v.push_back(s * f);
  }
  v.push_back(bits_f32(0x7f800001u));   // signalling NaN
  v.push_back(bits_f32(0xffc12345u));   // negative NaN with payload
  std::mt19937 rng(99);
  for (int i = 0; i < (1 << 20); ++i) {
    uint32_t b = rng();
    switch (i % 4) {
      case 0: break;                                                          // any f32
      case 1: b = (b & 0x80000000u) | ((102u + (b >> 23) % 40u) << 23) | (b & 0x7fffffu); break;   // f16 range
      case 2: {   // exact ties in the f16 subnormal range: f32 exponent E in [103, 112], shift = 126 - E
        const uint32_t E = 103u + (b >> 23) % 10u, shift = 126u - E;   // 14..23
        b = (b & 0x80000000u) | (E << 23) | (((b & 0x7fffffu) >> shift) << shift) | (1u << (shift - 1u));
        break;
      }
      case 3: b = (b & 0xffffe000u) | ((b >> 13) & 1u ? 0x1000u : 0x0fffu); break;   // ties and near-ties
    }
    v.push_back(bits_f32(b));
  }
  const uint32_t n = uint32_t(v.size());
  check_kernel({
      .op = "elementwise_f32_to_f16",
      .params = str("n=", n, " inputs: ", n - (1 << 20), " edge values (ties, subnormals, overflow, inf, NaN), then ",
                    1 << 20, " patterns from mt19937"),
      .seed = 99,
      .tol = Tolerance::exact("round to nearest even is one answer per input"),
      .device =
          [&] {
            Buffer bi = g.upload_f32(v), bo = g.zeros(n * 2);
            g.run([&](CommandList& cmd) { g.kernels->elementwise_f32_to_f16(cmd, bi.range(), bo.range(), n); });
            return Values::bits_of(g.download_u16(bo, n));
          },
      .reference =
          [&] {
            std::vector<uint16_t> out(n);
            for (uint32_t i = 0; i < n; ++i) out[i] = f32_to_f16_bits(v[i]);
            return Values::bits_of(out);
          },
      .where = [&](size_t i) { return str("[", i, "] f32 0x", std::hex, f32_bits(v[i])); },
  });
}

// A device without 16-bit storage (a host that did not enable it) refuses the
// 16-bit paths with Error(unsupported); the f32 paths still run.
TEST_CASE("kernels: 16-bit paths need storageBuffer16BitAccess") {
  HostVulkan host;
  AdoptedDevice h;
  h.instance = host.instance;
  h.physical_device = host.phys;
  h.device = host.device;
  h.queue_family = host.family;
  h.queue = host.queue;
  h.on_validation = on_validation_message;
  auto dev = Device::adopt(h);
  REQUIRE(!dev->caps().storage_16bit);
  Allocator alloc(*dev);
  Transfer tr(alloc);
  Kernels k(*dev);
  Buffer a = alloc.allocate(Arena::scratch, 64, "a"), ids = alloc.allocate(Arena::scratch, 4, "ids"),
         y = alloc.allocate(Arena::scratch, 16, "y");
  const int32_t id = 1;
  tr.upload(ids, 0, &id, 4);
  const float tab[4] = {1, 2, 3, 4};
  tr.upload(a, 0, tab, 16);
  CommandList cmd(*dev);
  cmd.begin();
  for (auto [fn, name] : {std::pair<int, const char*>{0, "elementwise_f32_to_f16"}, {1, "elementwise_bf16_to_f32"}, {2, "embed f16"},
                          {3, "embed bf16"}}) {
    CAPTURE(name);
    const std::string msg = error_of(
        [&] {
          if (fn == 0) k.elementwise_f32_to_f16(cmd, a.range(), y.range(), 4);
          if (fn == 1) k.elementwise_bf16_to_f32(cmd, a.range(), y.range(), 4);
          if (fn >= 2) k.embed(cmd, {&a, 0, fn == 2 ? WType::f16 : WType::bf16, 2, 2}, ids.range(), 1, {&y, 0, 1, 2});
        },
        ErrorCode::unsupported);
    CHECK_HAS(msg, "16-bit");
  }
  k.embed(cmd, {&a, 0, WType::f32, 2, 2}, ids.range(), 1, {&y, 0, 1, 2});   // f32 works
  cmd.end();
  cmd.run();
  float out[2];
  tr.download(y, 0, out, 8);
  CHECK(out[0] == 3.0f);
  CHECK(out[1] == 4.0f);
}
