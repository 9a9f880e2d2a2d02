// Batched decode (Attention::decode_fused over DecodeRows, and without the fused step kv_store + decode
// over the same rows): the rows of a decode batch, sequences of one paged pool each at its own position
// with its own block table, attend in one dispatch (two, and the combine, unfused).  Each row's
// output against the float64 reference over its own keys (tests/support/attention_reference, kTol as for
// one sequence), and bit for bit what the same kernel gives that row alone: the row index only moves
// where a workgroup reads and writes, never the arithmetic.  The pool's blocks are shuffled among the
// sequences and start NaN, so a row reading another row's table, keys or scratch poisons its output.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "kernels/attention.hpp"
#include "tests/support/attention_harness.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"

using namespace reach;
using namespace reach::test;

namespace {

struct Case {
  Kind kind;
  uint32_t H, Hkv, d, W = 0, window = 0, sinks = 0;
  bool sink_logits = false;
};

// Sequences with prompts of `prompts` tokens, then `steps` batched steps, every variant the device runs.
void check_batched(const Case& c, const std::vector<uint32_t>& prompts, uint32_t steps, uint32_t B) {
  Gpu& g = gpu();
  Scheme s = make_scheme(c.kind, c.H, c.Hkv, c.d, c.W, c.window, c.sinks);
  std::vector<float> sink_values;
  if (c.sink_logits) {
    sink_values = random_floats(c.H, 77, -1.f, 2.f);
    s.spec = s.spec.with_sink_logits();
    s.ref.sink_logits.assign(sink_values.begin(), sink_values.end());
  }
  const AttentionSpec& a = s.spec;
  const uint32_t R = uint32_t(prompts.size()), qd = c.H * c.d, kvd = c.Hkv * c.d;
  const uint32_t longest = *std::max_element(prompts.begin(), prompts.end()) + steps;
  const uint32_t cap = longest + 3, table_len = (cap + B - 1) / B, pool_blocks = R * table_len + 1;
  const uint32_t positions = cap + uint32_t(std::max(0, a.q2_const)) + 2;
  Buffer t1buf, t2buf;
  RopeTable t1{}, t2{};
  if (a.rope) {
    t1buf = g.upload_f32(make_table(s.ref.inv_freq, s.af, positions), Arena::weights, "table1");
    t1 = {&t1buf, positions, a.rotary_dim / 2};
    if (a.branch2_table2) {
      std::vector<double> inv2 = s.ref.inv_freq;
      for (double& f : inv2) f /= s.ref.leaky_k;
      t2buf = g.upload_f32(make_table(inv2, s.af, positions), Arena::weights, "table2");
      t2 = {&t2buf, positions, a.rotary_dim / 2};
    }
  }
  // Every sequence's block table: a shuffled share of the pool.
  std::vector<uint32_t> ids(pool_blocks);
  for (uint32_t b = 0; b < pool_blocks; ++b) ids[b] = b;
  uint64_t x = 0x2545f4914f6cdd1dull;
  for (uint32_t b = pool_blocks - 1; b > 0; --b) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(ids[b], ids[uint32_t((x >> 33) % (b + 1))]);
  }
  std::vector<std::vector<uint32_t>> tables(R);
  for (uint32_t r = 0; r < R; ++r) tables[r].assign(ids.begin() + r * table_len, ids.begin() + (r + 1) * table_len);
  std::vector<std::vector<float>> q(R), k(R), v(R);
  for (uint32_t r = 0; r < R; ++r) {
    const uint32_t total = prompts[r] + steps;
    q[r] = random_floats(size_t(total) * qd, 100 + r, -2.f, 2.f);
    k[r] = random_floats(size_t(total) * kvd, 200 + r, -1.f, 1.f);
    v[r] = random_floats(size_t(total) * kvd, 300 + r, -1.f, 1.f);
  }
  const uint32_t rows = pool_blocks * B;
  const std::vector<uint8_t> nan(size_t(c.Hkv) * rows * 4 * c.d, 0xff);
  Buffer kc = g.upload_bytes(nan.data(), nan.size(), Arena::cache, "k pool");
  Buffer vc = g.upload_bytes(nan.data(), nan.size(), Arena::cache, "v pool");
  LayerCache cache{&kc, &vc, cap};
  cache.block_rows = B, cache.pool_rows = rows;
  Buffer sinkb;
  BufferRange sinks{};
  if (c.sink_logits) sinkb = g.upload_f32(sink_values, Arena::weights, "sinks"), sinks = sinkb.range();

  const uint64_t one_step = paged_step_bytes(table_len), step_stride = (one_step + 15) / 16 * 16;
  auto record = [&](uint32_t r, uint32_t pos, uint32_t n) {
    std::vector<uint32_t> st = {pos, n, table_len, 0};
    st.insert(st.end(), tables[r].begin(), tables[r].end());
    return st;
  };
  // The prompts, each through kv_store with its own table.
  for (uint32_t r = 0; r < R; ++r) {
    const uint32_t n = prompts[r];
    Buffer st = g.upload_bytes(record(r, 0, n).data(), one_step, Arena::scratch, "step");
    Buffer kb = g.upload_f32(std::vector<float>(k[r].begin(), k[r].begin() + size_t(n) * kvd));
    Buffer vb = g.upload_f32(std::vector<float>(v[r].begin(), v[r].begin() + size_t(n) * kvd));
    CommandList cmd(*g.device);
    cmd.begin();
    Attention(*g.device).kv_store(cmd, a, t1, st.range(), Act{&kb, 0, n, kvd}, Act{&vb, 0, n, kvd}, cache);
    cmd.end();
    cmd.run();
  }
  for (uint32_t variant : {1u, 2u}) {
    AttentionTuning tv;
    tv.decode_variant = variant;
    Attention att(*g.device, tv);
    if (variant == 2 && !att.lanes_decode_supported()) continue;
    REQUIRE(att.fused_decode_supported(a, cache));
    CAPTURE(variant);
    const uint64_t one_scratch = att.decode_scratch_bytes(a, cap), scratch_stride = (one_scratch + 15) / 16 * 16 + 16;
    Buffer steps_buf = g.zeros(R * step_stride, "steps");
    Buffer scratch = g.zeros(R * scratch_stride, "scratch");
    Buffer qb = g.zeros(size_t(R) * qd * 4, "q"), kb = g.zeros(size_t(R) * kvd * 4, "k");
    Buffer vb = g.zeros(size_t(R) * kvd * 4, "v"), ob = g.zeros(size_t(R) * qd * 4, "out");
    CommandList batched(*g.device);   // recorded once: only the steps and rows change
    batched.begin();
    att.decode_fused(batched, a, t1, t2, steps_buf.range(), Act{&qb, 0, R, qd}, Act{&kb, 0, R, kvd},
                     Act{&vb, 0, R, kvd}, cache, Act{&ob, 0, R, qd}, scratch.range(), sinks, {},
                     DecodeRows{R, step_stride, scratch_stride});
    batched.end();
    Buffer one_step_buf = g.zeros(step_stride, "step"), one_scratch_buf = g.zeros(one_scratch, "scratch");
    Buffer oq = g.zeros(size_t(qd) * 4), ok = g.zeros(size_t(kvd) * 4), ov = g.zeros(size_t(kvd) * 4);
    Buffer oo = g.zeros(size_t(qd) * 4);
    CommandList alone(*g.device);
    alone.begin();
    att.decode_fused(alone, a, t1, t2, one_step_buf.range(), Act{&oq, 0, 1, qd}, Act{&ok, 0, 1, kvd},
                     Act{&ov, 0, 1, kvd}, cache, Act{&oo, 0, 1, qd}, one_scratch_buf.range(), sinks);
    alone.end();
    // Without the fused step: one kv_store and one split-K decode (with its combine) for all rows, and the
    // same two for one row alone.
    const DecodeRows drows{R, step_stride, scratch_stride};
    Buffer scratch_u = g.zeros(R * scratch_stride, "scratch unfused"), obu = g.zeros(size_t(R) * qd * 4, "out");
    CommandList unfused(*g.device);
    unfused.begin();
    att.kv_store(unfused, a, t1, steps_buf.range(), Act{&kb, 0, R, kvd}, Act{&vb, 0, R, kvd}, cache, drows);
    unfused.barrier();
    att.decode(unfused, a, t1, t2, steps_buf.range(), Act{&qb, 0, R, qd}, cache, Act{&obu, 0, R, qd},
               scratch_u.range(), sinks, drows);
    unfused.end();
    Buffer oou = g.zeros(size_t(qd) * 4), one_scratch_u = g.zeros(one_scratch, "scratch");
    CommandList alone_u(*g.device);
    alone_u.begin();
    att.kv_store(alone_u, a, t1, one_step_buf.range(), Act{&ok, 0, 1, kvd}, Act{&ov, 0, 1, kvd}, cache);
    alone_u.barrier();
    att.decode(alone_u, a, t1, t2, one_step_buf.range(), Act{&oq, 0, 1, qd}, cache, Act{&oou, 0, 1, qd},
               one_scratch_u.range(), sinks);
    alone_u.end();
    double worst = 0, worst_u = 0;
    uint64_t differ = 0, differ_u = 0;
    for (uint32_t t = 0; t < steps; ++t) {
      std::vector<uint8_t> st(R * step_stride, 0);
      for (uint32_t r = 0; r < R; ++r) {
        const uint32_t p = prompts[r] + t;
        const std::vector<uint32_t> rec = record(r, p, 1);
        std::memcpy(st.data() + r * step_stride, rec.data(), rec.size() * 4);
        g.transfer->upload(qb, uint64_t(r) * qd * 4, q[r].data() + size_t(p) * qd, qd * 4);
        g.transfer->upload(kb, uint64_t(r) * kvd * 4, k[r].data() + size_t(p) * kvd, kvd * 4);
        g.transfer->upload(vb, uint64_t(r) * kvd * 4, v[r].data() + size_t(p) * kvd, kvd * 4);
      }
      g.transfer->upload(steps_buf, 0, st.data(), st.size());
      batched.run();
      const std::vector<float> out = g.download_f32(ob, size_t(R) * qd);
      unfused.run();   // stores the same keys again: the cache is unchanged
      const std::vector<float> out_u = g.download_f32(obu, size_t(R) * qd);
      for (uint32_t r = 0; r < R; ++r) {
        const uint32_t p = prompts[r] + t;
        std::vector<int64_t> qp = {p}, kp(p + 1);
        for (uint32_t m = 0; m <= p; ++m) kp[m] = m;
        const std::vector<float> qs(q[r].begin() + size_t(p) * qd, q[r].begin() + size_t(p + 1) * qd);
        const std::vector<float> ks(k[r].begin(), k[r].begin() + size_t(p + 1) * kvd);
        const std::vector<float> vs(v[r].begin(), v[r].begin() + size_t(p + 1) * kvd);
        const std::vector<double> ref =
            attention_reference(qs, ks, vs, qp, kp, int(c.H), int(c.Hkv), int(c.d), s.ref);
        worst = std::max(worst, max_abs(out, ref, size_t(r) * qd, qd));
        worst_u = std::max(worst_u, max_abs(out_u, ref, size_t(r) * qd, qd));
        // The same row alone (it stores the same key again: the cache is unchanged).
        const std::vector<uint32_t> rec = record(r, p, 1);
        g.transfer->upload(one_step_buf, 0, rec.data(), rec.size() * 4);
        g.transfer->upload(oq, 0, qs.data(), qd * 4);
        g.transfer->upload(ok, 0, k[r].data() + size_t(p) * kvd, kvd * 4);
        g.transfer->upload(ov, 0, v[r].data() + size_t(p) * kvd, kvd * 4);
        alone.run();
        const std::vector<float> single = g.download_f32(oo, qd);
        differ += std::memcmp(single.data(), out.data() + size_t(r) * qd, qd * 4) != 0;
        alone_u.run();
        const std::vector<float> single_u = g.download_f32(oou, qd);
        differ_u += std::memcmp(single_u.data(), out_u.data() + size_t(r) * qd, qd * 4) != 0;
      }
    }
    MESSAGE(s.name << ", variant " << variant << ", " << R << " rows: worst error " << worst << " fused, "
                   << worst_u << " unfused");
    CHECK(worst <= kTol);
    CHECK(differ == 0);
    CHECK(worst_u <= kTol);
    CHECK(differ_u == 0);
  }
}

}  // namespace

TEST_CASE("batched decode: rows at their own positions and block tables, one dispatch, as each row alone") {
  // Prompts end inside, at and past block boundaries (blocks of 8); 3 steps cross more.
  const std::vector<uint32_t> prompts = {5, 16, 23, 1};
  check_batched({Kind::rope_rotated, 4, 2, 16}, prompts, 3, 8);
  // SmolLM2's head shape (9 query heads on 3 kv heads, d 64): the lanes kernel's head chunks per row.
  check_batched({Kind::rope_rotated, 9, 3, 64}, {40, 7, 18}, 2, 16);
  // Dual-branch ReRoPE on raw keys, a window with sinks, and gpt-oss's sink logits: each row's scheme
  // state comes from its own position.
  check_batched({Kind::rerope, 4, 2, 16, 12}, prompts, 3, 8);
  check_batched({Kind::window_sinks, 4, 2, 16, 0, 12, 2}, prompts, 3, 8);
  check_batched({Kind::rope_rotated, 4, 1, 16, 0, 0, 0, true}, prompts, 2, 8);
}
