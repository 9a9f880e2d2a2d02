// gpt-oss's attention sink logits (prefill, both decode kernels, the split-K
// merge) and the fused decode step (Attention::decode_fused: the new row's
// store, the attention and the merge in one dispatch), against the float64
// reference of tests/support/attention_reference.cpp through the harness of
// tests/support/attention_harness.hpp (tolerance kTol, 1e-4).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

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

// Sink logits of the size of the harness's scores (q in [-2, 2], k in [-1, 1]:
// scaled scores of standard deviation ~0.7), so the sink takes a real share.
std::vector<float> sink_logits(uint32_t heads, uint32_t seed) { return random_floats(heads, seed, -1.0f, 2.0f); }

}  // namespace

TEST_CASE("attention sinks: the reference against the formula, and a sink of -inf is no sink") {
  // One key at position 0 (no rotation at angle 0): p = 1 / (1 + exp(s - z)), out = p v.
  const int H = 2, d = 8;
  const std::vector<float> q = random_floats(H * d, 3, -2.f, 2.f), k = random_floats(d, 4), v = random_floats(d, 5);
  RefScheme r;
  r.inv_freq = inv_freqs(d / 2, d, 10000);
  r.sink_logits = {0.5, -1.25};
  const std::vector<double> out = attention_reference(q, k, v, {0}, {0}, H, 1, d, r);
  for (int h = 0; h < H; ++h) {
    double z = 0;
    for (int c = 0; c < d; ++c) z += double(q[h * d + c]) * k[c];
    z /= std::sqrt(double(d));
    const double p = 1.0 / (1.0 + std::exp(r.sink_logits[h] - z));
    for (int c = 0; c < d; ++c) CHECK(out[h * d + c] == doctest::Approx(p * v[c]).epsilon(1e-12));
  }
  // -inf weighs nothing: the same doubles as no sink at all, over a causal sequence.
  const int n = 20, Hkv = 1;
  const auto qs = random_floats(size_t(n) * H * d, 6, -2.f, 2.f), ks = random_floats(size_t(n) * Hkv * d, 7),
             vs = random_floats(size_t(n) * Hkv * d, 8);
  std::vector<int64_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  RefScheme none;
  none.inv_freq = r.inv_freq;
  RefScheme neg = none;
  neg.sink_logits.assign(H, -std::numeric_limits<double>::infinity());
  CHECK(attention_reference(qs, ks, vs, pos, pos, H, Hkv, d, none) ==
        attention_reference(qs, ks, vs, pos, pos, H, Hkv, d, neg));
  // And a finite sink moves the outputs by far more than the kernels' tolerance.
  RefScheme with = none;
  with.sink_logits = {1.0, 1.0};
  const auto a = attention_reference(qs, ks, vs, pos, pos, H, Hkv, d, none);
  const auto b = attention_reference(qs, ks, vs, pos, pos, H, Hkv, d, with);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  CHECK(diff > 100 * kTol);
}

TEST_CASE("attention sinks: prefill, decode (both kernels, unfused and fused), GQA, windows and rings") {
  struct C {
    Kind kind;
    uint32_t H, Hkv, d, window, sinks, ring;
  };
  // gpt-oss: 64 query heads / 8 kv heads, d 64, window 128 on alternate layers; here scaled down.
  const C cases[] = {{Kind::rope_rotated, 8, 2, 64, 0, 0, 0},   {Kind::yarn_af, 4, 1, 16, 0, 0, 0},
                     {Kind::window_sinks, 8, 2, 64, 40, 0, 0},  {Kind::window_sinks, 4, 2, 16, 40, 0, 72},
                     {Kind::window_sinks, 4, 1, 16, 40, 3, 72}};
  for_sample("sinks", {std::size(cases), 2, 2}, 2, [&](const SweepPick& p) {
    const C& c = cases[p[0]];
    const bool small = p[1] == 1;
    Harness h{make_scheme(c.kind, c.H, c.Hkv, c.d, 0, c.window, c.sinks), 63, {30, 33}, 30,
              small ? small_tiles() : AttentionTuning{}};
    h.ring = c.ring;
    h.fused = p[2] == 1;
    h.sink_logits = sink_logits(c.H, 17 + p[0]);
    check_within_tolerance(h);
  });
}

TEST_CASE("attention sinks: a spec with sink logits and no buffer is rejected") {
  Gpu& g = gpu();
  Attention att(*g.device);
  const AttentionSpec s = make_scheme(Kind::rope_rotated, 4, 2, 16).spec.with_sink_logits();
  Buffer dummy = g.zeros(1 << 16);
  RopeTable t{&dummy, 64, 8};
  LayerCache cache{&dummy, &dummy, 64};
  Buffer scratch = g.zeros(att.decode_scratch_bytes(s, 64));
  CommandList cmd(*g.device);
  cmd.begin();
  auto message = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const Act q{&dummy, 0, 1, 64};
  CHECK(message([&] { att.prefill(cmd, s, t, t, dummy.range(0, 16), q, cache, q, 1); })
            .find("needs their buffer (4 f32, one per head)") != std::string::npos);
  CHECK(message([&] { att.decode(cmd, s, t, t, dummy.range(0, 16), q, cache, q, scratch.range()); })
            .find("needs their buffer") != std::string::npos);
  cmd.end();
}

TEST_CASE("fused decode: every scheme against the reference, both decode kernels, default and small splits") {
  struct K {
    Kind kind;
    uint32_t W, window, sinks;
  };
  const K kinds[] = {{Kind::rope_rotated, 0, 0, 0}, {Kind::rope_raw, 0, 0, 0},     {Kind::yarn_af, 0, 0, 0},
                     {Kind::rerope, 40, 0, 0},      {Kind::leaky, 40, 0, 0},        {Kind::self_extend, 40, 0, 0},
                     {Kind::logn, 0, 0, 0},         {Kind::key_norm, 0, 0, 0},      {Kind::query_norm, 0, 0, 0},
                     {Kind::cos_norm, 0, 0, 0},     {Kind::window_sinks, 0, 50, 3}, {Kind::window_rerope, 30, 70, 2},
                     {Kind::nope, 0, 0, 0},         {Kind::alibi, 0, 0, 0}};
  const std::pair<uint32_t, uint32_t> shapes[] = {{16, 1}, {64, 2}};
  for_sample("fused every scheme", {std::size(kinds), 2, std::size(shapes)}, 2, [&](const SweepPick& p) {
    const K& k = kinds[p[0]];
    const auto [d, hkv] = shapes[p[2]];
    Harness h{make_scheme(k.kind, 4, hkv, d, k.W, k.window, k.sinks), 100, {100}, 24,
              p[1] == 1 ? small_tiles() : AttentionTuning{}};
    h.fused = true;
    h.rotated_keys = p[2] == 0;   // dual-branch layers with and without the pre-rotated key cache
    h.seed = 31 + d;
    check_within_tolerance(h);
  });
}

TEST_CASE("fused decode: one recorded command buffer over 150 positions, many splits, rings wrapping") {
  // 150 submissions of one recorded dispatch: a counter not reset by its
  // merging workgroup would stop every later merge (stale outputs).  Rings of
  // the shortest length decode allows (the window) and longer, with and without
  // sinks, wrap several times.
  struct C {
    Kind kind;
    uint32_t Hkv, window, sinks, ring;
  };
  const C cases[] = {{Kind::rope_rotated, 2, 0, 0, 0}, {Kind::window_sinks, 1, 40, 3, 40},
                     {Kind::window_sinks, 2, 40, 0, 72}, {Kind::window_rerope, 2, 40, 2, 40}};
  for (const C& c : cases) {
    // One-token prefill chunks: a ring as short as the window holds no longer chunk.
    Harness h{make_scheme(c.kind, 4, c.Hkv, 16, 24, c.window, c.sinks), 3, {1, 1, 1}, 150, small_tiles()};
    h.ring = c.ring;
    h.fused = true;
    check_within_tolerance(h);
  }
}

TEST_CASE("fused decode: GQA groups split into head chunks (lanes kernel), SmolLM2's and gpt-oss's shapes") {
  struct G {
    uint32_t H, Hkv, d;
  };
  const G groups[] = {G{9, 3, 64}, G{5, 1, 128}, G{8, 1, 64}};
  for (const G& gq : groups) {
    Harness h{make_scheme(Kind::rope_rotated, gq.H, gq.Hkv, gq.d), 150, {150}, 3};
    h.fused = true;
    check_within_tolerance(h);
    // Sink logits with gpt-oss's group of 8, the family that has them: each shape is its own lanes
    // pipeline, which llvmpipe takes seconds to compile (cold, the case took 66 s with all three).
    if (gq.H != 8) continue;
    Harness s{make_scheme(Kind::window_sinks, gq.H, gq.Hkv, gq.d, 0, 128, 0), 150, {150}, 3};
    s.fused = true;
    s.sink_logits = sink_logits(gq.H, 41);
    check_within_tolerance(s);
  }
}

TEST_CASE("fused decode: layers it cannot serve are named, not run") {
  Gpu& g = gpu();
  Attention att(*g.device);
  // A ring over a window of 1: the step's only readable row is the one it overwrites.
  const AttentionSpec s = make_scheme(Kind::window_sinks, 4, 2, 16, 0, 1, 0).spec;
  Buffer dummy = g.zeros(1 << 16);
  LayerCache ring{&dummy, &dummy, 1000, nullptr, 4};
  CHECK_FALSE(att.fused_decode_supported(s, ring));
  LayerCache full{&dummy, &dummy, 100};
  CHECK(att.fused_decode_supported(s, full));
  RopeTable t{&dummy, 64, 8};
  Buffer scratch = g.zeros(att.decode_scratch_bytes(s, 1000));
  CommandList cmd(*g.device);
  cmd.begin();
  const Act q{&dummy, 0, 1, 64}, kv{&dummy, 0, 1, 32};
  std::string msg = "no error";
  try {
    att.decode_fused(cmd, s, t, t, dummy.range(0, 16), q, kv, kv, ring, q, scratch.range());
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("use kv_store + decode") != std::string::npos);
  cmd.end();
}
