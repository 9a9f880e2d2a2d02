// Sessions over a paged KV pool (SessionOptions::kv_pool, runtime/session/kv_pool.hpp): a tiny model's
// logits against the independent NumPy reference, and bit for bit what a session with a cache of its own
// gives, alone, batched, after a shared prefix, after a rewind into shared blocks (copy-on-write); the
// pool's counters against counts made here; a full pool refusing a step and leaving every session intact.
//
// Bit equality is the expectation wherever the same rows go through the same kernels: paging changes
// which pool row a key lives in, never the arithmetic, and a shared prefix of whole prefill chunks was
// computed exactly as the sequence itself would have computed it.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "base/error.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/decode_batch.hpp"
#include "engine/device_profile.hpp"
#include "runtime/session/kv_pool.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/data.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;

namespace {

const char* kModel = "--dtype f32 --hidden 128 --intermediate 192 --layers 2 --heads 2 --kv-heads 1 --vocab 300 --seed 5";
constexpr uint32_t kVocab = 300;

SessionOptions opts(std::shared_ptr<KvPool> pool = nullptr, uint32_t context = 128) {
  SessionOptions o;
  o.context = context;
  o.chunk = 16;
  o.kv_pool = std::move(pool);
  if (o.kv_pool) o.cache_type_k = o.kv_pool->options().cache_type_k, o.cache_type_v = o.kv_pool->options().cache_type_v;
  return o;
}

std::shared_ptr<KvPool> make_pool(Model& m, uint32_t tokens, uint32_t block_rows, KvType t = KvType::f32,
                                  bool calibrate_keys = true) {
  KvPoolOptions po;
  po.tokens = tokens;
  po.block_rows = block_rows;
  po.cache_type_k = po.cache_type_v = t;
  po.calibrate_keys = calibrate_keys;
  return std::make_shared<KvPool>(m, po);
}

bool same(std::span<const float> a, std::span<const float> b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

// Layer 0's mu and s (KeyCalibration::read after the header): what two caches calibrated from the same rows
// share even when one keeps exact rows (a session of its own) and the other does not (a pool), which
// changes what later layers see.  (A pool's statistics also stop at its first chunk, where a session of
// its own goes on taking them.)
bool same_first_calibration(const KeyCalibration& a, const KeyCalibration& b) {
  const std::vector<float> x = a.read(0), y = b.read(0);
  return std::equal(x.begin() + 4, x.begin() + 4 + 2 * 64, y.begin() + 4);   // kModel: one kv head of 64
}

std::span<const int32_t> first(const std::vector<int32_t>& v, size_t n) { return {v.data(), n}; }

int32_t argmax(std::span<const float> x) { return int32_t(std::max_element(x.begin(), x.end()) - x.begin()); }

}  // namespace

TEST_CASE("kv pool: a paged session against the reference, and bit for bit a session of its own") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  const std::vector<int32_t> ids = random_ids(60, kVocab, 9);
  const Reference ref = reference_forward(dir, ids);
  for (uint32_t B : {1u, 8u, 16u}) {
    CAPTURE(B);
    auto pool = make_pool(*model, 256, B);
    Session paged(*model, opts(pool)), own(*model, opts());
    paged.prefill(first(ids, 37));   // chunks of 16, 16, 5: boundaries inside and across blocks
    own.prefill(first(ids, 37));
    CHECK(same(paged.logits(), own.logits()));
    double worst = max_err_rel(paged.logits(), std::span<const float>(&ref.logits[36 * kVocab], kVocab));
    for (size_t i = 37; i < ids.size(); ++i) {
      paged.decode(ids[i]);
      own.decode(ids[i]);
      CHECK(same(paged.logits(), own.logits()));
      worst = std::max(worst, max_err_rel(paged.logits(), std::span<const float>(&ref.logits[i * kVocab], kVocab)));
    }
    CHECK(worst <= 1e-3);   // the suites' tolerance against the float64 reference (test_session_kv_types)
    // Blocks held: the rows written, rounded up to whole blocks; the pool's count agrees.
    const uint32_t held = (uint32_t(ids.size()) + B - 1) / B;
    CHECK(paged.block_table()->blocks().size() == held);
    CHECK(pool->blocks().used() == held);
    CHECK(paged.kv_cache_bytes() == uint64_t(held) * B * paged.kv_bytes_per_token());
  }
}

namespace {

// Three sessions in a pool of `type` (blocks of 8) and the same three with caches of their own, prompts of
// p0, p0 + dp, p0 + 2 dp tokens, then 10 steps: the pool's rows through one DecodeBatch, the others one
// decode each.  Every step's logits and positions must be equal bit for bit.  Returns how many fewer
// layer dispatches the paged batch recorded than a batch of the own-cache sessions.
int64_t batched_vs_alone(Model& model, KvType type, bool fused, uint32_t p0, uint32_t dp, uint32_t seed) {
  // q4_0 keys plain: calibrated, the pool's rows would follow the first prompt's calibration and each
  // own cache its own prompt's (the pool's calibration has a case of its own below).
  auto pool = make_pool(model, 512, 8, type, false);
  SessionOptions paged = opts(pool), own = opts();
  own.calibrate_keys = false;
  paged.fused_decode = own.fused_decode = fused;
  own.cache_type_k = own.cache_type_v = type;
  std::vector<std::unique_ptr<Session>> batched, alone;
  std::vector<std::vector<int32_t>> ids;
  for (uint32_t k = 0; k < 3; ++k) {
    ids.push_back(random_ids(p0 + dp * k + 10, kVocab, seed + k));
    batched.push_back(std::make_unique<Session>(model, paged));
    alone.push_back(std::make_unique<Session>(model, own));
    batched[k]->prefill(first(ids[k], p0 + dp * k));
    alone[k]->prefill(first(ids[k], p0 + dp * k));
  }
  DecodeBatch batch(model, 4);
  for (uint32_t step = 0; step < 10; ++step) {   // rows at different positions cross block boundaries
    std::vector<Session*> rows;
    std::vector<int32_t> toks;
    for (uint32_t k = 0; k < 3; ++k) rows.push_back(batched[k].get()), toks.push_back(ids[k][p0 + dp * k + step]);
    batch.step(rows, toks);
    for (uint32_t k = 0; k < 3; ++k) {
      alone[k]->decode(toks[k]);
      CHECK(same(batched[k]->logits(), alone[k]->logits()));
      CHECK(batched[k]->position() == alone[k]->position());
    }
  }
  DecodeBatch own_batch(model, 4);
  std::vector<Session*> rows;
  for (auto& s : alone) rows.push_back(s.get());
  own_batch.step(rows, std::vector<int32_t>{1, 2, 3});
  return int64_t(own_batch.last_layer_dispatches()) - int64_t(batch.last_layer_dispatches());
}

}  // namespace

TEST_CASE("kv pool: batched decode over paged sessions is what each session alone gives") {
  auto model = load_model(tiny_model(kModel));
  // One attention dispatch per layer for the three paged rows (DecodeBatch's shared attention), where
  // sessions with caches of their own take one per row: 2 fewer per layer (the model has 2 layers).
  CHECK(batched_vs_alone(*model, KvType::f16, true, 13, 6, 30) == 2 * 2);
}

TEST_CASE("kv pool: an unfused batched decode stores and attends every row in one dispatch each") {
  // The split-K decode without the fused step (--unfused, and devices whose limits refuse the fused
  // kernel): one kv_store, one decode and one combine per layer for all rows, each row what its session
  // decoded alone (unfused, a cache of its own) gives, bit for bit.  Q4_0 keys and values: the rows'
  // quantization and Walsh-Hadamard rotation go through the batched store too.
  auto model = load_model(tiny_model(kModel));
  // Per layer (2 layers): 3 dispatches for the batch, 3 per row (9) for sessions with caches of their own.
  CHECK(batched_vs_alone(*model, KvType::q4_0, false, 9, 5, 60) == 2 * 6);
}

TEST_CASE("kv pool: shared prefixes are mapped, not computed, and change nothing") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  auto pool = make_pool(*model, 1024, 8);
  const std::vector<int32_t> p = random_ids(40, kVocab, 11);
  std::vector<int32_t> q(p.begin(), p.begin() + 35);   // shares 35 tokens: 4 whole blocks
  const std::vector<int32_t> tail = random_ids(5, kVocab, 12);
  q.insert(q.end(), tail.begin(), tail.end());
  Session a(*model, opts(pool));
  a.prefill(p);
  CHECK(a.last_prefix_rows() == 0);
  CHECK(pool->blocks().used() == 5);
  Session b(*model, opts(pool)), b_own(*model, opts());
  b.prefill(q);
  b_own.prefill(q);
  CHECK(b.last_prefix_rows() == 32);
  CHECK(same(b.logits(), b_own.logits()));
  // 5 blocks of a, b's 4 shared ones counted once, and b's own fifth.
  CHECK(pool->blocks().used() == 6);
  CHECK(pool->blocks().prefix_hits() == 4);
  CHECK(pool->blocks().prefix_hit_tokens() == 32);
  for (int i = 0; i < 6; ++i) {   // greedy continuations agree token for token
    const int32_t t = argmax(b_own.logits());
    CHECK(argmax(b.logits()) == t);
    b.decode(t);
    b_own.decode(t);
    CHECK(same(b.logits(), b_own.logits()));
  }
  // The same prompt again matches all but its last block (the last token is always computed).
  Session c(*model, opts(pool));
  c.prefill(p);
  CHECK(c.last_prefix_rows() == 32);
  CHECK(same(c.logits(), a.logits()));
  // Every row's logits are wanted: nothing can be mapped.
  Session d(*model, opts(pool));
  std::vector<float> all;
  d.prefill(p, &all);
  CHECK(d.last_prefix_rows() == 0);
}

TEST_CASE("kv pool: four requests sharing a 1000-token system prompt hold at most 1.3x the blocks of one") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  auto pool = make_pool(*model, 8192, 16);
  const std::vector<int32_t> system = random_ids(1000, kVocab, 13);
  std::vector<std::unique_ptr<Session>> shared;
  uint32_t one = 0;
  for (uint32_t r = 0; r < 4; ++r) {
    std::vector<int32_t> prompt = system;
    const std::vector<int32_t> user = random_ids(12, kVocab, 40 + r);
    prompt.insert(prompt.end(), user.begin(), user.end());
    shared.push_back(std::make_unique<Session>(*model, opts(pool, 1100)));
    Session& s = *shared.back();
    s.prefill(prompt);
    CHECK(s.last_prefix_rows() == (r == 0 ? 0u : 992u));   // 62 whole blocks of the system prompt
    Session own(*model, opts(nullptr, 1100));
    own.prefill(prompt);
    CHECK(same(s.logits(), own.logits()));
    for (int i = 0; i < 8; ++i) {   // the reply: identical tokens and logits
      const int32_t t = argmax(own.logits());
      CHECK(argmax(s.logits()) == t);
      s.decode(t);
      own.decode(t);
    }
    CHECK(same(s.logits(), own.logits()));
    if (r == 0) one = pool->blocks().used();
  }
  const uint32_t four = pool->blocks().used();
  MESSAGE("blocks: one request " << one << ", four " << four << " (" << double(four) / one << "x)");
  CHECK(one == (1000 + 12 + 8 + 15) / 16);
  CHECK(double(four) <= 1.3 * one);
}

TEST_CASE("kv pool: a full pool refuses the step, and every session stays intact") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  auto pool = make_pool(*model, 32, 8);   // 4 blocks
  const std::vector<int32_t> ids = random_ids(40, kVocab, 14);
  Session a(*model, opts(pool)), a_own(*model, opts());
  a.prefill(first(ids, 20));   // 3 blocks
  a_own.prefill(first(ids, 20));
  Session b(*model, opts(pool));
  const std::vector<int32_t> other = random_ids(20, kVocab, 17);
  try {
    b.prefill(other);   // needs 3 blocks: 1 is left (and no prefix of a's matches other tokens)
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kv_pool_full);
    CHECK(std::string(e.what()).find("the KV pool is full") != std::string::npos);
  }
  CHECK(b.position() == 0);
  CHECK(b.block_table()->blocks().empty());
  CHECK(pool->blocks().used() == 3);
  for (size_t i = 20; i < 32; ++i) {   // a decodes on into its fourth block, unharmed
    a.decode(ids[i]);
    a_own.decode(ids[i]);
    CHECK(same(a.logits(), a_own.logits()));
  }
  CHECK_THROWS_AS(a.decode(ids[32]), Error);   // a fifth block: none left
  CHECK(a.position() == 32);
  CHECK(same(a.logits(), a_own.logits()));
  // Rewinding gives blocks back; decoding again from there gives the same bits.
  a.rewind(16);
  CHECK(pool->blocks().used() == 2);
  a_own.rewind(16);
  for (size_t i = 16; i < 20; ++i) a.decode(ids[i]), a_own.decode(ids[i]);
  CHECK(same(a.logits(), a_own.logits()));
  // a's first two blocks are indexed: a later sequence maps them though a gave them back (cached).
  a.rewind(0);
  CHECK(pool->blocks().used() == 0);
  // Cached: blocks 0 and 1, and one of the two full blocks the first rewind gave back (rows 16..23 or
  // 24..31; the re-decode took the other); the re-decode's partial block is unindexed, hence free.
  CHECK(pool->blocks().cached() == 3);
  Session c(*model, opts(pool)), c_own(*model, opts());
  c.prefill(first(ids, 20));
  c_own.prefill(first(ids, 20));
  CHECK(c.last_prefix_rows() == 16);
  CHECK(same(c.logits(), c_own.logits()));
  CHECK(pool->blocks().used() == 3);
}

TEST_CASE("kv pool: a rewind into shared blocks copies before it writes") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  auto pool = make_pool(*model, 256, 8);
  const std::vector<int32_t> p = random_ids(41, kVocab, 15);
  Session a(*model, opts(pool)), a_own(*model, opts());
  a.prefill(p);
  a_own.prefill(p);
  Session b(*model, opts(pool));
  b.prefill(p);
  REQUIRE(b.last_prefix_rows() == 40);
  const uint32_t shared_block = b.block_table()->blocks()[2];
  CHECK(pool->blocks().refcount(shared_block) == 2);
  // b rewinds into its third (shared) block and writes other tokens there.
  b.rewind(20);
  const std::vector<int32_t> other = random_ids(10, kVocab, 16);
  b.prefill(other);
  CHECK(b.block_table()->blocks()[2] != shared_block);   // b wrote into a copy
  CHECK(pool->blocks().refcount(shared_block) == 1);
  std::vector<int32_t> bq(p.begin(), p.begin() + 20);
  bq.insert(bq.end(), other.begin(), other.end());
  Session b_own(*model, opts());
  b_own.prefill(bq);
  CHECK(same(b.logits(), b_own.logits()));   // the copy kept rows 16..19, the write changed only b's rows
  for (size_t i = 0; i < 4; ++i) {   // a's rows are untouched
    const int32_t t = argmax(a_own.logits());
    a.decode(t);
    a_own.decode(t);
    CHECK(same(a.logits(), a_own.logits()));
  }
}

TEST_CASE("kv pool: sessions the pool cannot serve are refused, naming why") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  auto pool = make_pool(*model, 64, 8, KvType::f16);
  SessionOptions o = opts(pool);
  o.cache_type_v = KvType::f32;
  try {
    Session s(*model, o);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("the KV pool stores K f16 V f16 but the session asks for K f16 V f32") !=
          std::string::npos);
  }
  SessionOptions rr = opts(pool);
  rr.overrides.rope_scaling = "rerope";
  rr.overrides.rerope_window = 16;
  try {
    Session s(*model, rr);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("the KV pool keeps none") != std::string::npos);
  }
  KvPoolOptions bad;
  bad.tokens = 64;
  bad.block_rows = 12;
  CHECK_THROWS_WITH_AS(KvPool(*model, bad), doctest::Contains("give a power of two"), Error);
}

TEST_CASE("kv pool: a windowed session gives back the blocks behind its window, so a prompt longer than the pool runs") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  constexpr uint32_t B = 8, kWindow = 20, kSinks = 4;
  auto pool = make_pool(*model, 96, B);   // 12 blocks: 96 rows
  auto windowed = [&](std::shared_ptr<KvPool> p, bool full_kv) {
    SessionOptions o = opts(std::move(p), 512);
    o.overrides.attn_window = kWindow;
    o.overrides.attn_sinks = kSinks;
    o.full_kv = full_kv;
    return o;
  };
  const std::vector<int32_t> ids = random_ids(190, kVocab, 21);
  // The reference keeps every position (no ring), so it can rewind anywhere.
  Session paged(*model, windowed(pool, false)), own(*model, windowed(nullptr, true));
  // Held at most: the sink block, the anchor, the window's and a chunk's blocks, a spare.
  const size_t most = 1 + 1 + (kWindow + 16 + B - 1) / B + 1;
  paged.prefill(first(ids, 150));   // 150 rows through a pool of 96
  own.prefill(first(ids, 150));
  CHECK(same(paged.logits(), own.logits()));
  CHECK(paged.block_table()->held() <= most);
  CHECK(pool->blocks().used() == paged.block_table()->held());
  CHECK(paged.block_table()->blocks().size() == (150 + B - 1) / B);   // entries keep their places
  CHECK(paged.block_table()->blocks()[0] != KvBlockTable::kDropped);  // the sinks' block stays
  for (size_t i = 150; i < 180; ++i) {
    paged.decode(ids[i]);
    own.decode(ids[i]);
    CHECK(same(paged.logits(), own.logits()));
    CHECK(paged.block_table()->held() <= most);
  }
  // Keys behind the window are gone: a rewind that needs them is refused, naming the floor; one at the
  // floor decodes as the full cache does.
  const uint32_t floor = paged.rewind_floor();
  CHECK(floor > 0);
  CHECK(floor <= paged.position());
  CHECK_THROWS_WITH_AS(paged.rewind(floor - 1), doctest::Contains("rewind to 0 or to at least"), Error);
  CHECK(paged.position() == 180);
  paged.rewind(floor);
  own.rewind(floor);
  for (size_t i = 0; i < 6; ++i) {
    paged.decode(ids[i]);
    own.decode(ids[i]);
    CHECK(same(paged.logits(), own.logits()));
  }
  paged.rewind(0);
  CHECK(pool->blocks().used() == 0);
  CHECK(paged.rewind_floor() == 0);
  // Reserved (as the server admits a request): the session holds its peak, recycles what its window
  // leaves, and runs while another session takes every other block.
  paged.reserve_kv(400);
  CHECK(paged.block_table()->held() == most + 1);   // window_peak_blocks: the bound above and a spare
  Session hog(*model, opts(pool));
  hog.prefill(first(ids, uint32_t(pool->blocks().available()) * B));
  CHECK(pool->blocks().available() == 0);
  paged.prefill(first(ids, 150));
  for (size_t i = 150; i < 170; ++i) paged.decode(ids[i]);
  CHECK(paged.block_table()->held() == most + 1);
  Session again(*model, windowed(nullptr, true));
  again.prefill(first(ids, 150));
  for (size_t i = 150; i < 170; ++i) again.decode(ids[i]);
  CHECK(same(paged.logits(), again.logits()));
  paged.rewind(0);
  hog.rewind(0);
  CHECK(pool->blocks().used() == 0);
  // full_kv keeps every position: nothing is dropped, and the pool fills.
  Session keep(*model, windowed(pool, true));
  keep.prefill(first(ids, 90));
  CHECK(keep.block_table()->held() == (90 + B - 1) / B);
  CHECK_THROWS_AS(keep.prefill(first(ids, 30)), Error);
}

TEST_CASE("kv pool: the default block is the device's widest subgroup, 16 to 64 rows") {
  // What real GPUs report (tests/data/device-profiles): a subgroup of AMD's wave64 reads 64 consecutive
  // keys, NVIDIA's and Apple's 32, Intel's up to 32; lavapipe's 4 to 16 lanes and the Android minimums
  // keep vLLM's 16.
  const std::pair<const char*, uint32_t> cases[] = {
      {"vp_gpuinfo_amd_radeon_rx_570_series__radv_polaris10__26_0_6_linuxmint_22_3.json", 64},
      {"vp_gpuinfo_nvidia_geforce_rtx_5090_610_43_2_0_freebsd_15_1.json", 32},
      {"vp_gpuinfo_apple_m1_0_2_2209_macos_26_5_1.json", 32},
      {"vp_gpuinfo_intel_r__arc_tm__a770_graphics__dg2__26_1_2_arch_unknown.json", 32},
      {"VP_ANDROID_15_minimums.json", 16},
  };
  for (const auto& [file, rows] : cases) {
    INFO(file);
    const DeviceProfile p = load_device_profile((source_root() / "tests/data/device-profiles" / file).string());
    CHECK(KvPool::default_block_rows(profile_capabilities(p)) == rows);
  }
  // And the pool a session gets on the device these suites run on.
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  KvPoolOptions o;
  o.tokens = 256;
  KvPool pool(*model, o);
  const Capabilities& caps = model->device().caps();
  const uint32_t width = std::max(caps.subgroup_size, caps.subgroup_max);
  CHECK(pool.block_rows() == std::clamp<uint32_t>(std::bit_ceil(width), 16, 64));
}

// The keys' calibration of a q4_0 pool (runtime/session/key_calibration.hpp): the first prefill chunk any of
// its sessions runs sets it, every later session stores by it; a session of its own calibrates likewise, and
// again from all it has taken when it starts over.
TEST_CASE("kv pool: q4_0 keys calibrated once per pool, by its first prefill") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  const std::vector<int32_t> p = random_ids(40, kVocab, 71), q = random_ids(40, kVocab, 72);
  auto pool = make_pool(*model, 256, 8, KvType::q4_0);
  const KeyCalibration& cal = pool->key_calibration();
  REQUIRE(cal.enabled());
  uint32_t flag = 7;
  std::memcpy(&flag, cal.read(0).data(), 4);
  CHECK(flag == 0);   // not calibrated before a prefill
  SessionOptions own = opts();
  own.cache_type_k = own.cache_type_v = KvType::q4_0;
  Session a(*model, opts(pool)), a_own(*model, own);
  a.prefill(p);
  a_own.prefill(p);
  // The same rows calibrate both: the same mu and s in layer 0.  The session of its own keeps its first
  // kKeyCalibExactRows rows exact as well (a pool does not), so later layers see other rows, and its logits
  // differ a little.
  REQUIRE(a_own.key_calibration());
  CHECK(same_first_calibration(cal, *a_own.key_calibration()));
  CHECK_FALSE(same(a.logits(), a_own.logits()));
  CHECK(max_err_rel(a_own.logits(), a.logits()) < 0.05);
  const std::vector<float> after_a = cal.read(1);
  std::memcpy(&flag, after_a.data(), 4);
  CHECK(flag == 1);
  // mu moved (one kv head of 64: mu from float 4 on, s from 68 on, then the statistics, then the exact
  // rows); s stays 1 below kKeyCalibSmoothRows rows.
  REQUIRE(after_a.size() == 4 + (6 + kKeyCalibExactRows) * 64);
  CHECK(std::any_of(after_a.begin() + 4, after_a.begin() + 68, [](float m) { return std::fabs(m) > 1e-3f; }));
  CHECK(std::all_of(after_a.begin() + 68, after_a.begin() + 132, [](float s) { return s == 1.0f; }));
  // A second session of the pool leaves the calibration as it was (a pool takes no later statistics).
  Session b(*model, opts(pool));
  b.prefill(q);
  CHECK(cal.read(1) == after_a);
  // A session of its own that starts over (rewind to 0) calibrates again from both prompts: neither as the
  // pool (p's rows) nor as a session whose only prompt is q.
  a_own.rewind(0);
  a_own.prefill(q);
  Session q_own(*model, own);
  q_own.prefill(q);
  CHECK_FALSE(same(b.logits(), a_own.logits()));
  CHECK_FALSE(same(q_own.logits(), a_own.logits()));
  // Started over on the same prompt (in one chunk), it stores as before: p's statistics twice are p's.
  SessionOptions whole = own;
  whole.chunk = 64;
  Session p_once(*model, whole), p_twice(*model, whole);
  p_once.prefill(p);
  p_twice.prefill(p);
  p_twice.rewind(0);
  p_twice.prefill(p);
  CHECK(same(p_twice.logits(), p_once.logits()));
  // Plain q4_0 keys (no calibration) round differently: the calibration is in use, not idle.
  SessionOptions plain = own;
  plain.calibrate_keys = false;
  Session c(*model, plain);
  c.prefill(p);
  CHECK_FALSE(same(c.logits(), a.logits()));
}

TEST_CASE("kv pool: a cache whose first rows come from a decode step keeps q4_0 keys uncalibrated") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  const std::vector<int32_t> p = random_ids(40, kVocab, 73);
  for (const bool pooled : {true, false}) {
    CAPTURE(pooled);
    auto pool = pooled ? make_pool(*model, 256, 8, KvType::q4_0) : nullptr;
    SessionOptions o = opts(pool);
    o.cache_type_k = o.cache_type_v = KvType::q4_0;
    Session s(*model, o);
    s.decode(p[0]);            // one row, stored before any statistics exist
    s.prefill(first(std::vector<int32_t>(p.begin() + 1, p.end()), 39));
    // Every layer keeps the identity, flagged as kept (2): mu 0, s 1.
    REQUIRE(s.key_calibration());
    for (size_t l = 0; l < model->config().n_layers; ++l) {
      const std::vector<float> f = s.key_calibration()->read(l);
      uint32_t flag = 0;
      std::memcpy(&flag, f.data(), 4);
      CHECK(flag == 2);
      CHECK(std::all_of(f.begin() + 4, f.begin() + 68, [](float m) { return m == 0.0f; }));
      CHECK(std::all_of(f.begin() + 68, f.begin() + 132, [](float sc) { return sc == 1.0f; }));
    }
    // Pooled, every row was stored by it: the logits equal a session without calibration.  (A session of
    // its own also keeps its first rows exact, which plain q4_0 keys do not.)
    if (!pooled) continue;
    SessionOptions plain = o;
    plain.kv_pool = pooled ? make_pool(*model, 256, 8, KvType::q4_0, false) : nullptr;
    plain.calibrate_keys = false;
    Session ref(*model, plain);
    ref.decode(p[0]);
    ref.prefill(first(std::vector<int32_t>(p.begin() + 1, p.end()), 39));
    CHECK(same(s.logits(), ref.logits()));
  }
}

// A key calibration's statistics through a file (KeyCalibration::save / load): a session that loads p's
// statistics and prefills q stores exactly what a session that prefilled p, started over and prefilled q
// stores (the same statistics, merged the same way), and so does a pool that loads them.
TEST_CASE("kv pool: a key calibration saved to a file starts another session's, bit for bit") {
  auto dir = tiny_model(kModel);
  auto model = load_model(dir);
  const std::vector<int32_t> p = random_ids(40, kVocab, 74), q = random_ids(40, kVocab, 75);
  TempDir tmp("kvcalib");
  const auto file = tmp.path / "p.kvc";
  SessionOptions own = opts();
  own.chunk = 64;
  own.cache_type_k = own.cache_type_v = KvType::q4_0;
  Session saver(*model, own), restarted(*model, own);
  saver.prefill(p);
  saver.save_key_calibration(file);
  restarted.prefill(p);
  restarted.rewind(0);
  restarted.prefill(q);
  SessionOptions loads = own;
  loads.key_calib_file = file.string();
  Session loaded(*model, loads);
  loaded.prefill(q);
  CHECK(same(loaded.logits(), restarted.logits()));
  Session fresh(*model, own);   // without the file: q's rows alone, another calibration
  fresh.prefill(q);
  CHECK_FALSE(same(fresh.logits(), loaded.logits()));
  KvPoolOptions po;
  po.tokens = 256;
  po.block_rows = 8;
  po.cache_type_k = po.cache_type_v = KvType::q4_0;
  po.key_calib_file = file.string();
  auto pool = std::make_shared<KvPool>(*model, po);
  SessionOptions pooled = opts(pool);
  pooled.chunk = 64;
  Session on_pool(*model, pooled);
  on_pool.prefill(q);
  CHECK(same_first_calibration(pool->key_calibration(), *loaded.key_calibration()));
  CHECK_FALSE(same_first_calibration(pool->key_calibration(), *fresh.key_calibration()));   // the file is in it

  // Bad files: named, with what is wrong, and the session that refused them is not made.
  auto refused = [&](const std::string& bytes) {
    const auto bad = tmp.path / "bad.kvc";
    {
      std::ofstream f(bad, std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), std::streamsize(bytes.size()));
    }
    SessionOptions o = own;
    o.key_calib_file = bad.string();
    try {
      Session s(*model, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string good = read_text(file);
  std::string message = refused(good.substr(0, good.size() - 3));
  CHECK(message.find("bad.kvc") != std::string::npos);
  CHECK(message.find("truncated") != std::string::npos);
  std::string other = good;
  const uint32_t layers = 7;
  std::memcpy(other.data() + 12, &layers, 4);
  message = refused(other);
  CHECK(message.find("7 layers") != std::string::npos);
  message = refused("not a calibration at all");
  CHECK(message.find("REACHKVC") != std::string::npos);
  std::string nan = good;
  const float not_finite = std::nanf("");
  std::memcpy(nan.data() + 28 + 8, &not_finite, 4);
  message = refused(nan);
  CHECK(message.find("not finite") != std::string::npos);
  // Keys that take no calibration have none to save.
  SessionOptions plain = own;
  plain.cache_type_k = KvType::q8_0;
  Session q8(*model, plain);
  q8.prefill(p);
  CHECK_THROWS_AS(q8.save_key_calibration(tmp.path / "q8.kvc"), Error);
}
