// Attention kernels (kv_store, tiled prefill, split-K decode + combine) against
// the naive float64 reference of tests/support/attention_reference.cpp, for every
// position scheme of base/attention_spec.hpp.
//
// Tolerance: max abs error 1e-4 on outputs of size O(1).  The kernels
// accumulate in f32 (relative rounding ~6e-8 per operation): logits of
// magnitude <= ~30 (CosA λ = 4 ln n) carry absolute errors ~1e-5 at worst
// (sums of d products, cos/sin tables rounded to f32 at positions <= ~1000),
// which perturb softmax weights by the same relative amount; outputs are convex
// combinations of |v| <= 1, so errors stay ~1e-5.  1e-4 leaves headroom while
// any real mistake (a wrong branch, position, mask or tile bound) moves
// outputs by 1e-2 or more.  Soft-capped cases keep the same bound: their raw
// scores reach ~±30 in the log2 domain (f32 errors ~1e-5 there), and tanh's
// slope is at most 1, so the capped scores carry no more error than that.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "base/error.hpp"
#include "kernels/attention.hpp"
#include "tests/support/attention_harness.hpp"
#include "tests/support/attention_reference.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"

using namespace reach;
using namespace reach::test;

namespace {

double g_worst = 0;
std::string g_worst_case;
int g_runs = 0;

void expect_ok(Harness h) {
  const Result r = h.run();
  ++g_runs;
  if (r.max_err > g_worst || std::isnan(r.max_err)) {
    g_worst = r.max_err;
    g_worst_case = h.describe() + " at " + r.where;
  }
  INFO(h.describe());
  INFO("max abs error " << r.max_err << " at " << r.where << ", tolerance " << kTol);
  CHECK(r.max_err <= kTol);
}

}  // namespace

// The cases tagged test_suite("schemes") run as the test kernels_attention_schemes, those tagged
// "shapes" as kernels_attention_shapes, the others as kernels_attention (tests/meson.build): processes
// the test runner runs side by side, each within its timeout on a cold shader cache (llvmpipe compiles each pipeline, single-threaded, at its
// first dispatch, and every tuple here specializes pipelines of its own).
// Sweeps below are sampled (tests/support/kernel_check.hpp: every value of each
// list at least once plus a few more tuples; REACH_TEST_EXHAUSTIVE=1 runs all).
TEST_CASE("attention: plain RoPE, one-shot / chunked prefill and decode, GQA") {
  const uint32_t ds[] = {16, 64}, hkvs[] = {4, 2, 1};
  for_sample("plain rope", {std::size(ds), std::size(hkvs), 2}, 2, [&](const SweepPick& p) {
    const uint32_t d = ds[p[0]], hkv = hkvs[p[1]];
    if (p[2] == 0) {
      Harness h{make_scheme(Kind::rope_rotated, 4, hkv, d), 150, {150}, 3};
      expect_ok(h);
    } else {
      Harness c{make_scheme(Kind::rope_rotated, 4, hkv, d), 150, {7, 33, 1, 64, 45}, 0};
      expect_ok(c);
    }
  });
  // Every length at the tile edges (prefill tiles of 8 on lavapipe, 64 on GPUs).
  for (uint32_t n : {1u, 2u, 8u, 9u, 63u, 64u, 65u, 300u}) {
    Harness h{make_scheme(Kind::rope_rotated, 4, 2, 64), n, {n}, 2};
    expect_ok(h);
  }
}

TEST_CASE("attention: head dims 8, 80, 96, 128 and partial rotary") {
  for (uint32_t d : {8u, 80u, 96u, 128u}) {
    Harness h{make_scheme(Kind::rope_rotated, 4, 2, d), 70, {70}, 2};
    expect_ok(h);
  }
  Scheme s = make_scheme(Kind::rope_raw, 4, 2, 64);
  s.spec = s.spec.with_rotary_dim(32);
  s.ref.inv_freq = inv_freqs(16, 32, s.base);
  Harness h{s, 90, {41, 49}, 2};
  expect_ok(h);
}

TEST_CASE("attention: every scheme, one-shot and chunked prefill, decode with default and small splits" * doctest::test_suite("schemes")) {
  struct K {
    Kind kind;
    uint32_t W, window, sinks;
  };
  const K kinds[] = {{Kind::rope_raw, 0, 0, 0},      {Kind::yarn_af, 0, 0, 0},         {Kind::rerope, 40, 0, 0},
                     {Kind::leaky, 40, 0, 0},        {Kind::self_extend, 40, 0, 0},    {Kind::logn, 0, 0, 0},
                     {Kind::key_norm, 0, 0, 0},      {Kind::query_norm, 0, 0, 0},      {Kind::cos_norm, 0, 0, 0},
                     {Kind::cos_norm_fixed, 0, 0, 0}, {Kind::window_sinks, 0, 50, 3}, {Kind::window_rerope, 30, 70, 2},
                     {Kind::nope, 0, 0, 0},          {Kind::alibi, 0, 0, 0}};
  const std::pair<uint32_t, uint32_t> shapes[] = {{16, 1}, {64, 2}};
  // Sampled: every scheme, both runs (one-shot with default tiles, chunked with
  // small tiles) and both shapes at least once, plus a few more.  (Each tuple
  // compiles its own pipelines: on a cold shader cache that is most of the time.)
  for_sample("every scheme", {std::size(kinds), 2, std::size(shapes)}, 3, [&](const SweepPick& p) {
    const K& k = kinds[p[0]];
    const auto [d, hkv] = shapes[p[2]];
    if (p[1] == 0) {
      Harness one{make_scheme(k.kind, 4, hkv, d, k.W, k.window, k.sinks), 200, {200}, 2};
      one.seed = 11 + d + hkv;
      expect_ok(one);
    } else {
      Harness ch{make_scheme(k.kind, 4, hkv, d, k.W, k.window, k.sinks), 200, {7, 33, 100, 60}, 3, small_tiles()};
      ch.seed = 11 + d + hkv;
      expect_ok(ch);
    }
  });
}

TEST_CASE("attention: dual-branch windows at tile boundaries B-1, B, B+1, 2B+2, unaligned chunks" * doctest::test_suite("schemes")) {
  Gpu& g = gpu();
  for (bool small : {false, true}) {
    const AttentionTuning tune = small ? small_tiles() : AttentionTuning{};
    Attention probe(*g.device, tune);
    uint32_t br = 0, bc = 0;
    AttentionSpec dual_spec = make_scheme(Kind::rerope, 4, 2, 64, 40).spec;
    probe.prefill_tile_sizes(dual_spec, br, bc);
    const uint32_t edges[] = {bc - 1, bc, bc + 1, 2 * bc + 2};
    const Kind dual[] = {Kind::rerope, Kind::leaky, Kind::self_extend};
    // Sampled: every window edge and every dual-branch scheme at least once per tuning
    // (each window is a pipeline of its own: compiles dominate a cold shader cache).
    for_sample(str("dual-branch edges small=", small), {std::size(edges), std::size(dual)}, 0, [&](const SweepPick& p) {
        const uint32_t W = edges[p[0]];
        const Kind kind = dual[p[1]];
        uint32_t w = W;
        if (kind == Kind::self_extend) w = std::max<uint32_t>(4, W / 4 * 4);   // G | W
        const uint32_t n = std::min<uint32_t>(300, 2 * w + 3 * bc + 5);
        // Both key paths of branch 1 (pre-rotated cache, raw keys rotated on
        // read) under both tunings (texel / storage-buffer reads).
        Harness one{make_scheme(kind, 4, 2, 64, w), n, {n}, 2, tune};
        one.rotated_keys = small;
        expect_ok(one);
        Harness ch{make_scheme(kind, 4, 1, 16, w), n, {5, bc + 3, n - bc - 8}, 1, tune};
        ch.rotated_keys = !small;
        expect_ok(ch);
      });
    // Sliding-window mask edges at the tile size.
    for (uint32_t win : edges) {
      Harness h{make_scheme(Kind::window_sinks, 4, 2, 64, 0, win, 5), 260, {13, 247}, 2, tune};
      expect_ok(h);
    }
  }
}

TEST_CASE("attention: the last prefill row equals the decode step" * doctest::test_suite("shapes")) {
  Gpu& g = gpu();
  for (Kind kind : {Kind::rope_rotated, Kind::rerope, Kind::leaky, Kind::self_extend}) {
    Scheme s = make_scheme(kind, 4, 2, 64, 64);
    const uint32_t n = 257;
    // Prefill all n, and separately prefill n-1 then decode 1: same last row.
    Harness a{s, n, {n}, 0};
    Harness b{s, n - 1, {n - 1}, 1};
    a.seed = b.seed = 99;
    CHECK(a.run().max_err <= kTol);
    CHECK(b.run().max_err <= kTol);
    // Direct comparison of the two kernels' outputs.
    Attention att(*g.device);
    const AttentionSpec& sp = s.spec;
    const uint32_t qd = sp.n_heads * sp.head_dim, kvd = sp.n_kv_heads * sp.head_dim, cap = n;
    std::vector<float> q = random_floats(size_t(n) * qd, 5, -2.f, 2.f);
    std::vector<float> k = random_floats(size_t(n) * kvd, 6), v = random_floats(size_t(n) * kvd, 7);
    const uint32_t positions = cap + uint32_t(std::max(0, sp.q2_const)) + 2;
    Buffer t1b = g.upload_f32(make_table(s.ref.inv_freq, 1, positions));
    std::vector<double> inv2 = s.ref.inv_freq;
    for (double& f : inv2) f /= s.ref.leaky_k;
    Buffer t2b = g.upload_f32(make_table(inv2, 1, positions));
    RopeTable t1{&t1b, positions, sp.rotary_dim / 2}, t2{&t2b, positions, sp.rotary_dim / 2};
    Buffer kc = g.zeros(size_t(sp.n_kv_heads) * cap * sp.head_dim * 4), vc = g.zeros(size_t(sp.n_kv_heads) * cap * sp.head_dim * 4);
    LayerCache cache{&kc, &vc, cap};
    Buffer qb = g.upload_f32(q), kb = g.upload_f32(k), vb = g.upload_f32(v), ob = g.zeros(size_t(n) * qd * 4);
    uint32_t st[4] = {0, n, 0, 0};
    Buffer step = g.upload_bytes(st, 16);
    CommandList cmd(*g.device);
    cmd.begin();
    att.kv_store(cmd, sp, t1, step.range(), Act{&kb, 0, n, kvd}, Act{&vb, 0, n, kvd}, cache);
    cmd.barrier();
    att.prefill(cmd, sp, t1, t2, step.range(), Act{&qb, 0, n, qd}, cache, Act{&ob, 0, n, qd}, n);
    cmd.end();
    cmd.run();
    const std::vector<float> pre = g.download_f32(ob, qd, size_t(n - 1) * qd * 4);
    uint32_t st2[4] = {n - 1, 1, 0, 0};
    g.transfer->upload(step, 0, st2, 16);
    for (uint32_t variant : {1u, 2u}) {
      AttentionTuning tv;
      tv.decode_variant = variant;
      Attention dec_att(*g.device, tv);
      if (variant == 2 && !dec_att.lanes_decode_supported()) continue;
      Buffer scratch = g.zeros(dec_att.decode_scratch_bytes(sp, cap));
      Buffer od = g.zeros(qd * 4);
      CommandList c2(*g.device);
      c2.begin();
      dec_att.decode(c2, sp, t1, t2, step.range(), Act{&qb, size_t(n - 1) * qd * 4, 1, qd}, cache,
                     Act{&od, 0, 1, qd}, scratch.range());
      c2.end();
      c2.run();
      const std::vector<float> dec = g.download_f32(od, qd);
      double e = 0;
      for (uint32_t i = 0; i < qd; ++i) e = std::max(e, double(std::fabs(pre[i] - dec[i])));
      INFO("scheme " << s.name << ", decode variant " << variant << ": prefill last row vs decode, max abs diff " << e);
      CHECK(e <= 2e-5);
    }
  }
}

TEST_CASE("attention: decode at many positions with one recorded command buffer, many splits") {
  // 120 positions: the ReRoPE window edge (24) and the sliding window (40)
  // cross every alignment to the decode tiles and splits.
  for (Kind kind : {Kind::rope_rotated, Kind::rerope, Kind::leaky, Kind::self_extend, Kind::window_sinks,
                    Kind::window_rerope, Kind::alibi}) {
    Harness h{make_scheme(kind, 4, 2, 16, 24, 40, 2), 5, {5}, 120, small_tiles()};
    expect_ok(h);
  }
}

TEST_CASE("attention: ring KV cache for sliding-window layers (memory O(window))") {
  // Window 40: chunks up to 33 rows need a ring of 40 + 33 - 1 = 72 rows, and
  // 63 + 150 positions wrap it about three times.  With sinks the first rows stay
  // put; without them decode starts its splits at the window's first key.
  const uint32_t win = 40;
  const uint32_t sinks_list[] = {0, 3}, hkvs[] = {1, 2};
  const Kind kinds[] = {Kind::window_sinks, Kind::window_rerope};
  // Sampled: each run (chunked small tiles, one-token default tiles) with every
  // sinks count, scheme and GQA shape at least once.
  for_sample("ring", {std::size(sinks_list), std::size(kinds), std::size(hkvs), 2}, 2, [&](const SweepPick& p) {
    const uint32_t sinks = sinks_list[p[0]], hkv = hkvs[p[2]];
    const Kind kind = kinds[p[1]];
    if (p[3] == 0) {
      Harness h{make_scheme(kind, 4, hkv, 16, 24, win, sinks), 63, {30, 33}, 150, small_tiles()};
      h.ring = win + 33 - 1;
      expect_ok(h);
    } else {
      // Default tiles, one-token chunks, the shortest ring decode allows.
      Harness one{make_scheme(kind, 4, hkv, 64, 24, win, sinks), 3, {1, 1, 1}, 100};
      one.ring = win;
      expect_ok(one);
    }
  });
}

TEST_CASE("attention: a ring shorter than window + chunk - 1 is rejected") {
  Gpu& g = gpu();
  Attention att(*g.device);
  AttentionSpec s = make_scheme(Kind::window_sinks, 4, 2, 16, 0, 40, 0).spec;
  Buffer dummy = g.zeros(1 << 16);
  Buffer step = g.zeros(16);
  RopeTable t{&dummy, 64, 8};
  LayerCache short_ring{&dummy, &dummy, 1000, nullptr, 40};
  CommandList cmd(*g.device);
  cmd.begin();
  // 40 rows hold decode (one key at a time) but not a chunk of 2.
  auto message = [&](const AttentionSpec& sp, uint32_t n) -> std::string {
    try {
      att.kv_store(cmd, sp, t, step.range(0, 16), Act{&dummy, 0, n, 32}, Act{&dummy, 0, n, 32}, short_ring);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(message(s, 2).find("too short for window 40") != std::string::npos);
  AttentionSpec full = make_scheme(Kind::rope_rotated, 4, 2, 16).spec;
  CHECK(message(full, 1).find("needs a sliding-window layer") != std::string::npos);
  cmd.end();
}

TEST_CASE("attention: decode with GQA groups split into head chunks (lanes kernel)") {
  // CPU devices run the lanes kernel by default: the tests must not skip it there.
  Gpu& g = gpu();
  Attention att(*g.device);
  if (g.device->caps().is_cpu()) {
    CHECK(att.lanes_decode_supported());
    CHECK(att.tuning().decode_variant == 2);
  }
  // Groups of 3 (SmolLM2's), 5 x d128 (chunks of 2 heads, the last half empty)
  // and 8 x d64 (two chunks of 4).
  struct G {
    uint32_t H, Hkv, d;
  };
  const G groups[] = {G{9, 3, 64}, G{5, 1, 128}, G{8, 1, 64}};
  const Kind kinds[] = {Kind::rope_rotated, Kind::rerope, Kind::leaky};
  // Sampled: every group shape and scheme at least once.
  for_sample("gqa lanes", {std::size(groups), std::size(kinds)}, 0, [&](const SweepPick& p) {
    const G gq = groups[p[0]];
    Harness h{make_scheme(kinds[p[1]], gq.H, gq.Hkv, gq.d, 40), 150, {150}, 3};
    expect_ok(h);
  });
}

TEST_CASE("attention: scratch does not grow with n², misuse is rejected") {
  Gpu& g = gpu();
  Attention att(*g.device);
  AttentionSpec s = make_scheme(Kind::rerope, 8, 2, 64, 512).spec;
  const uint64_t a = att.decode_scratch_bytes(s, 4096), b = att.decode_scratch_bytes(s, 65536);
  INFO("scratch 4k " << a << " bytes, 64k " << b << " bytes");
  CHECK(b <= a * 20);
  CHECK(b <= uint64_t(256) * 8 * 66 * 4);
  // Dual branch with a rotated cache cannot be expressed.
  s.cache = KeyCacheMode::rotated;
  Buffer dummy = g.zeros(1 << 16);
  RopeTable t{&dummy, 16, 32};
  LayerCache cache{&dummy, &dummy, 16};
  CommandList cmd(*g.device);
  cmd.begin();
  CHECK_THROWS_AS(att.prefill(cmd, s, t, t, dummy.range(0, 16), Act{&dummy, 0, 1, 512}, cache, Act{&dummy, 0, 1, 512}, 1),
                  Error);
  AttentionSpec odd = make_scheme(Kind::rope_rotated, 4, 2, 20).spec;
  CHECK_THROWS_AS(att.prefill(cmd, odd, t, t, dummy.range(0, 16), Act{&dummy, 0, 1, 80}, cache, Act{&dummy, 0, 1, 80}, 1),
                  Error);
  cmd.end();
}

namespace {

// Gemma 2's soft cap on a scheme, with a logit scale that makes it bite: q in
// [-2, 2] and k in [-1, 1] give q·k a standard deviation of sqrt(4d/9), so
// scale 8/sqrt(d) (1 at d 64, 2 at d 16: exact in f32) makes the scores' 5.3:
// they reach ~±20, where cap 5 saturates tanh (tanh(4) = 0.9993).
Scheme capped(Scheme s, float cap) {
  const double scale = 8.0 / std::sqrt(double(s.spec.head_dim));
  s.spec.scale = float(scale);
  s.spec = s.spec.with_softcap(cap);
  s.ref.scale = scale;
  s.ref.softcap = cap;
  s.name += str(" + softcap ", cap, " (scale ", scale, ")");
  return s;
}

}  // namespace

TEST_CASE("attention: soft-capped scores (Gemma 2), cap 5 on scores up to ~20" * doctest::test_suite("shapes")) {
  // The inputs of a Harness sequence make the cap matter: the reference with
  // and without it differs by far more than the tolerance.
  {
    const uint32_t n = 64, H = 4, Hkv = 2, d = 64, seed = 5;
    const Scheme s = capped(make_scheme(Kind::rope_rotated, H, Hkv, d), 5);
    const auto q = random_floats(size_t(n) * H * d, seed, -2.f, 2.f);
    const auto k = random_floats(size_t(n) * Hkv * d, seed + 1, -1.f, 1.f);
    const auto v = random_floats(size_t(n) * Hkv * d, seed + 2, -1.f, 1.f);
    std::vector<int64_t> pos(n);
    for (uint32_t i = 0; i < n; ++i) pos[i] = i;
    RefScheme uncapped = s.ref;
    uncapped.softcap = 0;
    const auto with = attention_reference(q, k, v, pos, pos, H, Hkv, d, s.ref);
    const auto without = attention_reference(q, k, v, pos, pos, H, Hkv, d, uncapped);
    double diff = 0;
    for (size_t i = 0; i < with.size(); ++i) diff = std::max(diff, std::fabs(with[i] - without[i]));
    INFO("reference with vs without cap 5: max abs difference " << diff);
    CHECK(diff > 100 * kTol);
  }
  struct K {
    Kind kind;
    uint32_t W, window, sinks;
  };
  // Plain RoPE, a sliding window with sinks, every dual-branch scheme (one with
  // a window too) and ALiBi, whose bias comes after the cap.
  const K kinds[] = {{Kind::rope_rotated, 0, 0, 0}, {Kind::window_sinks, 0, 50, 3}, {Kind::rerope, 40, 0, 0},
                     {Kind::leaky, 40, 0, 0},       {Kind::self_extend, 40, 0, 0},  {Kind::window_rerope, 30, 70, 2},
                     {Kind::alibi, 0, 0, 0}};
  const std::pair<uint32_t, uint32_t> shapes[] = {{16, 1}, {64, 2}};
  // Runs: 0 one-shot prefill of 200 rows (25 query tiles of 8 on lavapipe, each
  // over up to 25 key tiles) with default tiles, then 2 decode steps; 1 chunked
  // prefill with small tiles (several online-softmax blocks per tile, storage
  // buffers), then 3 decode steps; 2 a short prefill and 100 decode steps with
  // small splits, so the window edges cross every split alignment.
  // Always: plain RoPE in both prefill runs, the sliding window and ReRoPE one-shot at d 64.
  const std::vector<std::vector<size_t>> always = {{0, 0, 1}, {0, 1, 0}, {1, 0, 1}, {2, 0, 1}};
  for_sample("softcap", {std::size(kinds), 3, std::size(shapes)}, 2, [&](const SweepPick& p) {
    const K& k = kinds[p[0]];
    const auto [d, hkv] = shapes[p[2]];
    const Scheme s = capped(make_scheme(k.kind, 4, hkv, d, k.W, k.window, k.sinks), 5);
    if (p[1] == 0) {
      Harness one{s, 200, {200}, 2};
      one.seed = 21 + d + hkv;
      expect_ok(one);
    } else if (p[1] == 1) {
      Harness ch{s, 200, {7, 33, 100, 60}, 3, small_tiles()};
      ch.seed = 21 + d + hkv;
      expect_ok(ch);
    } else {
      Harness dec{s, 5, {5}, 100, small_tiles()};
      dec.seed = 21 + d + hkv;
      expect_ok(dec);
    }
  }, always);
}

TEST_CASE("attention: a negative, NaN or overflowing softcap is rejected") {
  Gpu& g = gpu();
  Attention att(*g.device);
  Buffer dummy = g.zeros(1 << 16);
  RopeTable t{&dummy, 16, 32};
  LayerCache cache{&dummy, &dummy, 16};
  CommandList cmd(*g.device);
  cmd.begin();
  const AttentionSpec plain = make_scheme(Kind::rope_rotated, 4, 2, 64).spec;
  // 3e38 · log2(e) overflows the f32 the kernels get.
  for (const float cap : {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 3e38f}) {
    INFO("softcap " << cap);
    std::string what = "no error";
    try {
      att.prefill(cmd, plain.with_softcap(cap), t, t, dummy.range(0, 16), Act{&dummy, 0, 1, 256}, cache,
                  Act{&dummy, 0, 1, 256}, 1);
    } catch (const Error& e) {
      what = e.what();
    }
    CHECK(what.find("softcap must be finite and >= 0") != std::string::npos);
  }
  cmd.end();
}

TEST_CASE("attention: summary of the reference comparisons") {
  MESSAGE(g_runs << " sequences compared with the float64 reference; worst max abs error " << g_worst
                 << " (tolerance " << kTol << ") in " << g_worst_case);
  CHECK(g_worst <= kTol);
}

TEST_CASE("attention: the families' head shapes (Qwen3-0.6B, Phi-4-mini, Gemma-2-2B, Llama-3.2-1B)" * doctest::test_suite("shapes")) {
  // Real heads of the families reach runs, each once through one-shot prefill + decode and once chunked:
  // Qwen3-0.6B 16/8 x 128; Phi-4-mini 24/8 x 128 with 96 of 128 dims rotating (LongRoPE's partial rotary);
  // Gemma-2-2B 8/4 x 256, capped at 50 on a sliding window (its local layers); Llama-3.2-1B 32/8 x 64.
  struct F {
    const char* name;
    uint32_t H, Hkv, d, rotary, window;
    float cap;
  };
  const F fams[] = {{"qwen3-0.6b", 16, 8, 128, 128, 0, 0},
                    {"phi-4-mini", 24, 8, 128, 96, 0, 0},
                    {"gemma-2-2b local", 8, 4, 256, 256, 40, 50},
                    {"llama-3.2-1b", 32, 8, 64, 64, 0, 0}};
  for_sample("family heads", {std::size(fams), 2}, 1, [&](const SweepPick& p) {
    const F& f = fams[p[0]];
    Scheme s = make_scheme(f.window ? Kind::window_sinks : Kind::rope_rotated, f.H, f.Hkv, f.d, 0, f.window, 0);
    if (f.rotary != f.d) {
      s.spec = s.spec.with_rotary_dim(f.rotary);
      s.ref.inv_freq = inv_freqs(f.rotary / 2, f.rotary, s.base);
    }
    if (f.cap > 0) {
      s.spec = s.spec.with_softcap(f.cap);
      s.ref.softcap = f.cap;
    }
    s.name += std::string(" [") + f.name + "]";
    if (p[1] == 0) {
      Harness h{s, 70, {70}, 2};
      expect_ok(h);
    } else {
      Harness h{s, 70, {9, 30, 31}, 2};
      expect_ok(h);
    }
  }, {{1, 0}, {2, 1}});
}

TEST_CASE("attention: summary of the scheme cases' reference comparisons" * doctest::test_suite("schemes")) {
  MESSAGE(g_runs << " sequences compared with the float64 reference; worst max abs error " << g_worst
                 << " (tolerance " << kTol << ") in " << g_worst_case);
  CHECK(g_worst <= kTol);
}

TEST_CASE("attention: summary of the shape cases' reference comparisons" * doctest::test_suite("shapes")) {
  MESSAGE(g_runs << " sequences compared with the float64 reference; worst max abs error " << g_worst
                 << " (tolerance " << kTol << ") in " << g_worst_case);
  CHECK(g_worst <= kTol);
}
