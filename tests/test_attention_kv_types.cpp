// The KV cache's storage types (LayerCache::k_type / v_type: f16, q8_0, q4_0)
// through kv_store, prefill, both decode kernels and the fused decode step,
// against the float64 reference of tests/support/attention_reference.cpp fed
// with what the cache reads back (tests/support/kv_quant_reference: the types'
// rule applied on the CPU).  Tolerance kTol (1e-4), as for the f32 cache: the
// rounding the types add is in the reference's inputs, so what is left is the
// kernels' f32 arithmetic.  A second check bounds how far each type moves the
// outputs from the unrounded reference (the cost of the type, not a defect).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.hpp"
#include "base/kv_type.hpp"
#include "kernels/attention.hpp"
#include "tests/support/attention_harness.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kv_quant_reference.hpp"

using namespace reach;
using namespace reach::test;

namespace {

constexpr KvType kRounded[] = {KvType::f16, KvType::q8_0, KvType::q4_0};

}  // namespace

TEST_CASE("kv types: the CPU rule against hand-worked blocks") {
  // q8_0: d = 1.27 / 127 = 0.01 (f16 0.0099945...), q = round(x / d).
  std::vector<float> x(32, 0.0f);
  x[0] = 1.27f, x[1] = -0.635f, x[2] = 0.004f, x[3] = 0.006f;
  std::vector<float> y = x;
  kv_round_trip(KvType::q8_0, y.data(), y.size());
  const float dh = 0.01000213623046875f;   // f16 nearest to 0.01
  CHECK(y[0] == doctest::Approx(127 * dh).epsilon(1e-7));
  CHECK(y[1] == doctest::Approx(-64 * dh).epsilon(1e-7));   // -63.5 rounds away from zero
  CHECK(y[2] == 0.0f);
  CHECK(y[3] == doctest::Approx(1 * dh).epsilon(1e-7));
  // q4_0: the value of largest magnitude m = -0.8 gives d = 0.1 and q = 0 (-8·d); 0.7 -> q = 15 (7·d).
  std::vector<float> z(32, 0.0f);
  z[0] = -0.8f, z[1] = 0.7f, z[2] = 0.25f, z[3] = -0.04f;
  kv_round_trip(KvType::q4_0, z.data(), z.size());
  const float d4 = 0.0999755859375f;   // f16 nearest to 0.1
  CHECK(z[0] == doctest::Approx(-8 * d4).epsilon(1e-7));
  CHECK(z[1] == doctest::Approx(7 * d4).epsilon(1e-7));
  CHECK(z[2] == doctest::Approx(3 * d4).epsilon(1e-7));   // floor(0.25 / 0.1 + 8.5) = 11: q - 8 = 3
  CHECK(z[3] == doctest::Approx(0 * d4).epsilon(1e-7));
  CHECK(kv_row_bytes(KvType::q8_0, 64) == 68);
  CHECK(kv_row_bytes(KvType::q4_0, 128) == 72);
  CHECK(kv_row_bytes(KvType::f16, 64) == 128);
}

TEST_CASE("kv types: q4_0's Walsh-Hadamard rotation, by hand and against an outlier") {
  // Column k of H is (-1)^popcount(i & k) / sqrt(32): e_0 turns into all +s, e_1 into +s, -s, +s, ...,
  // e_3 into +s, -s, -s, +s, ... (signs of i = 0, 1, 2, 3).
  const float s = 1.0f / std::sqrt(32.0f);
  for (uint32_t k : {0u, 1u, 3u, 21u}) {
    std::vector<float> e(32, 0.0f);
    e[k] = 1.0f;
    hadamard32_f32(e.data(), e.size());
    for (uint32_t i = 0; i < 32; ++i) {
      uint32_t bits = i & k, odd = 0;
      for (; bits; bits &= bits - 1) odd ^= 1;
      CHECK(e[i] == doctest::Approx(odd ? -s : s).epsilon(1e-6));
    }
  }
  // Its own inverse: twice gives x back (two rows of blocks).
  std::vector<float> x(64), y;
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.7 * double(i)) * (1 + i % 5));
  y = x;
  hadamard32_f32(y.data(), y.size());
  hadamard32_f32(y.data(), y.size());
  for (size_t i = 0; i < x.size(); ++i) CHECK(y[i] == doctest::Approx(x[i]).epsilon(1e-5));
  // What it is for: one channel 30x the others.  Unrotated, the scale 4/8 rounds every other value
  // to 0 or ±0.5; rotated, the outlier spreads over the block and the error falls several-fold.
  std::vector<float> b(32);
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(0.13 * std::cos(1.3 * double(i)));
  b[5] = -4.0f;
  std::vector<float> plain = b, turned = b;
  kv_round_trip(KvType::q4_0, plain.data(), plain.size());
  kv_round_trip_hadamard(KvType::q4_0, turned.data(), turned.size());
  double e_plain = 0, e_turned = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    e_plain += (plain[i] - b[i]) * (plain[i] - b[i]);
    e_turned += (turned[i] - b[i]) * (turned[i] - b[i]);
  }
  INFO("squared error: plain " << e_plain << ", rotated " << e_turned);
  CHECK(e_turned * 4 < e_plain);
}

// Cold pipelines dominate this suite's time on a CPU device (each type, scheme and kernel is its own
// pipeline), so the cases share shapes and walk the kernels once each: both decode kernels unfused,
// the fused step with the device's decode kernel, and both reads of every type: texel views (the
// default on a CPU device) and storage buffers (GPUs; the f16 case, and the mixed q8_0 / q4_0 one).
TEST_CASE("kv types: every kernel reads back what the cache stores") {
  for (KvType t : kRounded) {
    const std::string name = kv_type_name(t);
    CAPTURE(name);
    Harness h{make_scheme(Kind::rope_rotated, 4, 2, 64), 45, {17, 28}, 3};
    h.k_type = h.v_type = t;
    // kv_store, prefill and the lanes decode (the device's); the workgroup decode (GPUs') for the block
    // types, and its fused step for q4_0 (its queries rotated in shared memory, its merge by blocks).
    const bool block = kv_quantized(t);
    h.decode_variants = block ? std::vector<uint32_t>{1, 2} : std::vector<uint32_t>{2};
    check_within_tolerance(h);
    h.fused = true;
    h.decode_variants = t == KvType::q4_0 ? std::vector<uint32_t>{1, 2} : std::vector<uint32_t>{2};
    check_within_tolerance(h);                   // the fused step (kv_round of the new key and value)
    if (t == KvType::f16) {         // storage buffers (texel views above, on a CPU device)
      h.tuning = small_tiles();
      check_within_tolerance(h);
    }
  }
  // A raw cache (ReRoPE rotates the stored raw key for the window) and a sliding-window ring.
  Harness rr{make_scheme(Kind::rerope, 4, 2, 64, 12), 40, {40}, 3};
  rr.rotated_keys = false;
  rr.k_type = rr.v_type = KvType::q8_0;
  rr.fused = true;
  rr.decode_variants = {2};
  check_within_tolerance(rr);
  Harness ring{make_scheme(Kind::window_sinks, 4, 2, 64, 0, 10, 2), 40, {8, 8, 8, 8, 8}, 3};
  ring.ring = 10 + 8 - 1;
  ring.k_type = ring.v_type = KvType::q4_0;
  ring.fused = true;
  ring.decode_variants = {2};
  check_within_tolerance(ring);
  // Keys and values of different types (their slabs differ in size), and no rotation at all.
  Harness mixed{make_scheme(Kind::rope_rotated, 4, 2, 64), 33, {33}, 2};
  mixed.k_type = KvType::q8_0;
  mixed.v_type = KvType::q4_0;
  mixed.decode_variants = {2};
  check_within_tolerance(mixed);
  mixed.tuning = small_tiles();   // the storage-buffer loaders of both quantized types
  check_within_tolerance(mixed);
  Harness nope{make_scheme(Kind::nope, 4, 1, 32), 30, {30}, 2};
  nope.k_type = KvType::q4_0;
  nope.v_type = KvType::f16;
  nope.decode_variants = {2};
  check_within_tolerance(nope);
}

TEST_CASE("kv types: the error each type adds, against the unrounded reference") {
  // Per-element rounding of values in [-1, 1]: f16 2^-11 relative, q8_0 half a step of max|x|/127
  // (<= 0.004), q4_0 half a step of max|x|/8 (<= 0.0625).  The outputs are convex mixtures of V,
  // so V's error passes through at most at that size; K's moves the softmax weights by about
  // |q|·|Δk|·sqrt(d)/sqrt(d) per score.  The bounds are those errors with a margin of about 4.
  const struct {
    KvType t;
    double bound;
  } cases[] = {{KvType::f16, 2e-3}, {KvType::q8_0, 0.03}, {KvType::q4_0, 0.4}};
  for (const auto& c : cases) {
    const std::string name = kv_type_name(c.t);
    CAPTURE(name);
    Harness h{make_scheme(Kind::rope_rotated, 4, 2, 64), 45, {17, 28}, 3};   // the pipelines above
    h.k_type = h.v_type = c.t;
    h.decode_variants = {2};
    h.reference_rounded = false;
    const Result r = h.run();
    INFO("max abs error against the unrounded reference " << r.max_err << " at " << r.where);
    CHECK(r.max_err <= c.bound);
    CHECK(r.max_err > kTol);   // the type does round: the reference's rounding above is not idle
  }
}

TEST_CASE("kv types: head dims that are not a multiple of 32 refuse q8_0 and q4_0, naming it") {
  Gpu& g = gpu();
  Attention att(*g.device);
  const AttentionSpec s = make_scheme(Kind::rope_rotated, 4, 2, 24).spec;
  Buffer dummy = g.zeros(1 << 16);
  Buffer step = g.zeros(16);
  RopeTable t{&dummy, 64, 12};
  LayerCache cache{&dummy, &dummy, 64, nullptr, 0, KvType::q8_0, KvType::f16};
  CommandList cmd(*g.device);
  cmd.begin();
  std::string message = "no error";
  try {
    att.kv_store(cmd, s, t, step.range(0, 16), Act{&dummy, 0, 1, 48}, Act{&dummy, 0, 1, 48}, cache);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("head_dim 24") != std::string::npos);
  CHECK(message.find("q8_0") != std::string::npos);
  CHECK(kv_type_fits(KvType::f16, 24));
  CHECK(kv_type_fits(KvType::q4_0, 64));
}

// Keys stored centred and smoothed (LayerCache::key_calib, shaders/attention_key_calib.glsl).
namespace {

// A calibration with mu in [-0.5, 0.5] and s a power of two from 1/4 to 4 per (kv head, channel), flag 1.
// Powers of two keep (y - mu) / s the same f32 in the kernels and on the CPU (any division rule), so the
// reference rounds exactly what the cache stores.
std::vector<float> test_calibration(const AttentionSpec& a, uint32_t seed) {
  std::vector<float> c = key_calib_identity(a);
  const uint32_t one = 1;
  std::memcpy(c.data(), &one, 4);
  const std::vector<float> mu = random_floats(size_t(a.n_kv_heads) * a.head_dim, seed, -0.5f, 0.5f);
  const std::vector<float> e = random_floats(size_t(a.n_kv_heads) * a.head_dim, seed + 1, -2.49f, 2.49f);
  for (uint32_t g = 0; g < a.n_kv_heads; ++g)
    for (uint32_t j = 0; j < a.head_dim; ++j) {
      c[4 + size_t(2 * g) * a.head_dim + j] = mu[size_t(g) * a.head_dim + j];
      c[4 + size_t(2 * g + 1) * a.head_dim + j] = std::ldexp(1.0f, int(std::lround(e[size_t(g) * a.head_dim + j])));
    }
  return c;
}

}  // namespace

// The reference takes s·round((y - mu)/s) + mu for each stored key y: a kernel that stored plain blocks,
// or did not scale its queries by s, would miss it by q4_0's rounding (~1e-2), far above kTol.  In an unpaged
// cache the keys of the first kKeyCalibExactRows positions take y itself: a kernel that read them from the
// blocks would miss likewise.
TEST_CASE("kv types: keys stored centred and smoothed, through every kernel") {
  Harness h{make_scheme(Kind::rope_rotated, 4, 2, 64), 45, {17, 28}, 3};
  h.k_type = h.v_type = KvType::q4_0;
  h.key_calib = test_calibration(h.s.spec, 11);
  h.decode_variants = {1, 2};
  check_within_tolerance(h);   // kv_store, prefill, both split-K decodes (queries scaled in each)
  h.fused = true;
  check_within_tolerance(h);   // the fused step's new key, centred and smoothed as stored
  h.block_rows = 16;           // a paged cache (the calibration is the pool's, per layer)
  h.decode_variants = {2};
  check_within_tolerance(h);
  Harness q8{make_scheme(Kind::rope_rotated, 4, 2, 64), 33, {33}, 2};
  q8.k_type = KvType::q8_0;    // unrotated blocks, storage-buffer reads
  q8.key_calib = test_calibration(q8.s.spec, 12);
  q8.tuning = small_tiles();
  q8.decode_variants = {2};
  check_within_tolerance(q8);
  Harness nope{make_scheme(Kind::nope, 4, 1, 32), 30, {30}, 2};   // no rotation: the raw key is the stored one
  nope.k_type = KvType::q4_0;
  nope.key_calib = test_calibration(nope.s.spec, 13);
  nope.decode_variants = {2};
  nope.fused = true;
  check_within_tolerance(nope);
  // Exact rows written by decode steps (positions 2 and 3; 4 and 5 go to blocks), fused and not.
  Harness early{make_scheme(Kind::rope_rotated, 4, 2, 64), 2, {2}, 4};
  early.k_type = early.v_type = KvType::q4_0;
  early.key_calib = test_calibration(early.s.spec, 15);
  early.decode_variants = {1, 2};
  check_within_tolerance(early);
  early.fused = true;
  check_within_tolerance(early);
  // A ring: its two sinks' keys stay exact, the ring's rows (which later keys take over) do not.
  Harness ring{make_scheme(Kind::window_sinks, 4, 2, 64, 0, 10, 2), 40, {8, 8, 8, 8, 8}, 3};
  ring.ring = 10 + 8 - 1;
  ring.k_type = ring.v_type = KvType::q4_0;
  ring.key_calib = test_calibration(ring.s.spec, 14);
  ring.fused = true;
  ring.decode_variants = {2};
  check_within_tolerance(ring);
}

TEST_CASE("kv types: a layer whose softmax sees q·mu refuses the keys' calibration, naming why") {
  const AttentionSpec plain = make_scheme(Kind::rope_rotated, 4, 2, 64).spec;
  CHECK(key_calib_applies(plain));
  CHECK(key_calib_applies(make_scheme(Kind::nope, 4, 1, 32).spec));
  CHECK_FALSE(key_calib_applies(make_scheme(Kind::key_norm, 4, 2, 64).spec));    // unit keys keep plain blocks
  CHECK_FALSE(key_calib_applies(plain.with_sink_logits()));                    // the sink's logit is not shifted
  CHECK_FALSE(key_calib_applies(make_scheme(Kind::rerope, 4, 2, 64, 12).spec));  // raw keys turn in the kernel
  AttentionSpec capped = plain;
  capped.softcap = 30;                                                           // tanh does not commute with a shift
  CHECK_FALSE(key_calib_applies(capped));
  Gpu& g = gpu();
  Attention att(*g.device);
  Buffer dummy = g.zeros(1 << 16);
  Buffer step = g.zeros(16);
  RopeTable t{&dummy, 64, 32};
  LayerCache cache{&dummy, &dummy, 64, nullptr, 0, KvType::q4_0, KvType::f16};
  cache.key_calib = dummy.range(0, key_calib_bytes(plain));
  CommandList cmd(*g.device);
  cmd.begin();
  std::string message = "no error";
  try {
    att.kv_store(cmd, plain.with_sink_logits(), t, step.range(0, 16), Act{&dummy, 0, 1, 128}, Act{&dummy, 0, 1, 128},
                 cache);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("sink logits") != std::string::npos);
}

// attention_kv_calibrate.comp against the statistics computed here in double from the same rows: mu, the
// mean raw key turned by the table's average rotation; s from kKeyCalibSmoothRows rows on (else 1); after a
// restart (flag 0), both from every chunk taken so far.  Plain RoPE, and YaRN's table (its attention factor
// scales cos and sin: the average turn is the table's).
TEST_CASE("kv types: the keys' calibration kernel against its statistics on the CPU") {
  Gpu& g = gpu();
  Attention att(*g.device);
  for (Kind kind : {Kind::rope_rotated, Kind::yarn_af}) {
    const Scheme sc = make_scheme(kind, 4, 2, 64);
    const AttentionSpec& a = sc.spec;
    CAPTURE(sc.name);
    const uint32_t H = a.n_heads, Hkv = a.n_kv_heads, d = a.head_dim, rp = a.rotary_dim / 2, gq = H / Hkv;
    // mu's average turn spans the context the cache serves (300 positions), not the whole table.
    const uint32_t n = kKeyCalibSmoothRows + 8, pos0 = 5, positions = pos0 + n + 100, context = 300;
    // Keys with an offset and a spread of their own per channel (what calibration is for), queries likewise.
    std::vector<float> k = random_floats(size_t(n) * Hkv * d, 21), q = random_floats(size_t(n) * H * d, 22);
    const std::vector<float> off = random_floats(d, 23, -2.f, 2.f), spread = random_floats(d, 24, 0.05f, 3.f);
    for (size_t i = 0; i < k.size(); ++i) k[i] = off[i % d] + spread[i % d] * k[i];
    for (size_t i = 0; i < q.size(); ++i) q[i] *= 4.0f - spread[i % d];
    // A second text: other rows, with a larger offset and spread (so that merging them moves mu and s).
    std::vector<float> k2 = random_floats(k.size(), 25), q2 = random_floats(q.size(), 26);
    for (size_t i = 0; i < k2.size(); ++i) k2[i] = 1.5f * off[i % d] + 0.5f + 2.0f * spread[i % d] * k2[i];
    for (size_t i = 0; i < q2.size(); ++i) q2[i] *= 1.0f + spread[i % d];
    const std::vector<float> tab = make_table(sc.ref.inv_freq, sc.af, positions);
    Buffer tb = g.upload_f32(tab, Arena::weights, "table");
    const RopeTable t1{&tb, positions, rp};
    Buffer qb = g.upload_f32(q), kb = g.upload_f32(k), qb2 = g.upload_f32(q2), kb2 = g.upload_f32(k2);
    struct Chunk {
      Buffer* qbuf;
      Buffer* kbuf;
      const float* q;
      const float* k;
      uint32_t rows, pos0;
    };
    auto run = [&](const Chunk& c, Buffer& cal) {
      const std::vector<uint32_t> st = {c.pos0, c.rows, 0, 0};
      Buffer step = g.upload_bytes(st.data(), 16);
      LayerCache cache{c.kbuf, c.kbuf, context, nullptr, 0, KvType::q4_0, KvType::q4_0};
      cache.key_calib = cal.range();
      CommandList cmd(*g.device);
      cmd.begin();
      att.kv_calibrate(cmd, a, t1, step.range(), Act{c.qbuf, 0, c.rows, H * d}, Act{c.kbuf, 0, c.rows, Hkv * d},
                       cache);
      cmd.end();
      cmd.run();
      return g.download_f32(cal, key_calib_bytes(a) / 4);
    };
    auto header = [](const std::vector<float>& got, size_t word) {
      uint32_t w;
      std::memcpy(&w, got.data() + word, 4);
      return w;
    };
    // The flag, mu and s (what the attention kernels read), without the rows taken and the statistics.
    auto calibration = [&](std::vector<float> got) {
      got.resize(4 + size_t(2) * Hkv * d);
      got[1] = got[2] = 0;
      return got;
    };
    // The rotated row y of x (as the cache stores it) at position p, in double.
    auto rotated = [&](const float* x, uint32_t p, double f) {
      std::vector<double> y(d);
      for (uint32_t j = 0; j < d; ++j) y[j] = x[j] * f;
      for (uint32_t j = 0; j < rp; ++j) {
        const double c = tab[(size_t(p) * rp + j) * 2], s = tab[(size_t(p) * rp + j) * 2 + 1];
        y[j] = x[j] * f * c - x[j + rp] * f * s;
        y[j + rp] = x[j + rp] * f * c + x[j] * f * s;
      }
      return y;
    };
    // The expected calibration from the chunks' rows, all together (two passes: mean, then spread).
    auto expect = [&](const std::vector<Chunk>& chunks, uint32_t gh, std::vector<double>& mu, std::vector<double>& s) {
      std::vector<double> m(d, 0), sum(d, 0), sq(d, 0), qq(d, 0);
      std::vector<std::vector<double>> ys;
      uint32_t rows = 0;
      for (const Chunk& c : chunks) rows += c.rows;
      for (const Chunk& c : chunks)
        for (uint32_t t = 0; t < c.rows; ++t) {
          const float* x = c.k + (size_t(t) * Hkv + gh) * d;
          for (uint32_t j = 0; j < d; ++j) m[j] += double(x[j]) / rows;
          ys.push_back(rotated(x, c.pos0 + t, 1.0));
          for (uint32_t j = 0; j < d; ++j) sum[j] += ys.back()[j];
          for (uint32_t hq = 0; hq < gq; ++hq) {
            const std::vector<double> z = rotated(c.q + (size_t(t) * H + gh * gq + hq) * d, c.pos0 + t, 1.0);
            for (uint32_t j = 0; j < d; ++j) qq[j] += z[j] * z[j];
          }
        }
      mu = m;
      for (uint32_t j = 0; j < rp; ++j) {
        double c = 0, sn = 0;
        for (uint32_t p = 0; p < context; ++p) c += tab[(size_t(p) * rp + j) * 2], sn += tab[(size_t(p) * rp + j) * 2 + 1];
        c /= context, sn /= context;
        mu[j] = m[j] * c - m[j + rp] * sn;
        mu[j + rp] = m[j + rp] * c + m[j] * sn;
      }
      s.assign(d, 1.0);
      if (rows < kKeyCalibSmoothRows) return;
      double log_mean = 0;
      for (uint32_t j = 0; j < d; ++j) {
        const double mk = sum[j] / rows;
        for (const auto& y : ys) sq[j] += (y[j] - mk) * (y[j] - mk);
        s[j] = std::sqrt(std::max(std::sqrt(sq[j] / rows), 1e-12) / std::max(std::sqrt(qq[j] / (rows * gq)), 1e-12));
        log_mean += std::log(s[j]) / d;
      }
      for (double& x : s) x = std::clamp(x / std::exp(log_mean), 1.0 / 16, 16.0);
    };
    // mu's tolerance: an f32 sum of the context's cos / sin (|error| ~1e-7 of the keys' O(1) scale) times the
    // mean key; s's: f32 running moments over ~1,000 rows (Chan's merge, no cancelling sum of squares).
    auto check = [&](const std::vector<float>& got, const std::vector<Chunk>& chunks) {
      bool spread_s = false;
      for (uint32_t gh = 0; gh < Hkv; ++gh) {
        std::vector<double> mu, s;
        expect(chunks, gh, mu, s);
        for (uint32_t j = 0; j < d; ++j) {
          CHECK(got[4 + size_t(2 * gh) * d + j] == doctest::Approx(mu[j]).epsilon(1e-4).scale(1e-2));
          CHECK(got[4 + size_t(2 * gh + 1) * d + j] == doctest::Approx(s[j]).epsilon(1e-4));
          spread_s |= std::fabs(s[j] - 1) > 0.1;
        }
      }
      return spread_s;
    };
    const Chunk first{&qb, &kb, q.data(), k.data(), n, pos0}, few{&qb, &kb, q.data(), k.data(), 40, pos0};
    for (const Chunk& c : {first, few}) {   // smoothed, and mu only
      CAPTURE(c.rows);
      Buffer cal = g.upload_f32(key_calib_identity(a), Arena::cache, "calibration");   // a pool's: no cap
      const std::vector<float> got = run(c, cal);
      CHECK(header(got, 0) == 1);
      CHECK(header(got, 1) == c.rows);
      CHECK(check(got, {c}) == (c.rows >= kKeyCalibSmoothRows));   // the case tests a real s, not the identity
      // Once calibrated, a later chunk changes nothing (its rows were stored by the first calibration, and
      // a calibration without a cap takes no more statistics).
      CHECK(run({&qb2, &kb2, q2.data(), k2.data(), c.rows, pos0 + 50}, cal) == got);
    }
    // A calibration that refines: a later chunk's statistics are taken (the calibration stays), and after a
    // restart the next chunk sets mu and s from all three chunks.
    {
      Buffer cal = g.upload_f32(key_calib_identity(a, false, kKeyCalibMaxRows), Arena::cache, "calibration");
      const Chunk second{&qb2, &kb2, q2.data(), k2.data(), 300, 40}, third{&qb, &kb, q.data(), k.data(), 200, 0};
      const std::vector<float> after_few = run(few, cal);
      const std::vector<float> after_second = run(second, cal);
      CHECK(calibration(after_second) == calibration(after_few));
      CHECK(header(after_second, 1) == few.rows + second.rows);
      const uint32_t pending = 0;
      g.transfer->upload(cal, 0, &pending, 4);   // KeyCalibration::restart
      const std::vector<float> got = run(third, cal);
      CHECK(header(got, 0) == 1);
      CHECK(header(got, 1) == few.rows + second.rows + third.rows);
      CHECK(check(got, {few, second, third}));   // 540 rows: smoothed
      // At the cap, a chunk is not taken.
      std::vector<float> full = key_calib_identity(a, false, 100);
      Buffer capped = g.upload_f32(full, Arena::cache, "calibration");
      const std::vector<float> at_cap = run(second, capped);   // the first chunk is taken whole, past the cap
      CHECK(header(at_cap, 1) == second.rows);
      CHECK(run(few, capped) == at_cap);
    }
    // Too few rows: the identity stays, frozen (flag 2), whatever comes later.
    Buffer fresh = g.upload_f32(key_calib_identity(a), Arena::cache, "calibration");
    const std::vector<float> want = calibration(key_calib_identity(a, true));
    CHECK(calibration(run({&qb, &kb, q.data(), k.data(), kKeyCalibMinRows - 1, pos0}, fresh)) == want);
    CHECK(calibration(run(first, fresh)) == want);
  }
}
