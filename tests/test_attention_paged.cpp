// A paged KV cache (LayerCache::block_rows): the keys and values of a sequence
// live in pool blocks its block table names (in the step buffer, after
// StepParams).  Every kernel that reads or writes the cache (kv_store, prefill,
// both decode kernels, the fused decode step) goes through the table; the
// harness (tests/support/attention_harness.hpp) maps the sequence's blocks to a
// shuffled half of a NaN-filled pool, so a row read or written through a wrong
// block poisons an output.  Against the float64 reference of
// tests/support/attention_reference.cpp, tolerance kTol (1e-4) as for the
// contiguous cache: paging moves rows, not arithmetic.
#include <doctest/doctest.h>

#include <algorithm>

#include "base/error.hpp"
#include "kernels/attention.hpp"
#include "tests/support/attention_harness.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"

using namespace reach;
using namespace reach::test;

namespace {

// Prefill chunks of n tokens whose ends fall on 1, B - 1, B and B + 1 (the rows either side of the first
// block boundary), then the rest in chunks of up to 2B + 3 (later boundaries fall inside chunks).
std::vector<uint32_t> boundary_chunks(uint32_t B, uint32_t n) {
  std::vector<uint32_t> ends = {1, B - 1, B, B + 1};
  std::vector<uint32_t> chunks;
  uint32_t at = 0;
  for (uint32_t e : ends)
    if (e > at && e <= n) chunks.push_back(e - at), at = e;
  while (at < n) {
    const uint32_t len = std::min(n - at, 2 * B + 3);
    chunks.push_back(len), at += len;
  }
  return chunks;
}

}  // namespace

TEST_CASE("paged cache: the boundary chunks end where they should") {
  CHECK(boundary_chunks(8, 30) == std::vector<uint32_t>{1, 6, 1, 1, 19, 2});
  CHECK(boundary_chunks(1, 5) == std::vector<uint32_t>{1, 1, 3});   // ends 1, 2 (B+1); 0 and 1 repeat
  CHECK(boundary_chunks(16, 30) == std::vector<uint32_t>{1, 14, 1, 1, 13});
}

TEST_CASE("paged cache: every scheme through a fragmented block table, blocks of 1, 8 and 16 rows") {
  struct K {
    Kind kind;
    uint32_t W, window, sinks;
  };
  const K kinds[] = {{Kind::rope_rotated, 0, 0, 0}, {Kind::rope_raw, 0, 0, 0},     {Kind::yarn_af, 0, 0, 0},
                     {Kind::rerope, 12, 0, 0},      {Kind::leaky, 12, 0, 0},        {Kind::self_extend, 12, 0, 0},
                     {Kind::logn, 0, 0, 0},         {Kind::key_norm, 0, 0, 0},      {Kind::query_norm, 0, 0, 0},
                     {Kind::cos_norm, 0, 0, 0},     {Kind::window_sinks, 0, 20, 3}, {Kind::window_rerope, 10, 24, 2},
                     {Kind::nope, 0, 0, 0},         {Kind::alibi, 0, 0, 0}};
  const uint32_t blocks[] = {1, 8, 16};
  // Every scheme at least once with blocks of 8, fused and not; the rest sampled.
  std::vector<std::vector<size_t>> always;
  for (size_t k = 0; k < std::size(kinds); ++k) always.push_back({k, 1, k % 2});
  for_sample("paged every scheme", {std::size(kinds), std::size(blocks), 2}, 4, [&](const SweepPick& p) {
    const K& k = kinds[p[0]];
    const uint32_t B = blocks[p[1]], n = 30;
    // 20 decode steps from position 30 cross the boundaries at 32, 40 and 48.
    Harness h{make_scheme(k.kind, 4, 2, 16, k.W, k.window, k.sinks), n, boundary_chunks(B, n), 20};
    h.block_rows = B;
    h.fused = p[2] == 1;
    h.seed = 11 + uint32_t(p.flat);
    check_within_tolerance(h);
  }, always);
}

TEST_CASE("paged cache: storage-buffer reads, small splits, GQA head chunks and quantized rows") {
  // small_tiles(): the storage-buffer kernels GPUs run, and many decode splits per sequence.
  Harness s{make_scheme(Kind::rope_rotated, 4, 2, 16), 40, boundary_chunks(8, 40), 30, small_tiles()};
  s.block_rows = 8;
  check_within_tolerance(s);
  s.fused = true;
  check_within_tolerance(s);
  // SmolLM2's head shape (9 query heads on 3 kv heads, d 64): the lanes kernel splits the GQA group.
  Harness g{make_scheme(Kind::rope_rotated, 9, 3, 64), 70, {70}, 4};
  g.block_rows = 16;
  g.fused = true;
  check_within_tolerance(g);
  // q8_0 keys and q4_0 values: the row loaders take the pool row the table gives.
  Harness q{make_scheme(Kind::rope_rotated, 4, 2, 64), 33, boundary_chunks(16, 33), 5};
  q.k_type = KvType::q8_0;
  q.v_type = KvType::q4_0;
  q.block_rows = 16;
  q.decode_variants = {2};
  check_within_tolerance(q);
}

TEST_CASE("paged cache: misuse is rejected, naming what is wrong") {
  Gpu& g = gpu();
  Attention att(*g.device);
  const AttentionSpec s = make_scheme(Kind::rope_rotated, 4, 2, 16).spec;
  Buffer dummy = g.zeros(1 << 16);
  RopeTable t{&dummy, 64, 8};
  CommandList cmd(*g.device);
  cmd.begin();
  const Act kv{&dummy, 0, 1, 32};
  auto message = [&](const LayerCache& c, uint64_t step_bytes) -> std::string {
    try {
      att.kv_store(cmd, s, t, dummy.range(0, step_bytes), kv, kv, c);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  LayerCache c{&dummy, &dummy, 64};
  c.block_rows = 6, c.pool_rows = 96;
  CHECK(message(c, 1024).find("power-of-two row count, got 6") != std::string::npos);
  c.block_rows = 8, c.pool_rows = 100;
  CHECK(message(c, 1024).find("a pool of whole blocks, got 100 rows") != std::string::npos);
  c.pool_rows = 128;
  // Capacity 64 in blocks of 8: 8 table entries after the 16 bytes of StepParams.
  CHECK(message(c, paged_step_bytes(8) - 4).find("needs a step buffer of 48 bytes") != std::string::npos);
  CHECK(message(c, paged_step_bytes(8)) == "no error");
  LayerCache ring{&dummy, &dummy, 64, nullptr, 40};
  ring.block_rows = 8, ring.pool_rows = 128;
  const AttentionSpec w = make_scheme(Kind::window_sinks, 4, 2, 16, 0, 20, 0).spec;
  std::string msg = "no error";
  try {
    att.kv_store(cmd, w, t, dummy.range(0, 1024), kv, kv, ring);
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("has no ring") != std::string::npos);
  // A batched decode (DecodeRows, tests/test_attention_batched.cpp): rows of one paged cache, each row's
  // step record and scratch at a stride that holds one sequence's.
  const Act q2{&dummy, 0, 2, 64}, kv2{&dummy, 0, 2, 32};
  auto batched = [&](const LayerCache& cache, const DecodeRows& rows) -> std::string {
    try {
      att.decode_fused(cmd, s, t, t, dummy.range(0, 1024), q2, kv2, kv2, cache, q2, dummy.range(0, 1 << 14), {}, {},
                       rows);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(batched(LayerCache{&dummy, &dummy, 64}, {2, 64, 4096}).find("share a paged cache") != std::string::npos);
  CHECK(batched(c, {2, 16, 4096}).find("step records of at least 48 bytes") != std::string::npos);
  CHECK(batched(c, {3, 48, 4096}).find("q/out must be [3, 64]") != std::string::npos);
  CHECK(batched(c, {2, 48, 8}).find("rows' scratch 8 bytes apart") != std::string::npos);
  CHECK(batched(c, {2, 48, 4096}) == "no error");
  cmd.end();
}
