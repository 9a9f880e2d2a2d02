// The C API's KV pool (reach_kv_pool_*): sessions in one pool generate what sessions with a cache of
// their own generate, a shared prompt is stored once, a full pool refuses a step with every session
// intact and serves again when a session ends, cached blocks are evicted when needed, a session that
// rewinds into a shared block copies it before writing, a windowed session gives back the blocks behind
// its window, and misuse returns codes with messages.
#include <doctest/doctest.h>
#include <reach.h>

#include <string>
#include <vector>

#include "tests/support/capi_check.hpp"

using namespace reach::test::capi;

namespace {

struct Fixture {
  reach_device* dev = nullptr;
  reach_model* model = nullptr;
  int32_t vocab = 0;
  Fixture() {
    reach_set_log_callback(on_log, nullptr);
    g_vulkan_errors = 0;
    const std::string dir = tiny();
    REQUIRE_OK(reach_device_create(env_params(), &dev));
    REQUIRE_OK(reach_model_load(dev, dir.c_str(), nullptr, &model));
    reach_model_info info{};
    info.size = sizeof info;
    REQUIRE_OK(reach_model_get_info(model, &info));
    vocab = info.vocab_size;
  }
  ~Fixture() {
    CHECK(reach_model_free(model) == REACH_OK);
    CHECK(reach_device_free(dev) == REACH_OK);
    CHECK(g_vulkan_errors == 0);
  }
  // n ids of a pattern `seed` picks, inside the vocabulary.
  std::vector<int32_t> prompt(size_t n, int32_t seed) const {
    std::vector<int32_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = int32_t((i * 7 + size_t(seed) * 13 + 3) % size_t(vocab));
    return ids;
  }
};

reach_session_params greedy_params() {
  reach_session_params sp = reach_session_default_params();
  sp.context = 64;
  sp.sampling.temperature = 0;
  return sp;
}

reach_kv_pool* make_pool(reach_model* m, uint32_t tokens, uint32_t block_rows) {
  reach_kv_pool_params pp = reach_kv_pool_default_params();
  pp.tokens = tokens;
  pp.block_rows = block_rows;
  reach_kv_pool* pool = nullptr;
  REQUIRE_OK(reach_kv_pool_create(m, &pp, &pool));
  return pool;
}

reach_session* pooled(reach_kv_pool* pool) {
  const reach_session_params sp = greedy_params();
  reach_session* s = nullptr;
  REQUIRE_OK(reach_session_create_in_pool(pool, &sp, &s));
  return s;
}

reach_kv_pool_info info_of(const reach_kv_pool* pool) {
  reach_kv_pool_info info{};
  info.size = sizeof info;
  REQUIRE_OK(reach_kv_pool_get_info(pool, &info));
  return info;
}


// A session with a KV cache of its own: the reference the pooled ones must equal.
std::vector<int32_t> generate_alone(reach_model* m, const std::vector<int32_t>& ids, int n) {
  const reach_session_params sp = greedy_params();
  reach_session* s = nullptr;
  REQUIRE_OK(reach_session_create(m, &sp, &s));
  std::vector<int32_t> out = generate_sync(s, ids, n);
  REQUIRE_OK(reach_session_free(s));
  return out;
}

uint32_t position_of(const reach_session* s) {
  uint32_t pos = 0;
  REQUIRE_OK(reach_session_position(s, &pos, nullptr));
  return pos;
}

}  // namespace

TEST_CASE("capi kv pool: pooled sessions generate as sessions of their own; a shared prompt is stored once") {
  Fixture f;
  constexpr uint32_t kBlock = 4;
  constexpr int kSteps = 8;
  const std::vector<int32_t> ids = f.prompt(18, 1);   // 4 full blocks the next prompt can map, then 2 rows
  const std::vector<int32_t> want = generate_alone(f.model, ids, kSteps);

  reach_kv_pool* pool = make_pool(f.model, 64, kBlock);
  const reach_kv_pool_info empty = info_of(pool);
  CHECK(empty.block_rows == kBlock);
  CHECK(empty.blocks == 16);
  CHECK(empty.blocks_used == 0);
  CHECK(empty.bytes == uint64_t(empty.blocks) * kBlock * empty.bytes_per_token);

  reach_session* a = pooled(pool);
  CHECK(generate_sync(a, ids, kSteps) == want);
  const uint32_t a_blocks = info_of(pool).blocks_used;
  CHECK(a_blocks == (ids.size() + kSteps - 1 + kBlock - 1) / kBlock);
  CHECK(info_of(pool).prefix_hits == 0);

  // The same prompt maps a's 4 full blocks (never the one holding the last token: its logits are
  // computed) and generates the same tokens.
  reach_session* b = pooled(pool);
  CHECK(generate_sync(b, ids, kSteps) == want);
  const reach_kv_pool_info shared = info_of(pool);
  CHECK(shared.prefix_hits == 1);
  CHECK(shared.prefix_hit_tokens == 16);
  CHECK(shared.sessions == 2);
  // b also generated a's tokens, so each block it filled was a's twin: it shares those too and holds
  // only its partial last block.
  CHECK(shared.blocks_used == a_blocks + 1);

  // Batched decode over pooled sessions steps each as it would step alone.
  reach_session* c = pooled(pool);
  const std::vector<int32_t> other = f.prompt(9, 2);
  const std::vector<int32_t> want_other = generate_alone(f.model, other, 4);
  REQUIRE_OK(reach_session_prefill(c, other.data(), other.size()));
  std::vector<int32_t> got_other(1);
  REQUIRE_OK(reach_session_sample(c, &got_other[0], nullptr));
  const uint32_t b_before = position_of(b);
  for (int t = 1; t < 4; ++t) {
    int32_t next_b = 0;
    REQUIRE_OK(reach_session_sample(b, &next_b, nullptr));
    reach_session* both[2] = {b, c};
    const int32_t toks[2] = {next_b, got_other.back()};
    REQUIRE_OK(reach_batch_decode(both, toks, 2));
    REQUIRE_OK(reach_session_sample(c, &next_b, nullptr));
    got_other.push_back(next_b);
  }
  CHECK(got_other == want_other);
  CHECK(position_of(b) == b_before + 3);

  // Freed sessions give their blocks back; their full blocks stay cached for a later prompt.
  REQUIRE_OK(reach_session_free(a));
  REQUIRE_OK(reach_session_free(b));
  REQUIRE_OK(reach_session_free(c));
  const reach_kv_pool_info after = info_of(pool);
  CHECK(after.blocks_used == 0);
  CHECK(after.blocks_cached > 0);
  CHECK(after.sessions == 0);
  reach_session* d = pooled(pool);
  CHECK(generate_sync(d, ids, kSteps) == want);
  CHECK(info_of(pool).prefix_hit_tokens == 32);
  REQUIRE_OK(reach_session_free(d));
  REQUIRE_OK(reach_kv_pool_free(pool));
}

TEST_CASE("capi kv pool: a full pool refuses the step, every session intact, and serves once a session ends") {
  Fixture f;
  constexpr uint32_t kBlock = 4;
  reach_kv_pool* pool = make_pool(f.model, 32, kBlock);   // 8 blocks
  reach_session* a = pooled(pool);
  reach_session* b = pooled(pool);
  const std::vector<int32_t> pa = f.prompt(20, 3), pb = f.prompt(20, 4), pc = f.prompt(8, 5);
  const std::vector<int32_t> want_a = generate_alone(f.model, pa, 10);

  REQUIRE_OK(reach_session_prefill(a, pa.data(), pa.size()));   // 5 blocks
  std::vector<int32_t> got_a(1);
  REQUIRE_OK(reach_session_sample(a, &got_a[0], nullptr));
  CHECK_FAILS(reach_session_prefill(b, pb.data(), pb.size()), REACH_ERROR_KV_POOL_FULL);   // 5 more: 3 free
  CHECK(std::string(reach_last_error()).find("the KV pool is full") != std::string::npos);
  CHECK(position_of(b) == 0);
  CHECK(info_of(pool).blocks_used == 5);
  const float* logits = nullptr;
  size_t count = 0;
  CHECK_FAILS(reach_session_logits(b, &logits, &count), REACH_ERROR_INVALID_STATE);   // b never ran

  REQUIRE_OK(reach_session_prefill(b, pc.data(), pc.size()));   // 2 blocks: 1 left
  // a's 5 blocks are full (rows 0..19): it takes the last free one for rows 20..23; row 24 finds none.
  auto step_a = [&] {
    int32_t next = 0;
    REQUIRE_OK(reach_session_step(a, got_a.back(), &next, nullptr));
    got_a.push_back(next);
  };
  while (position_of(a) < 24) step_a();
  CHECK(info_of(pool).blocks_used == 8);
  int32_t next = 0;
  CHECK_FAILS(reach_session_step(a, got_a.back(), &next, nullptr), REACH_ERROR_KV_POOL_FULL);
  CHECK(position_of(a) == 24);
  REQUIRE_OK(reach_session_logits(a, &logits, &count));   // refused before it ran: the logits stay
  reach_session* both[2] = {b, a};
  int32_t b_next = 0;
  REQUIRE_OK(reach_session_sample(b, &b_next, nullptr));
  const int32_t toks[2] = {b_next, got_a.back()};
  CHECK_FAILS(reach_batch_decode(both, toks, 2), REACH_ERROR_KV_POOL_FULL);
  CHECK(position_of(a) == 24);

  // b ends: its 2 full blocks stay cached, and a goes on as if alone, evicting them as it needs blocks
  // (none is free).
  REQUIRE_OK(reach_session_free(b));
  CHECK(info_of(pool).blocks_cached == 2);
  step_a();   // row 24
  CHECK(info_of(pool).blocks_cached == 1);
  while (got_a.size() < want_a.size()) step_a();   // up to row 28
  CHECK(got_a == want_a);
  CHECK(info_of(pool).blocks_cached == 0);
  CHECK(info_of(pool).blocks_used == 8);   // rows 0..28: every block a's
  REQUIRE_OK(reach_session_free(a));
  REQUIRE_OK(reach_kv_pool_free(pool));
}

TEST_CASE("capi kv pool: a session that rewinds into a shared block copies it; the other keeps its keys") {
  Fixture f;
  constexpr uint32_t kBlock = 4;
  constexpr int kSteps = 10;
  const std::vector<int32_t> ids = f.prompt(14, 6);   // 3 full blocks to share
  const std::vector<int32_t> want = generate_alone(f.model, ids, kSteps);
  std::vector<int32_t> fork(ids.begin(), ids.begin() + 6);
  const std::vector<int32_t> tail = f.prompt(5, 7);
  fork.insert(fork.end(), tail.begin(), tail.end());
  const std::vector<int32_t> want_fork = generate_alone(f.model, fork, kSteps);

  reach_kv_pool* pool = make_pool(f.model, 64, kBlock);
  reach_session* a = pooled(pool);
  REQUIRE_OK(reach_session_prefill(a, ids.data(), ids.size()));
  reach_session* b = pooled(pool);
  REQUIRE_OK(reach_session_prefill(b, ids.data(), ids.size()));
  CHECK(info_of(pool).prefix_hit_tokens == 12);
  // b rewinds into the second shared block (rows 4..7) and writes other tokens from row 6 on.
  REQUIRE_OK(reach_session_rewind(b, 6));
  CHECK(generate_sync(b, tail, kSteps) == want_fork);
  // a's rows 4..7 were not touched: it generates as it would alone.
  const std::vector<int32_t> got = continue_greedy(a, kSteps);
  CHECK(got == want);
  REQUIRE_OK(reach_session_free(a));
  REQUIRE_OK(reach_session_free(b));
  REQUIRE_OK(reach_kv_pool_free(pool));
}

TEST_CASE("capi kv pool: a windowed session runs a prompt longer than the pool, as a full cache does") {
  Fixture f;
  reach_kv_pool* pool = make_pool(f.model, 48, 4);   // 12 blocks of 4
  reach_session_params sp = greedy_params();
  sp.attn_window = 8;
  sp.attn_sinks = 2;
  sp.chunk = 8;   // a chunk's rows are written at once: the window and a chunk must fit
  reach_session* s = nullptr;
  REQUIRE_OK(reach_session_create_in_pool(pool, &sp, &s));
  const std::vector<int32_t> ids = f.prompt(56, 9);   // more rows than the pool has
  sp.full_kv = 1;   // every position: the reference
  reach_session* alone = nullptr;
  REQUIRE_OK(reach_session_create(f.model, &sp, &alone));
  CHECK(generate_sync(s, ids, 6) == generate_sync(alone, ids, 6));
  CHECK(info_of(pool).blocks_used < info_of(pool).blocks);
  CHECK_FAILS(reach_session_rewind(s, 10), REACH_ERROR_INVALID_ARGUMENT);   // its keys went back to the pool
  REQUIRE_OK(reach_session_free(alone));
  REQUIRE_OK(reach_session_free(s));
  REQUIRE_OK(reach_kv_pool_free(pool));
}

TEST_CASE("capi kv pool: sizes in bytes, rotated keys, and misuse return codes with messages") {
  Fixture f;
  reach_kv_pool* pool = make_pool(f.model, 64, 0);
  const reach_kv_pool_info by_tokens = info_of(pool);
  CHECK(by_tokens.block_rows == 16);
  CHECK(by_tokens.blocks == 4);

  // The bytes of 2.5 blocks hold 2 whole ones.
  reach_kv_pool_params pp = reach_kv_pool_default_params();
  pp.bytes = by_tokens.bytes_per_token * 40;
  reach_kv_pool* by_bytes = nullptr;
  REQUIRE_OK(reach_kv_pool_create(f.model, &pp, &by_bytes));
  CHECK(info_of(by_bytes).blocks == 2);
  CHECK(info_of(by_bytes).bytes <= pp.bytes);
  REQUIRE_OK(reach_kv_pool_free(by_bytes));
  pp.bytes = by_tokens.bytes_per_token * 15;   // not one block
  CHECK_FAILS(reach_kv_pool_create(f.model, &pp, &by_bytes), REACH_ERROR_INVALID_ARGUMENT);
  CHECK(by_bytes == nullptr);

  // Sessions in the pool use its cache types, whatever their params say.
  reach_session_params sp = greedy_params();
  sp.cache_type_k = REACH_KV_F32;
  reach_session* s = nullptr;
  REQUIRE_OK(reach_session_create_in_pool(pool, &sp, &s));
  CHECK_FAILS(reach_kv_pool_free(pool), REACH_ERROR_INVALID_STATE);   // a session still uses it
  CHECK_FAILS(reach_model_free(f.model), REACH_ERROR_INVALID_STATE);
  REQUIRE_OK(reach_session_free(s));
  CHECK_FAILS(reach_model_free(f.model), REACH_ERROR_INVALID_STATE);  // the pool is alive

  // ReRoPE's window branch reads rotated keys: a pool without them refuses the session, naming them.
  sp = greedy_params();
  sp.rope_scaling = "rerope";
  sp.rerope_window = 8;
  CHECK_FAILS(reach_session_create_in_pool(pool, &sp, &s), REACH_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(reach_last_error()).find("rotated_keys") != std::string::npos);
  CHECK(s == nullptr);
  pp = reach_kv_pool_default_params();
  pp.tokens = 64;
  pp.rotated_keys = 1;
  reach_kv_pool* rotated = nullptr;
  REQUIRE_OK(reach_kv_pool_create(f.model, &pp, &rotated));
  CHECK(info_of(rotated).bytes_per_token > by_tokens.bytes_per_token);
  REQUIRE_OK(reach_session_create_in_pool(rotated, &sp, &s));
  const std::vector<int32_t> ids = f.prompt(20, 8);
  reach_session* alone = nullptr;
  REQUIRE_OK(reach_session_create(f.model, &sp, &alone));
  CHECK(generate_sync(s, ids, 6) == generate_sync(alone, ids, 6));
  REQUIRE_OK(reach_session_free(alone));
  REQUIRE_OK(reach_session_free(s));
  REQUIRE_OK(reach_kv_pool_free(rotated));

  // Bad params.
  reach_kv_pool* bad = nullptr;
  CHECK_FAILS(reach_kv_pool_create(f.model, nullptr, &bad), REACH_ERROR_INVALID_ARGUMENT);   // no size
  pp = reach_kv_pool_default_params();
  pp.tokens = 64;
  pp.block_rows = 12;
  CHECK_FAILS(reach_kv_pool_create(f.model, &pp, &bad), REACH_ERROR_INVALID_ARGUMENT);
  pp.block_rows = 0;
  pp.cache_type_v = 9;
  CHECK_FAILS(reach_kv_pool_create(f.model, &pp, &bad), REACH_ERROR_INVALID_ARGUMENT);
  pp = reach_kv_pool_default_params();
  pp.tokens = 1u << 30;   // far more than the device holds: the message names the size that fits
  CHECK_FAILS(reach_kv_pool_create(f.model, &pp, &bad), REACH_ERROR_OUT_OF_MEMORY);
  pp.size = 0;
  CHECK_FAILS(reach_kv_pool_create(f.model, &pp, &bad), REACH_ERROR_INVALID_ARGUMENT);
  CHECK(bad == nullptr);
  CHECK_FAILS(reach_kv_pool_create(nullptr, &pp, &bad), REACH_ERROR_INVALID_ARGUMENT);
  CHECK_FAILS(reach_session_create_in_pool(nullptr, nullptr, &s), REACH_ERROR_INVALID_ARGUMENT);
  int not_a_handle = 0;
  CHECK_FAILS(reach_session_create_in_pool(reinterpret_cast<reach_kv_pool*>(&not_a_handle), nullptr, &s),
              REACH_ERROR_INVALID_ARGUMENT);
  reach_kv_pool_info info{};
  CHECK_FAILS(reach_kv_pool_get_info(pool, &info), REACH_ERROR_INVALID_ARGUMENT);   // size 0
  CHECK_FAILS(reach_kv_pool_get_info(pool, nullptr), REACH_ERROR_INVALID_ARGUMENT);
  CHECK(reach_kv_pool_free(nullptr) == REACH_OK);
  REQUIRE_OK(reach_kv_pool_free(pool));
  CHECK_FAILS(reach_kv_pool_free(pool), REACH_ERROR_INVALID_ARGUMENT);   // freed
  CHECK(std::string(reach_status_name(REACH_ERROR_KV_POOL_FULL)) == "REACH_ERROR_KV_POOL_FULL");
}
