// rmsnorm, softmax, silu_mul, embed, bf16_to_f32 and f32_to_f16 on the Vulkan
// device vs plain C++ double references: random inputs, edge sizes (1, wg-1,
// wg, wg+1, non-multiples of the subgroup), every reduction workgroup size the
// kernels may be given (8, 32, 64, 256 and the device's default), and an
// embedding table larger than maxStorageBufferRange.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "engine/error.hpp"
#include "tests/test_device.hpp"

using namespace reach;
using reach::test::gpu;

namespace {

// Kernels forced to a reduction workgroup size (0 = the device's default config).
Kernels kernels_with(uint32_t reduce_wg, uint64_t max_binding = 0) {
  auto& g = gpu();
  KernelConfig cfg = KernelConfig::from(g.device->caps());
  if (reduce_wg) cfg.reduce_wg = reduce_wg;
  if (max_binding) cfg.max_binding = max_binding;
  return Kernels(*g.device, cfg);
}

// 8/32/64/256 as a GPU may use; 1 and 12 give a partial subgroup (12 = one
// full and one partial subgroup of 8 on lavapipe).
std::vector<uint32_t> workgroup_sizes() {
  std::vector<uint32_t> v{1, 8, 12, 32, 64, 256};
  const uint32_t d = KernelConfig::from(gpu().device->caps()).reduce_wg;
  if (std::find(v.begin(), v.end(), d) == v.end()) v.push_back(d);
  return v;
}

// |got - ref| <= rel * |ref| + abs for every element; reports the worst one.
struct Compare {
  double max_err = 0, max_rel = 0;
  size_t bad = 0, worst = 0;
  double worst_got = 0, worst_ref = 0;
};
double g_worst_rel = 0;   // worst max_rel seen in the current test case, reported by MESSAGE
Compare compare(const std::vector<float>& got, const std::vector<double>& ref, double rel, double abs) {
  Compare c;
  double worst_excess = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(double(got[i]) - ref[i]);
    const double tol = rel * std::fabs(ref[i]) + abs;
    const bool ok = e <= tol;   // NaN fails
    c.max_err = std::max(c.max_err, e);
    if (std::fabs(ref[i]) >= std::numeric_limits<float>::min())   // f32 denormals may be flushed to 0
      c.max_rel = std::max(c.max_rel, e / std::fabs(ref[i]));
    if (!ok) ++c.bad;
    const double excess = ok ? e / tol - 1 : 1e300;
    if (excess > worst_excess && (!ok || !c.bad)) {
      worst_excess = excess;
      c.worst = i;
      c.worst_got = got[i];
      c.worst_ref = ref[i];
    }
  }
  g_worst_rel = std::max(g_worst_rel, c.max_rel);
  return c;
}

#define CHECK_CLOSE(cmp)                                                                                \
  do {                                                                                                  \
    const Compare& c_ = (cmp);                                                                          \
    INFO("max_err=" << c_.max_err << " max_rel=" << c_.max_rel << " bad=" << c_.bad << " worst index " \
                    << c_.worst << ": got " << c_.worst_got << " want " << c_.worst_ref);               \
    CHECK(c_.bad == 0);                                                                                 \
  } while (0)

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<uint16_t> download_u16(const Buffer& b, size_t n) {
  std::vector<uint16_t> out(n);
  gpu().transfer->download(b, 0, out.data(), n * 2);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// rmsnorm.  Tolerance 2e-5 relative (+1e-7 absolute for y near 0): each lane
// sums cols/wg squares in f32 (<= 512 terms here; positive terms, relative
// error ~sqrt(n)·2^-24 typical, n·2^-24 = 3e-5 only in the adversarial worst
// case), inversesqrt is <= 2 ULP and the two products 1 ULP each.
TEST_CASE("kernel rmsnorm: edge sizes, workgroup sizes, in place") {
  auto& g = gpu();
  g_worst_rel = 0;
  const double rel = 2e-5, abs = 1e-7;
  for (uint32_t wg : workgroup_sizes()) {
    Kernels k = kernels_with(wg);
    for (uint32_t cols : {1u, wg - 1, wg, wg + 1, 13u, 1000u, 4096u}) {
      if (cols == 0) continue;
      for (bool in_place : {false, true}) {
        const uint32_t rows = 3;
        const float eps = 1e-5f;
        auto x = reach::test::random_floats(size_t(rows) * cols, 100 + cols, -2.0f, 2.0f);
        auto w = reach::test::random_floats(cols, 200 + cols, -1.5f, 1.5f);
        x[0] = 0.0f;   // a zero element; (cols==1: an all-zero row -> 0 * rsqrt(eps))
        std::vector<double> ref(x.size());
        for (uint32_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (uint32_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
          const double inv = 1.0 / std::sqrt(ss / cols + double(eps));
          for (uint32_t c = 0; c < cols; ++c) ref[r * cols + c] = double(x[r * cols + c]) * inv * w[c];
        }
        Buffer bx = g.upload_f32(x), bw = g.upload_f32(w), by = g.zeros(x.size() * 4);
        Act ax{&bx, 0, rows, cols}, ay = in_place ? ax : Act{&by, 0, rows, cols};
        CommandList cmd(*g.device);
        cmd.begin();
        k.rmsnorm(cmd, ax, bw.range(), ay, eps);
        cmd.end();
        cmd.run();
        auto y = g.download_f32(in_place ? bx : by, x.size());
        INFO("op=rmsnorm dtype=f32 shape=[" << rows << "," << cols << "] reduce_wg=" << wg << " in_place=" << in_place
                                            << " tol=" << rel << "*|ref|+" << abs);
        CHECK_CLOSE(compare(y, ref, rel, abs));
      }
    }
  }
  MESSAGE("rmsnorm: worst relative error over all cases " << g_worst_rel << " (tolerance " << rel << ")");
}

TEST_CASE("kernel rmsnorm: many rows (grid-stride over rows) and misuse") {
  auto& g = gpu();
  const uint32_t rows = 70000, cols = 3;   // more rows than the 65535 workgroups dispatched
  auto x = reach::test::random_floats(size_t(rows) * cols, 7);
  std::vector<float> w{0.5f, -1.0f, 2.0f};
  std::vector<double> ref(x.size());
  for (uint32_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (uint32_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
    const double inv = 1.0 / std::sqrt(ss / cols + 1e-6);
    for (uint32_t c = 0; c < cols; ++c) ref[r * cols + c] = x[r * cols + c] * inv * w[c];
  }
  Buffer bx = g.upload_f32(x), bw = g.upload_f32(w), by = g.zeros(x.size() * 4);
  CommandList cmd(*g.device);
  cmd.begin();
  g.kernels->rmsnorm(cmd, {&bx, 0, rows, cols}, bw.range(), {&by, 0, rows, cols}, 1e-6f);
  cmd.end();
  cmd.run();
  INFO("op=rmsnorm dtype=f32 shape=[" << rows << "," << cols << "] default config, tol=2e-5*|ref|+1e-7");
  CHECK_CLOSE(compare(g.download_f32(by, x.size()), ref, 2e-5, 1e-7));

  // Shape errors are thrown at record time.
  CommandList bad(*g.device);
  bad.begin();
  CHECK_THROWS_AS(g.kernels->rmsnorm(bad, {&bx, 0, rows, cols}, bw.range(), {&by, 0, rows, cols + 1}, 1e-6f), Error);
  CHECK_THROWS_AS(g.kernels->rmsnorm(bad, {&bx, 0, 1, 4}, bw.range(), {&by, 0, 1, 4}, 1e-6f), Error);   // w too short
  CHECK_THROWS_AS(g.kernels->rmsnorm(bad, {&bx, 0, rows + 1, cols}, bw.range(), {&by, 0, rows, cols}, 1e-6f), Error);
  bad.end();
}

// ---------------------------------------------------------------------------
// softmax.  Inputs in [-8, 8], scale 1 or 0.125 (exact products).  Tolerance
// 5e-5 relative (+1e-12 absolute): exp is <= 3+2|x| ULP in Vulkan (|x| <= 16:
// <= 35 ULP = 2.1e-6), v - max rounds to <= 2^-20 absolute (1e-6 relative after
// exp), and the f32 sum runs over up to 49152/8 = 6144 positive terms per lane
// (typical relative error ~sqrt(n)·2^-24 = 5e-6; measured errors are ~1e-6).
TEST_CASE("kernel softmax: edge sizes, workgroup sizes, masked entries, vocab-size rows") {
  auto& g = gpu();
  g_worst_rel = 0;
  const double rel = 5e-5, abs = 1e-12;
  const float ninf = -std::numeric_limits<float>::infinity();
  for (uint32_t wg : workgroup_sizes()) {
    Kernels k = kernels_with(wg);
    for (uint32_t cols : {1u, wg - 1, wg, wg + 1, 13u, 1000u, 49152u}) {
      if (cols == 0) continue;
      const uint32_t rows = cols > 10000 ? 2 : 4;
      const float scale = (cols % 2) ? 1.0f : 0.125f;
      auto x = reach::test::random_floats(size_t(rows) * cols, 300 + cols + wg, -8.0f, 8.0f);
      // Row 1: some masked (-inf) entries; row 2 (when present): fully masked -> all zeros.
      for (uint32_t c = 0; c < cols; c += 3) x[cols + c] = ninf;
      if (cols > 1) x[cols + 1] = 0.5f;   // keep row 1 not fully masked
      if (rows == 4)
        for (uint32_t c = 0; c < cols; ++c) x[2 * cols + c] = ninf;
      std::vector<double> ref(x.size());
      for (uint32_t r = 0; r < rows; ++r) {
        double m = -INFINITY, s = 0;
        for (uint32_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]) * scale);
        for (uint32_t c = 0; c < cols; ++c) s += std::exp(double(x[r * cols + c]) * scale - m);
        for (uint32_t c = 0; c < cols; ++c)
          ref[r * cols + c] = m == -INFINITY ? 0.0 : std::exp(double(x[r * cols + c]) * scale - m) / s;
      }
      Buffer bx = g.upload_f32(x);
      CommandList cmd(*g.device);
      cmd.begin();
      k.softmax(cmd, {&bx, 0, rows, cols}, scale);
      cmd.end();
      cmd.run();
      auto y = g.download_f32(bx, x.size());
      INFO("op=softmax dtype=f32 shape=[" << rows << "," << cols << "] scale=" << scale << " reduce_wg=" << wg
                                          << " tol=" << rel << "*|ref|+" << abs);
      CHECK_CLOSE(compare(y, ref, rel, abs));
    }
  }
  MESSAGE("softmax: worst relative error over all cases " << g_worst_rel << " (tolerance " << rel << ")");
}

// llvmpipe silently stops a loop after 65535 trips per invocation (all loops
// together); the host widens the workgroup for rows that would exceed that.
// These rows are past the budget at the given workgroup (e.g. softmax at wg=1:
// 3 passes x 100000/4 trips) and went wrong before the guard existed.
TEST_CASE("kernel rmsnorm/softmax: rows past llvmpipe's loop-trip budget") {
  auto& g = gpu();
  for (auto [wg, cols] : {std::pair<uint32_t, uint32_t>{1, 100000}, {1, 300000}, {8, 1000000}, {0, 1000000}}) {
    Kernels k = kernels_with(wg);
    auto x = reach::test::random_floats(cols, cols + wg, -8.0f, 8.0f);
    std::vector<float> w(cols, 1.25f);
    std::vector<double> sm(cols), rn(cols);
    double m = -INFINITY, s = 0, ss = 0;
    for (float v : x) m = std::max(m, double(v)), ss += double(v) * v;
    for (float v : x) s += std::exp(v - m);
    for (uint32_t i = 0; i < cols; ++i) {
      sm[i] = std::exp(x[i] - m) / s;
      rn[i] = x[i] / std::sqrt(ss / cols + 1e-5) * 1.25;
    }
    Buffer bx = g.upload_f32(x), bw = g.upload_f32(w), by = g.zeros(size_t(cols) * 4);
    // Submitted one after the other: rmsnorm reads x, which softmax then rewrites in place.
    CommandList c1(*g.device), c2(*g.device);
    c1.begin();
    k.rmsnorm(c1, {&bx, 0, 1, cols}, bw.range(), {&by, 0, 1, cols}, 1e-5f);
    c1.end();
    c1.run();
    c2.begin();
    k.softmax(c2, {&bx, 0, 1, cols}, 1.0f);
    c2.end();
    c2.run();
    // Rows this long: the f32 sums run over up to cols/wg terms per lane (4 accumulators);
    // 1e-4 relative still separates a correct row from a truncated one (errors of 1e3 and more).
    INFO("op=rmsnorm dtype=f32 shape=[1," << cols << "] reduce_wg=" << wg << " (widened by the host) tol=1e-4*|ref|+1e-7");
    CHECK_CLOSE(compare(g.download_f32(by, cols), rn, 1e-4, 1e-7));
    INFO("op=softmax dtype=f32 shape=[1," << cols << "] reduce_wg=" << wg << " (widened by the host) tol=1e-4*|ref|+1e-12");
    CHECK_CLOSE(compare(g.download_f32(bx, cols), sm, 1e-4, 1e-12));
  }
}

// ---------------------------------------------------------------------------
// silu_mul.  Tolerance 1e-5 relative + 1e-30 absolute: exp is <= 3+2|x| ULP
// (|g| <= 10: <= 23 ULP = 1.4e-6), the division <= 2.5 ULP and the product
// 0.5 ULP; the absolute term covers results in the f32 denormal range, which
// a device may flush to zero (g = -100 gives ~ -4e-42).
TEST_CASE("kernel silu_mul: sizes and extreme inputs") {
  auto& g = gpu();
  g_worst_rel = 0;
  const double rel = 1e-5, abs = 1e-30;
  for (uint32_t n : {1u, 7u, 255u, 256u, 257u, 1000u, 100003u}) {
    auto gv = reach::test::random_floats(n, 400 + n, -10.0f, 10.0f), u = reach::test::random_floats(n, 500 + n, -2.0f, 2.0f);
    const float specials[] = {0.0f, -0.0f, 100.0f, -100.0f, 88.0f, -88.0f, 1e-8f, -1e-8f, 20.0f, -20.0f};
    for (size_t i = 0; i < std::size(specials) && i < n; ++i) gv[i] = specials[i];
    std::vector<double> ref(n);
    for (uint32_t i = 0; i < n; ++i) ref[i] = double(gv[i]) / (1.0 + std::exp(-double(gv[i]))) * u[i];
    Buffer bg = g.upload_f32(gv), bu = g.upload_f32(u), by = g.zeros(n * 4);
    CommandList cmd(*g.device);
    cmd.begin();
    g.kernels->silu_mul(cmd, bg.range(), bu.range(), by.range(), n);
    cmd.end();
    cmd.run();
    INFO("op=silu_mul dtype=f32 n=" << n << " tol=" << rel << "*|ref|+" << abs);
    CHECK_CLOSE(compare(g.download_f32(by, n), ref, rel, abs));
  }
  MESSAGE("silu_mul: worst relative error over all cases " << g_worst_rel << " (tolerance " << rel << ")");
  Buffer small = g.zeros(16);
  CommandList bad(*g.device);
  bad.begin();
  CHECK_THROWS_AS(g.kernels->silu_mul(bad, small.range(), small.range(), small.range(), 5), Error);
  bad.end();
}

// ---------------------------------------------------------------------------
// bf16 -> f32: exact, every one of the 65536 bit patterns (NaN payloads kept).
TEST_CASE("kernel bf16_to_f32: all bit patterns, exact") {
  auto& g = gpu();
  if (!g.device->caps().storage_16bit) return;   // the unsupported path is tested below
  for (uint32_t n : {1u, 257u, 65536u}) {
    std::vector<uint16_t> in(n);
    for (uint32_t i = 0; i < n; ++i) in[i] = uint16_t(n == 65536 ? i : (i * 40503u + 7u));
    Buffer bi = g.upload_bytes(in.data(), n * 2), bo = g.zeros(n * 4);
    CommandList cmd(*g.device);
    cmd.begin();
    g.kernels->bf16_to_f32(cmd, bi.range(), bo.range(), n);
    cmd.end();
    cmd.run();
    auto out = g.download_f32(bo, n);
    size_t bad = 0, first = 0;
    for (uint32_t i = 0; i < n; ++i)
      if (f32_bits(out[i]) != f32_bits(reach::test::bf16_bits_to_f32(in[i])) && !bad++) first = i;
    INFO("op=bf16_to_f32 n=" << n << " tol=exact bits; first mismatch at " << first << " bf16=0x" << std::hex
                             << in[first] << " got=0x" << f32_bits(out[first]));
    CHECK(bad == 0);
  }
}

// ---------------------------------------------------------------------------
// f32 -> f16: bit-exact vs the harness's RNE conversion on ties, subnormals,
// overflow, inf/NaN and 2^20 random bit patterns.
TEST_CASE("kernel f32_to_f16: round to nearest even, bit exact") {
  auto& g = gpu();
  if (!g.device->caps().storage_16bit) return;
  std::vector<float> v;
  auto tie = [](uint32_t f16_bits_below) {   // the f32 exactly halfway above an f16 normal
    return bits_f32(f32_bits(reach::test::f16_bits_to_f32(uint16_t(f16_bits_below))) + 0x1000u);
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
  Buffer bi = g.upload_f32(v), bo = g.zeros(n * 2);
  CommandList cmd(*g.device);
  cmd.begin();
  g.kernels->f32_to_f16(cmd, bi.range(), bo.range(), n);
  cmd.end();
  cmd.run();
  auto out = download_u16(bo, n);
  size_t bad = 0, first = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (out[i] != reach::test::f32_to_f16_bits(v[i]) && !bad++) first = i;
  INFO("op=f32_to_f16 n=" << n << " tol=exact bits (RNE); first mismatch at " << first << " f32=0x" << std::hex
                          << f32_bits(v[first]) << " got=0x" << out[first] << " want=0x"
                          << reach::test::f32_to_f16_bits(v[first]));
  CHECK(bad == 0);
}

// ---------------------------------------------------------------------------
// embed: exact (a copy, and f16/bf16 -> f32 is exact).  Out-of-range ids give
// a row of zeros.
namespace {

std::vector<uint16_t> encode(const std::vector<float>& v, WType t) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = t == WType::f16 ? reach::test::f32_to_f16_bits(v[i]) : reach::test::f32_to_bf16_bits(v[i]);
  return out;
}
float decode(uint16_t b, WType t) {
  return t == WType::f16 ? reach::test::f16_bits_to_f32(b) : reach::test::bf16_bits_to_f32(b);
}

void check_embed(Kernels& k, WType type, uint32_t rows, uint32_t cols, const std::vector<int32_t>& ids,
                 const std::string& variant) {
  auto& g = gpu();
  auto vals = reach::test::random_floats(size_t(rows) * cols, rows * 31 + cols, -3.0f, 3.0f);
  Buffer bt;
  std::vector<float> table(vals.size());
  if (type == WType::f32) {
    table = vals;
    bt = g.upload_f32(vals, Arena::weights, "table");
  } else {
    auto bits = encode(vals, type);
    for (size_t i = 0; i < bits.size(); ++i) table[i] = decode(bits[i], type);
    bt = g.upload_bytes(bits.data(), bits.size() * 2, Arena::weights, "table");
  }
  const uint32_t n = uint32_t(ids.size());
  Buffer bi = g.upload_bytes(ids.data(), n * 4), by = g.upload_f32(std::vector<float>(size_t(n) * cols, 7.0f));
  CommandList cmd(*g.device);
  cmd.begin();
  k.embed(cmd, {&bt, 0, type, rows, cols}, bi.range(), n, {&by, 0, n, cols});
  cmd.end();
  cmd.run();
  auto y = g.download_f32(by, size_t(n) * cols);
  size_t bad = 0, first = 0;
  for (uint32_t t = 0; t < n; ++t) {
    const bool valid = ids[t] >= 0 && uint32_t(ids[t]) < rows;
    for (uint32_t c = 0; c < cols; ++c) {
      const float want = valid ? table[size_t(ids[t]) * cols + c] : 0.0f;
      if (f32_bits(y[size_t(t) * cols + c]) != f32_bits(want) && !bad++) first = size_t(t) * cols + c;
    }
  }
  INFO("op=embed dtype=" << wtype_name(type) << " table=[" << rows << "," << cols << "] tokens=" << n << " variant="
                         << variant << " tol=exact; first mismatch at token " << (first / cols) << " (id "
                         << ids[first / cols] << ") col " << (first % cols));
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("kernel embed: f32/f16/bf16 tables, out-of-range ids, forced row chunks") {
  auto& g = gpu();
  const bool s16 = g.device->caps().storage_16bit;
  const std::vector<int32_t> ids{0, 36, 5, -1, 37, INT_MIN, INT_MAX, 5, 17, 1};
  for (WType type : {WType::f32, WType::f16, WType::bf16}) {
    if (type != WType::f32 && !s16) continue;
    for (uint32_t wg : workgroup_sizes()) {
      Kernels k = kernels_with(wg);
      for (uint32_t cols : {1u, 13u, wg + 1, 300u}) check_embed(k, type, 37, cols, ids, "wg=" + std::to_string(wg));
    }
    // A tiny max_binding forces many row chunks (one dispatch each).
    for (uint64_t max_binding : {256ull, 1000ull, 4096ull}) {
      Kernels k = kernels_with(0, max_binding);
      check_embed(k, type, 37, 13, ids, "max_binding=" + std::to_string(max_binding));
      check_embed(k, type, 37, 1, ids, "max_binding=" + std::to_string(max_binding));
    }
  }
  // Misuse.
  Buffer bt = g.zeros(37 * 13 * 4), bi = g.zeros(40), by = g.zeros(10 * 13 * 4);
  CommandList bad(*g.device);
  bad.begin();
  CHECK_THROWS_AS(g.kernels->embed(bad, {&bt, 0, WType::f32, 37, 13}, bi.range(), 10, {&by, 0, 10, 12}), Error);
  CHECK_THROWS_AS(g.kernels->embed(bad, {&bt, 0, WType::f32, 37, 13}, bi.range(), 11, {&by, 0, 10, 13}), Error);
  CHECK_THROWS_AS(g.kernels->embed(bad, {&bt, 0, WType::f32, 38, 13}, bi.range(), 10, {&by, 0, 10, 13}), Error);
  bad.end();
}

TEST_CASE("kernel embed: an f16 table larger than maxStorageBufferRange") {
  auto& g = gpu();
  if (!g.device->caps().storage_16bit) return;
  const uint32_t rows = 70000, cols = 1024;   // 143 MB > 128 MiB (lavapipe's maxStorageBufferRange)
  const Mat probe{nullptr, 0, WType::f16, rows, cols};
  const uint64_t limit = g.kernels->config().max_binding;
  auto chunks = split_rows(probe, limit, g.device->caps().min_storage_buffer_offset_alignment);
  CAPTURE(limit);
  CAPTURE(chunks.size());
  if (probe.bytes() <= limit) MESSAGE("max_binding " << limit << " holds the whole table: only one chunk exercised");
  // A cheap exact pattern: value(r, c) = ((r * 7 + c * 3) % 2001 - 1000) / 8, exact in f16.
  auto value = [](uint32_t r, uint32_t c) { return float(int((r * 7u + c * 3u) % 2001u) - 1000) / 8.0f; };
  std::vector<uint16_t> lut(2001);
  for (uint32_t i = 0; i < 2001; ++i) lut[i] = reach::test::f32_to_f16_bits(float(int(i) - 1000) / 8.0f);
  Buffer bt = g.allocator->allocate(Arena::weights, probe.bytes(), "big table");
  {
    std::vector<uint16_t> row(size_t(cols) * 4096);
    for (uint32_t r0 = 0; r0 < rows; r0 += 4096) {
      const uint32_t nr = std::min(4096u, rows - r0);
      for (uint32_t r = 0; r < nr; ++r)
        for (uint32_t c = 0; c < cols; ++c) row[size_t(r) * cols + c] = lut[((r0 + r) * 7u + c * 3u) % 2001u];
      g.transfer->upload(bt, uint64_t(r0) * cols * 2, row.data(), uint64_t(nr) * cols * 2);
    }
  }
  std::vector<int32_t> ids{0, 1, int32_t(rows - 1), -3, int32_t(rows), 12345};
  for (const auto& ch : chunks) {   // the first and last row of every chunk
    ids.push_back(int32_t(ch.first_row));
    ids.push_back(int32_t(ch.first_row + ch.rows - 1));
  }
  const uint32_t n = uint32_t(ids.size());
  Buffer bi = g.upload_bytes(ids.data(), n * 4), by = g.upload_f32(std::vector<float>(size_t(n) * cols, 7.0f));
  CommandList cmd(*g.device);
  cmd.begin();
  g.kernels->embed(cmd, {&bt, 0, WType::f16, rows, cols}, bi.range(), n, {&by, 0, n, cols});
  cmd.end();
  cmd.run();
  CHECK(cmd.dispatch_count() == chunks.size());
  MESSAGE("embed: f16 table of " << probe.bytes() << " bytes in " << chunks.size() << " row chunks (binding limit "
                                 << limit << ")");
  auto y = g.download_f32(by, size_t(n) * cols);
  size_t bad = 0, first = 0;
  for (uint32_t t = 0; t < n; ++t) {
    const bool valid = ids[t] >= 0 && uint32_t(ids[t]) < rows;
    for (uint32_t c = 0; c < cols; ++c)
      if (y[size_t(t) * cols + c] != (valid ? value(uint32_t(ids[t]), c) : 0.0f) && !bad++) first = size_t(t) * cols + c;
  }
  INFO("op=embed dtype=f16 table=[" << rows << "," << cols << "] tokens=" << n << " chunks=" << chunks.size()
                                    << " tol=exact; first mismatch at token " << first / cols << " (id "
                                    << ids[first / cols] << ")");
  CHECK(bad == 0);
}

// ---------------------------------------------------------------------------
// A device without 16-bit storage (a host that did not enable it) refuses the
// 16-bit paths with Error(unsupported); the f32 paths still run.
TEST_CASE("kernels: 16-bit paths need storageBuffer16BitAccess") {
  reach::test::HostVulkan host;
  {
    AdoptedDevice h;
    h.instance = host.instance;
    h.physical_device = host.phys;
    h.device = host.device;
    h.queue_family = host.family;
    h.queue = host.queue;
    h.on_validation = reach::test::on_validation_message;
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
    for (auto [fn, name] : {std::pair<int, const char*>{0, "f32_to_f16"}, {1, "bf16_to_f32"}, {2, "embed f16"},
                            {3, "embed bf16"}}) {
      CAPTURE(name);
      try {
        if (fn == 0) k.f32_to_f16(cmd, a.range(), y.range(), 4);
        if (fn == 1) k.bf16_to_f32(cmd, a.range(), y.range(), 4);
        if (fn >= 2) k.embed(cmd, {&a, 0, fn == 2 ? WType::f16 : WType::bf16, 2, 2}, ids.range(), 1, {&y, 0, 1, 2});
        FAIL("expected Error(unsupported)");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::unsupported);
        CHECK(std::string(e.what()).find("16-bit") != std::string::npos);
      }
    }
    k.embed(cmd, {&a, 0, WType::f32, 2, 2}, ids.range(), 1, {&y, 0, 1, 2});   // f32 works
    cmd.end();
    cmd.run();
    float out[2];
    tr.download(y, 0, out, 8);
    CHECK(out[0] == 3.0f);
    CHECK(out[1] == 4.0f);
  }

}
