// KvBlockPool and KvBlockTable (runtime/session/kv_block_pool.hpp), host bookkeeping only: allocation and
// exhaustion, reference counts and their errors, LRU eviction of cached blocks, prefix sharing (the
// last-token rule, salts, forced hash collisions), copy-on-write and rewinds.  A simulated device (one
// token per physical row) checks that every table reads back exactly its own tokens, and a randomized
// run checks every counter and refcount against a reference model kept here.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "runtime/session/kv_block_pool.hpp"

using namespace reach;

namespace {

using Tokens = std::vector<int32_t>;

template <class F>
ErrorCode error_code(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("no Error thrown");
  return ErrorCode::internal;
}

// One token per physical row: what the KV rows of that token would be.
struct Device {
  std::vector<int32_t> rows;
  uint32_t block_rows;
  int copies = 0;
  Device(const KvBlockPool& pool) : rows(size_t(pool.total()) * pool.block_rows(), -1), block_rows(pool.block_rows()) {}
  std::function<void(uint32_t, uint32_t)> copier() {
    return [this](uint32_t from, uint32_t to) {
      ++copies;
      std::copy_n(rows.begin() + size_t(from) * block_rows, block_rows, rows.begin() + size_t(to) * block_rows);
    };
  }
  // Writes tokens[begin..] into rows begin.. of `t` the way a forward pass would: each block made writable first.
  void write(KvBlockTable& t, KvBlockPool& pool, const Tokens& tokens, uint32_t begin) {
    for (uint32_t r = begin; r < tokens.size(); ++r) {
      REQUIRE(t.writable_block(r, pool, copier()).has_value());
      rows[t.physical_row(r)] = tokens[r];
    }
  }
  bool holds(const KvBlockTable& t, const Tokens& tokens) const {
    if (t.rows() != tokens.size()) return false;
    for (uint32_t r = 0; r < tokens.size(); ++r)
      if (rows[t.physical_row(r)] != tokens[r]) return false;
    return true;
  }
};

Tokens iota_tokens(int32_t first, size_t n) {
  Tokens t(n);
  for (size_t i = 0; i < n; ++i) t[i] = first + int32_t(i);
  return t;
}

// A sequence computed whole: prefix matched, the rest written, its full blocks registered.
KvBlockTable compute(KvBlockPool& pool, Device& dev, const Tokens& prompt, uint64_t salt = 0) {
  KvBlockTable t(pool);
  const uint32_t matched = t.match_prefix(prompt, salt, pool);
  REQUIRE(t.ensure(uint32_t(prompt.size()), pool));
  dev.write(t, pool, prompt, matched);
  t.register_full_blocks(prompt, salt, pool);
  return t;
}

}  // namespace

TEST_CASE("kv_block_pool: allocation until exhaustion; running tables keep their blocks") {
  KvBlockPool pool(4, 2);
  CHECK(pool.total() == 4);
  CHECK(pool.free() == 4);
  KvBlockTable a(pool);
  REQUIRE(a.ensure(5, pool));  // 3 blocks
  CHECK(a.blocks() == std::vector<uint32_t>{0, 1, 2});
  CHECK(pool.used() == 3);
  CHECK(pool.free() == 1);
  KvBlockTable b(pool);
  CHECK_FALSE(b.ensure(3, pool));  // needs 2, 1 left: nothing taken
  CHECK(b.blocks().empty());
  CHECK(b.rows() == 0);
  CHECK(pool.free() == 1);
  CHECK(a.ensure(6, pool));  // within a's last block
  CHECK(a.blocks().size() == 3);
  CHECK(b.ensure(2, pool));
  CHECK(pool.free() == 0);
  CHECK_FALSE(pool.allocate().has_value());
  CHECK_FALSE(a.ensure(7, pool));
  CHECK(a.rows() == 6);
  CHECK(a.blocks() == std::vector<uint32_t>{0, 1, 2});
  CHECK(a.physical_row(5) == 2 * 2 + 1);
  a.release_all(pool);
  CHECK(pool.free() == 3);
  CHECK(pool.used() == 1);
  CHECK(a.blocks().empty());
  const std::optional<uint32_t> id = pool.allocate();
  REQUIRE(id.has_value());
  CHECK(pool.refcount(*id) == 1);
  pool.release(*id);
  b.release_all(pool);
  CHECK(pool.free() == 4);
  CHECK(pool.used() == 0);
}

TEST_CASE("kv_block_pool: dropped blocks go back while later rows keep their places") {
  const uint32_t D = KvBlockTable::kDropped;
  KvBlockPool pool(8, 4);
  KvBlockTable a(pool);
  REQUIRE(a.ensure(26, pool));   // 7 blocks
  CHECK(a.drop(2, 17, pool) == 3);   // blocks wholly inside rows [2, 17): 1, 2, 3
  CHECK(a.blocks() == std::vector<uint32_t>{0, D, D, D, 4, 5, 6});
  CHECK(a.held() == 4);
  CHECK(pool.used() == 4);
  CHECK(pool.free() == 4);
  CHECK(a.drop(0, 17, pool) == 1);   // block 0 now, the others already gone
  CHECK(a.drop(0, 17, pool) == 0);
  CHECK(a.held() == 3);
  CHECK(a.physical_row(17) == 4 * 4 + 1);
  CHECK(error_code([&] { (void)a.physical_row(5); }) == ErrorCode::invalid_argument);
  CHECK(error_code([&] { (void)a.writable_block(5, pool, [](uint32_t, uint32_t) {}); }) == ErrorCode::internal);
  // A fork retains only the held blocks; rewinds and releases skip the dropped entries.
  KvBlockTable b = a.fork(pool);
  CHECK(b.held() == 3);
  CHECK(pool.refcount(4) == 2);
  b.release_all(pool);
  CHECK(pool.refcount(4) == 1);
  REQUIRE(a.ensure(32, pool));   // entries grow past the dropped ones
  CHECK(a.blocks().size() == 8);
  CHECK(a.held() == 4);
  a.rewind(10, pool);   // into the dropped run
  CHECK(a.blocks() == std::vector<uint32_t>{D, D, D});
  CHECK(a.held() == 0);
  CHECK(pool.used() == 0);
  a.release_all(pool);
  CHECK(a.blocks().empty());
  CHECK(pool.free() == 8);
}

TEST_CASE("kv_block_pool: a table with spares recycles what it drops and needs the pool no more") {
  const uint32_t D = KvBlockTable::kDropped;
  KvBlockPool pool(8, 4);
  KvBlockTable a(pool), other(pool);
  REQUIRE(a.reserve_spares(4, pool));
  CHECK(a.spares() == 4);
  CHECK(a.held() == 4);
  CHECK(pool.used() == 4);
  REQUIRE(other.ensure(16, pool));   // the other 4: the pool is empty now
  CHECK_FALSE(pool.allocate().has_value());
  REQUIRE(a.ensure(12, pool));   // 3 entries from the spares
  CHECK(a.spares() == 1);
  CHECK(a.drop(0, 8, pool) == 2);   // blocks 0 and 1 become spares again
  CHECK(a.spares() == 3);
  CHECK(a.held() == 4);
  REQUIRE(a.ensure(24, pool));   // entries 3..5 from them: still nothing from the pool
  CHECK(a.blocks()[0] == D);
  CHECK(a.blocks()[1] == D);
  CHECK(a.held() == 4);
  CHECK(pool.used() == 8);
  CHECK_FALSE(a.ensure(28, pool));   // a fifth block: the pool has none
  // A shared block is released when dropped, not recycled.
  KvBlockTable b = a.fork(pool);
  CHECK(a.drop(0, 16, pool) == 2);   // entries 2 and 3, shared with b
  CHECK(a.spares() == 0);
  CHECK(a.held() == 2);
  b.release_all(pool);
  a.rewind(20, pool);   // spares stay while the sequence does
  a.rewind(0, pool);    // and go back with it
  CHECK(a.held() == 0);
  CHECK(pool.used() == 4);   // the other table's
  other.release_all(pool);
  CHECK(pool.free() == 8);
}

TEST_CASE("kv_block_pool: bad ids, double releases and bad arguments throw, naming the block") {
  CHECK(error_code([] { KvBlockPool(0, 16); }) == ErrorCode::invalid_argument);
  CHECK(error_code([] { KvBlockPool(4, 0); }) == ErrorCode::invalid_argument);
  CHECK(error_code([] { KvBlockPool(1u << 20, 1u << 13); }) == ErrorCode::invalid_argument);
  KvBlockPool pool(2, 4);
  const uint32_t id = *pool.allocate();
  pool.release(id);
  CHECK_THROWS_WITH_AS(pool.release(id), doctest::Contains("KV block 0"), Error);
  CHECK(error_code([&] { pool.release(id); }) == ErrorCode::invalid_argument);
  CHECK(error_code([&] { pool.release(1); }) == ErrorCode::invalid_argument);  // never allocated
  CHECK(error_code([&] { pool.retain(1); }) == ErrorCode::invalid_argument);   // free
  CHECK_THROWS_WITH_AS(pool.release(7), doctest::Contains("KV block 7"), Error);
  CHECK(error_code([&] { pool.retain(2); }) == ErrorCode::invalid_argument);
  CHECK(error_code([&] { (void)pool.refcount(2); }) == ErrorCode::invalid_argument);
  CHECK(error_code([&] { (void)pool.prefix(0); }) == ErrorCode::invalid_argument);
  const Tokens three = iota_tokens(1, 3), four = iota_tokens(1, 4);
  CHECK(error_code([&] { pool.register_full(0, {}, four, 0); }) == ErrorCode::invalid_argument);  // not held
  const uint32_t held = *pool.allocate();
  CHECK(error_code([&] { pool.register_full(held, {}, three, 0); }) == ErrorCode::invalid_argument);
  CHECK(error_code([&] { (void)pool.find({}, three, 0); }) == ErrorCode::invalid_argument);
  pool.release(held);
  CHECK(pool.free() == 2);
  CHECK(pool.used() == 0);

  KvBlockTable t(pool);
  REQUIRE(t.ensure(3, pool));
  Device dev(pool);
  CHECK(error_code([&] { t.rewind(4, pool); }) == ErrorCode::invalid_argument);
  CHECK(error_code([&] { (void)t.writable_block(3, pool, dev.copier()); }) == ErrorCode::invalid_argument);
  CHECK(error_code([&] { (void)t.physical_row(4); }) == ErrorCode::invalid_argument);
  CHECK(error_code([&] { t.register_full_blocks(four, 0, pool); }) == ErrorCode::invalid_argument);
  CHECK(error_code([&] { (void)t.match_prefix(four, 0, pool); }) == ErrorCode::invalid_argument);
  t.release_all(pool);
  CHECK(pool.free() == 2);
}

TEST_CASE("kv_block_pool: cached blocks are evicted least recently released first; a hit revives one") {
  KvBlockPool pool(3, 2);
  const Tokens t0{10, 11}, t1{20, 21}, t2{30, 31};
  uint32_t b[3];
  for (int i = 0; i < 3; ++i) b[i] = *pool.allocate();
  pool.register_full(b[0], {}, t0, 0);
  pool.register_full(b[1], {}, t1, 0);
  pool.register_full(b[2], {}, t2, 0);
  pool.release(b[1]);
  pool.release(b[0]);
  pool.release(b[2]);
  CHECK(pool.cached() == 3);
  CHECK(pool.free() == 0);
  CHECK(pool.used() == 0);
  // b[1] was released first.
  CHECK(pool.allocate() == b[1]);
  CHECK_FALSE(pool.indexed(b[1]));
  CHECK(pool.evictions() == 1);
  CHECK_FALSE(pool.find({}, t1, 0).has_value());
  // A hit on b[0] takes it out of the LRU: the next eviction is b[2].
  CHECK(pool.lookup({}, t0, 0) == b[0]);
  CHECK(pool.refcount(b[0]) == 1);
  CHECK(pool.prefix_hits() == 1);
  CHECK(pool.prefix_hit_tokens() == 2);
  CHECK(pool.allocate() == b[2]);
  CHECK_FALSE(pool.allocate().has_value());  // b[0] is held
  CHECK(pool.used() == 3);
  // Released again, b[0] is cached, and still found.
  pool.release(b[0]);
  CHECK(pool.cached() == 1);
  CHECK(pool.find({}, t0, 0) == b[0]);
  // unindex() frees a cached block at once.
  pool.unindex(b[0]);
  CHECK(pool.cached() == 0);
  CHECK(pool.free() == 1);
  pool.release(b[1]);
  pool.release(b[2]);
  CHECK(pool.free() == 3);
}

TEST_CASE("kv_block_pool: prompts sharing 2.5 blocks share exactly 2; the third is private") {
  KvBlockPool pool(16, 4);
  Device dev(pool);
  Tokens pa = iota_tokens(100, 12);
  Tokens pb = pa;
  pb[10] = 7;  // blocks 0 and 1 equal, block 2 half equal
  pb[11] = 8;
  KvBlockTable a = compute(pool, dev, pa);
  CHECK(a.registered_blocks() == 3);
  CHECK(pool.prefix_hits() == 0);
  KvBlockTable b = compute(pool, dev, pb);
  REQUIRE(b.blocks().size() == 3);
  CHECK(b.blocks()[0] == a.blocks()[0]);
  CHECK(b.blocks()[1] == a.blocks()[1]);
  CHECK(b.blocks()[2] != a.blocks()[2]);
  CHECK(pool.refcount(a.blocks()[0]) == 2);
  CHECK(pool.refcount(a.blocks()[1]) == 2);
  CHECK(pool.refcount(a.blocks()[2]) == 1);
  CHECK(pool.refcount(b.blocks()[2]) == 1);
  CHECK(pool.prefix_hits() == 2);
  CHECK(pool.prefix_hit_tokens() == 8);
  CHECK(pool.used() == 4);
  CHECK(dev.holds(a, pa));
  CHECK(dev.holds(b, pb));
  CHECK(dev.copies == 0);
  // Both released: the 4 indexed blocks stay cached for the next prompt.
  a.release_all(pool);
  b.release_all(pool);
  CHECK(pool.used() == 0);
  CHECK(pool.cached() == 4);
  KvBlockTable c(pool);
  Tokens pc = pa;
  pc.push_back(1);
  CHECK(c.match_prefix(pc, 0, pool) == 12);  // all three of a's blocks, revived
  CHECK(pool.cached() == 1);
  CHECK(pool.used() == 3);
  CHECK(dev.holds(c, Tokens(pa.begin(), pa.end())));
  c.release_all(pool);
}

TEST_CASE("kv_block_pool: a prompt's last token is always computed") {
  KvBlockPool pool(8, 4);
  Device dev(pool);
  const Tokens p = iota_tokens(5, 12);
  KvBlockTable a = compute(pool, dev, p);
  REQUIRE(a.registered_blocks() == 3);
  // 8 tokens = 2 whole blocks: the second ends at the prompt's end, so only the first matches.
  KvBlockTable b(pool);
  CHECK(b.match_prefix(std::span(p).first(8), 0, pool) == 4);
  KvBlockTable c(pool);
  CHECK(c.match_prefix(std::span(p).first(9), 0, pool) == 8);
  KvBlockTable d(pool);
  CHECK(d.match_prefix(std::span(p).first(1), 0, pool) == 0);
  CHECK(d.match_prefix(std::span(p).first(0), 0, pool) == 0);
  CHECK(pool.match_prefix(p, 0).size() == 2);  // 12 tokens: 2 of 3
  for (uint32_t id : pool.match_prefix(std::span(p).first(5), 0)) pool.release(id);
  for (uint32_t id : std::vector<uint32_t>{a.blocks()[0], a.blocks()[1]}) pool.release(id);  // the 12-token match
  b.release_all(pool);
  c.release_all(pool);
  a.release_all(pool);
  CHECK(pool.used() == 0);
  CHECK(pool.cached() == 3);
}

TEST_CASE("kv_block_pool: sequences of different salts never share") {
  KvBlockPool pool(8, 4);
  Device dev(pool);
  const Tokens p = iota_tokens(1, 9);
  KvBlockTable a = compute(pool, dev, p, 1);
  KvBlockTable b = compute(pool, dev, p, 2);
  CHECK(pool.prefix_hits() == 0);
  CHECK(b.blocks()[0] != a.blocks()[0]);
  CHECK(b.blocks()[1] != a.blocks()[1]);
  KvBlockTable c = compute(pool, dev, p, 1);
  CHECK(pool.prefix_hits() == 2);
  CHECK(c.blocks()[0] == a.blocks()[0]);
  CHECK(c.blocks()[1] == a.blocks()[1]);
  CHECK(kv_block_hash(0, std::span(p).first(4), 1) != kv_block_hash(0, std::span(p).first(4), 2));
  for (KvBlockTable* t : {&a, &b, &c}) t->release_all(pool);
}

namespace {
uint64_t constant_hash(uint64_t, std::span<const int32_t>, uint64_t) { return 42; }
uint64_t first_token_hash(uint64_t, std::span<const int32_t> tokens, uint64_t) { return uint64_t(tokens[0]); }
}  // namespace

TEST_CASE("kv_block_pool: a forced hash collision never maps a block of another prefix") {
  for (KvBlockHashFn hash : {constant_hash, first_token_hash}) {
    KvBlockPool pool(8, 2, hash);
    Device dev(pool);
    // Same hash for every block (or every block starting with token 1), different contents.
    const Tokens x{1, 2, 9, 9, 5}, y{1, 3, 9, 9, 5};
    KvBlockTable a = compute(pool, dev, x);
    REQUIRE(a.registered_blocks() == 2);
    CHECK(pool.find({}, std::span(y).first(2), 0) == std::nullopt);
    // y's second block has x's tokens and, the hash colliding, x's parent hash too: only the parent's
    // entry tells them apart.
    CHECK(pool.find(KvPrefix{pool.prefix(a.blocks()[0]).hash, 0}, std::span(y).subspan(2, 2), 0) == std::nullopt);
    KvBlockTable b = compute(pool, dev, y);
    CHECK(pool.prefix_hits() == 0);
    CHECK(b.blocks()[0] != a.blocks()[0]);
    CHECK(b.blocks()[1] != a.blocks()[1]);
    CHECK(dev.holds(a, x));
    CHECK(dev.holds(b, y));
    // Both chains stay reachable.
    KvBlockTable c = compute(pool, dev, y);
    CHECK(c.blocks()[0] == b.blocks()[0]);
    CHECK(c.blocks()[1] == b.blocks()[1]);
    KvBlockTable d = compute(pool, dev, x);
    CHECK(d.blocks()[0] == a.blocks()[0]);
    CHECK(d.blocks()[1] == a.blocks()[1]);
    CHECK(pool.prefix_hits() == 4);
    for (KvBlockTable* t : {&a, &b, &c, &d}) t->release_all(pool);
  }
}

TEST_CASE("kv_block_pool: copy-on-write copies once and leaves the other table's block alone") {
  KvBlockPool pool(8, 4);
  Device dev(pool);
  Tokens p = iota_tokens(1, 6);
  KvBlockTable a = compute(pool, dev, p);
  KvBlockTable b = a.fork(pool);
  CHECK(pool.refcount(a.blocks()[1]) == 2);
  CHECK(b.registered_blocks() == 1);
  const uint32_t shared = a.blocks()[1];
  // b appends: its partial block is shared, so it is copied once.
  Tokens pb = p;
  pb.push_back(70);
  REQUIRE(b.ensure(7, pool));
  dev.write(b, pool, pb, 6);
  CHECK(dev.copies == 1);
  CHECK(b.blocks()[1] != shared);
  CHECK(a.blocks()[1] == shared);
  CHECK(pool.refcount(shared) == 1);
  CHECK(dev.holds(a, p));
  CHECK(dev.rows[shared * 4 + 2] == -1);  // a's row 6, untouched
  // a appends: its block is its own now, written in place.
  Tokens pa = p;
  pa.push_back(80);
  REQUIRE(a.ensure(7, pool));
  dev.write(a, pool, pa, 6);
  CHECK(dev.copies == 1);
  CHECK(a.blocks()[1] == shared);
  CHECK(dev.holds(a, pa));
  CHECK(dev.holds(b, pb));
  // A copy that fails leaves the table as it was.
  KvBlockTable c = a.fork(pool);
  const uint32_t used = pool.used();
  CHECK_THROWS(c.writable_block(6, pool, [](uint32_t, uint32_t) { throw Error(ErrorCode::vulkan, "copy failed"); }));
  CHECK(c.blocks() == a.blocks());
  CHECK(pool.used() == used);
  // No block to copy into: nullopt, nothing changed.
  std::vector<uint32_t> rest;
  while (std::optional<uint32_t> id = pool.allocate()) rest.push_back(*id);
  CHECK(c.writable_block(6, pool, dev.copier()) == std::nullopt);
  CHECK(c.blocks() == a.blocks());
  CHECK(dev.copies == 1);
  for (uint32_t id : rest) pool.release(id);
  for (KvBlockTable* t : {&a, &b, &c}) t->release_all(pool);
  CHECK(pool.used() == 0);
}

TEST_CASE("kv_block_pool: a written block that is indexed leaves the index; shared ones are copied") {
  KvBlockPool pool(8, 2);
  Device dev(pool);
  const Tokens p{1, 2, 3, 4, 5};
  KvBlockTable a = compute(pool, dev, p);
  REQUIRE(a.registered_blocks() == 2);
  const uint32_t b1 = a.blocks()[1];
  // Alone on it, a rewrites row 3: block 1 leaves the index, no copy.
  a.rewind(3, pool);
  Tokens q{1, 2, 3, 9};
  REQUIRE(a.ensure(4, pool));
  dev.write(a, pool, q, 3);
  CHECK(dev.copies == 0);
  CHECK(a.blocks()[1] == b1);
  CHECK_FALSE(pool.indexed(b1));
  CHECK(pool.find(pool.prefix(a.blocks()[0]), std::span(p).subspan(2, 2), 0) == std::nullopt);
  a.register_full_blocks(q, 0, pool);
  CHECK(pool.find(pool.prefix(a.blocks()[0]), std::span(q).subspan(2, 2), 0) == b1);
  // Shared with a matched sequence, the block is copied and the index keeps the original.
  Tokens r{1, 2, 3, 9, 0};
  KvBlockTable b(pool);
  CHECK(b.match_prefix(r, 0, pool) == 4);
  a.rewind(3, pool);
  q[3] = 11;
  REQUIRE(a.ensure(4, pool));
  dev.write(a, pool, q, 3);
  CHECK(dev.copies == 1);
  CHECK(a.blocks()[1] != b1);
  CHECK(pool.indexed(b1));
  CHECK(dev.holds(b, Tokens{1, 2, 3, 9}));
  CHECK(dev.holds(a, q));
  // A write into a registered block, even with no rewind first, ends the table's registration there.
  KvBlockTable c = compute(pool, dev, Tokens{5, 6, 7, 8, 9});
  REQUIRE(c.registered_blocks() == 2);
  REQUIRE(c.writable_block(2, pool, dev.copier()).has_value());
  CHECK(c.registered_blocks() == 1);
  CHECK_FALSE(pool.indexed(c.blocks()[1]));
  for (KvBlockTable* t : {&a, &b, &c}) t->release_all(pool);
}

TEST_CASE("kv_block_pool: a rewind across a shared block releases only this table's references") {
  KvBlockPool pool(8, 4);
  Device dev(pool);
  const Tokens p = iota_tokens(1, 11);
  KvBlockTable a = compute(pool, dev, p);
  KvBlockTable b = a.fork(pool);
  for (uint32_t id : a.blocks()) CHECK(pool.refcount(id) == 2);
  b.rewind(5, pool);
  CHECK(b.blocks().size() == 2);
  CHECK(b.rows() == 5);
  CHECK(b.registered_blocks() == 1);
  CHECK(pool.refcount(a.blocks()[0]) == 2);
  CHECK(pool.refcount(a.blocks()[1]) == 2);
  CHECK(pool.refcount(a.blocks()[2]) == 1);
  CHECK(dev.holds(a, p));
  CHECK(dev.holds(b, Tokens(p.begin(), p.begin() + 5)));
  b.rewind(0, pool);
  CHECK(b.blocks().empty());
  for (uint32_t id : a.blocks()) CHECK(pool.refcount(id) == 1);
  KvBlockTable moved = std::move(a);
  CHECK(a.blocks().empty());
  CHECK(moved.blocks().size() == 3);
  moved.release_all(pool);
  CHECK(pool.used() == 0);
  CHECK(pool.cached() == 2);  // the two full blocks; the partial third was never indexed
  CHECK(pool.free() == 6);
}

TEST_CASE("kv_block_pool: a block computed twice is kept once") {
  KvBlockPool pool(8, 2);
  Device dev(pool);
  const Tokens p{1, 2, 3, 4, 5};
  // Two tables compute the same prompt before either registers.
  KvBlockTable a(pool), b(pool);
  for (KvBlockTable* t : {&a, &b}) {
    CHECK(t->match_prefix(p, 0, pool) == 0);
    REQUIRE(t->ensure(5, pool));
    dev.write(*t, pool, p, 0);
  }
  CHECK(pool.used() == 6);
  a.register_full_blocks(p, 0, pool);
  b.register_full_blocks(p, 0, pool);
  CHECK(b.blocks()[0] == a.blocks()[0]);
  CHECK(b.blocks()[1] == a.blocks()[1]);
  CHECK(b.blocks()[2] != a.blocks()[2]);
  CHECK(pool.used() == 4);
  CHECK(pool.free() == 4);
  CHECK(dev.holds(b, p));
  a.release_all(pool);
  b.release_all(pool);
}

namespace {

// The reference model: refcounts, the free set, the LRU list of cached blocks and the index keyed by
// (salt, whole prefix), kept without the pool's hashes or entry serials.
struct Model {
  using Key = std::pair<uint64_t, Tokens>;
  uint32_t block_rows;
  std::map<uint32_t, uint32_t> refs;
  std::set<uint32_t> free_ids;
  std::list<uint32_t> lru;
  std::map<uint32_t, Key> entry;  // indexed blocks
  std::map<Key, uint32_t> reach;  // entries a walk from the root reaches
  uint64_t hits = 0, hit_tokens = 0;

  Model(uint32_t blocks, uint32_t rows) : block_rows(rows) {
    for (uint32_t i = 0; i < blocks; ++i) free_ids.insert(i);
  }
  uint32_t ref(uint32_t id) const {
    auto it = refs.find(id);
    return it == refs.end() ? 0 : it->second;
  }
  void drop_entry(uint32_t id) {
    const Key key = entry.at(id);
    entry.erase(id);
    auto it = reach.find(key);
    if (it == reach.end() || it->second != id) return;
    reach.erase(it);
    // Entries below it become unreachable.
    for (auto r = reach.begin(); r != reach.end();) {
      const bool below = r->first.first == key.first && r->first.second.size() > key.second.size() &&
                         std::equal(key.second.begin(), key.second.end(), r->first.second.begin());
      r = below ? reach.erase(r) : std::next(r);
    }
  }
  // The pool handed out `id`: it must be a free block, or the least recently released cached one.
  void take(uint32_t id) {
    if (!free_ids.empty()) {
      CHECK(free_ids.count(id) == 1);
      free_ids.erase(id);
    } else {
      REQUIRE_FALSE(lru.empty());
      CHECK(lru.front() == id);
      lru.pop_front();
      drop_entry(id);
    }
    refs[id] = 1;
  }
  void retain(uint32_t id) {
    if (ref(id) == 0) {
      REQUIRE(entry.count(id) == 1);
      lru.remove(id);
    }
    ++refs[id];
  }
  void release(uint32_t id) {
    REQUIRE(ref(id) > 0);
    if (--refs[id] > 0) return;
    refs.erase(id);
    if (entry.count(id))
      lru.push_back(id);
    else
      free_ids.insert(id);
  }
  void unindex(uint32_t id) {
    if (!entry.count(id)) return;
    drop_entry(id);
    if (ref(id) == 0) {
      lru.remove(id);
      free_ids.insert(id);
    }
  }
  uint32_t available() const { return uint32_t(free_ids.size() + lru.size()); }
};

struct Seq {
  KvBlockTable table;
  Tokens tokens;  // one per row: rows() == tokens.size() between operations
  uint64_t salt;
  uint32_t registered;
};

}  // namespace

TEST_CASE("kv_block_pool: a randomized run matches the reference model at every step") {
  for (KvBlockHashFn hash : {kv_block_hash, constant_hash, first_token_hash}) {
    for (uint32_t block_rows : {1u, 2u, 3u}) {
      CAPTURE(block_rows);
      const uint32_t blocks = 20;
      KvBlockPool pool(blocks, block_rows, hash);
      Device dev(pool);
      Model m(blocks, block_rows);
      std::vector<std::unique_ptr<Seq>> seqs;
      std::mt19937 rng(1234 + block_rows);
      auto pick = [&](uint32_t n) { return uint32_t(std::uniform_int_distribution<uint32_t>(0, n - 1)(rng)); };
      // A few base prompts over 3 token values, so prefixes (and blocks' tokens) repeat often.
      std::vector<Tokens> bases(3);
      for (Tokens& b : bases)
        for (int i = 0; i < 12; ++i) b.push_back(int32_t(1 + pick(3)));

      // Grows `s` to `n` tokens (appended tokens given), as a forward pass would; false (and nothing
      // changed) when the pool is short.
      auto grow = [&](Seq& s, const Tokens& want) -> bool {
        const uint32_t from = s.table.rows();
        const std::vector<uint32_t> before = s.table.blocks();
        const size_t need = (want.size() + block_rows - 1) / block_rows;
        const size_t extra = need > before.size() ? need - before.size() : 0;
        const bool expect = extra <= m.available();
        const bool ok = s.table.ensure(uint32_t(want.size()), pool);
        CHECK(ok == expect);
        if (!ok) {
          CHECK(s.table.blocks() == before);
          return false;
        }
        for (size_t i = before.size(); i < s.table.blocks().size(); ++i) m.take(s.table.blocks()[i]);
        s.tokens = want;
        for (uint32_t r = from; r < want.size(); ++r) {
          const size_t i = r / block_rows;
          const uint32_t old = s.table.blocks()[i];
          const int copies = dev.copies;
          const bool shared = m.ref(old) > 1;
          const bool spare = m.available() > 0;
          const std::optional<uint32_t> id = s.table.writable_block(r, pool, dev.copier());
          if (shared && !spare) {
            // No block for the copy: the caller would stop here.  Undo by rewinding to the rows done.
            CHECK_FALSE(id.has_value());
            const std::vector<uint32_t> held = s.table.blocks();
            s.table.rewind(r, pool);
            for (size_t j = held.size(); j-- > s.table.blocks().size();) m.release(held[j]);
            s.tokens.resize(r);
            s.registered = std::min<uint32_t>(s.registered, r / block_rows);
            return false;
          }
          REQUIRE(id.has_value());
          if (shared) {
            CHECK(dev.copies == copies + 1);
            m.take(*id);
            m.release(old);
          } else {
            CHECK(dev.copies == copies);
            CHECK(*id == old);
            m.unindex(old);
          }
          s.registered = std::min<uint32_t>(s.registered, uint32_t(i));
          dev.rows[s.table.physical_row(r)] = want[r];
        }
        return true;
      };
      auto register_blocks = [&](Seq& s) {
        const std::vector<uint32_t> before = s.table.blocks();
        s.table.register_full_blocks(s.tokens, s.salt, pool);
        const uint32_t full = uint32_t(s.tokens.size() / block_rows);
        for (uint32_t i = s.registered; i < full; ++i) {
          const Model::Key key{s.salt, Tokens(s.tokens.begin(), s.tokens.begin() + (i + 1) * block_rows)};
          const uint32_t id = before[i];
          auto it = m.reach.find(key);
          if (it != m.reach.end() && it->second == id) {
            CHECK(s.table.blocks()[i] == id);
            continue;
          }
          if (m.entry.count(id)) m.unindex(id);  // indexed with other content: it moves
          if (it != m.reach.end()) {
            CHECK(s.table.blocks()[i] == it->second);
            m.retain(it->second);
            m.release(id);
          } else {
            CHECK(s.table.blocks()[i] == id);
            m.entry[id] = key;
            m.reach[key] = id;
          }
        }
        s.registered = std::max(s.registered, full);
        CHECK(s.table.registered_blocks() == s.registered);
      };
      auto release = [&](Seq& s, uint32_t rows) {
        const std::vector<uint32_t> held = s.table.blocks();
        s.table.rewind(rows, pool);
        for (size_t j = held.size(); j-- > s.table.blocks().size();) m.release(held[j]);
        s.tokens.resize(rows);
        s.registered = std::min<uint32_t>(s.registered, rows / block_rows);
      };
      auto check_all = [&] {
        std::map<uint32_t, uint32_t> count;  // an independent count: references the tables hold
        for (const auto& s : seqs)
          for (uint32_t id : s->table.blocks()) ++count[id];
        CHECK(count == m.refs);
        for (uint32_t id = 0; id < blocks; ++id) {
          CAPTURE(id);
          CHECK(pool.refcount(id) == m.ref(id));
          CHECK(pool.indexed(id) == (m.entry.count(id) == 1));
        }
        CHECK(pool.used() == m.refs.size());
        CHECK(pool.cached() == m.lru.size());
        CHECK(pool.free() == m.free_ids.size());
        CHECK(pool.used() + pool.cached() + pool.free() == blocks);
        CHECK(pool.prefix_hits() == m.hits);
        CHECK(pool.prefix_hit_tokens() == m.hit_tokens);
        for (const auto& s : seqs) CHECK(dev.holds(s->table, s->tokens));
      };

      for (int step = 0; step < 3000; ++step) {
        CAPTURE(step);
        const uint32_t op = pick(10);
        if (op < 3 && seqs.size() < 6) {  // a new sequence: prefix match, then the rest computed
          const Tokens& base = bases[pick(3)];
          Tokens prompt(base.begin(), base.begin() + 1 + pick(12));
          if (pick(2)) prompt[pick(uint32_t(prompt.size()))] = int32_t(1 + pick(3));
          auto s = std::make_unique<Seq>(Seq{KvBlockTable(pool), {}, pick(2) ? 0u : 0x5a17u, 0});
          // Expected match: the model's reachable entries, walked from the root.
          std::vector<uint32_t> expect;
          for (size_t i = 0; i < (prompt.size() - 1) / block_rows; ++i) {
            auto it = m.reach.find({s->salt, Tokens(prompt.begin(), prompt.begin() + (i + 1) * block_rows)});
            if (it == m.reach.end()) break;
            expect.push_back(it->second);
          }
          const uint32_t matched = s->table.match_prefix(prompt, s->salt, pool);
          CHECK(s->table.blocks() == expect);
          CHECK(matched == expect.size() * block_rows);
          for (uint32_t id : expect) m.retain(id);
          m.hits += expect.size();
          m.hit_tokens += expect.size() * block_rows;
          s->tokens.assign(prompt.begin(), prompt.begin() + matched);
          s->registered = uint32_t(expect.size());
          CHECK(dev.holds(s->table, s->tokens));
          if (grow(*s, prompt)) {
            register_blocks(*s);
            seqs.push_back(std::move(s));
          } else {
            release(*s, 0);  // queued: it gives back what it holds
          }
        } else if (op < 6 && !seqs.empty()) {  // decode or extend
          Seq& s = *seqs[pick(uint32_t(seqs.size()))];
          Tokens want = s.tokens;
          for (uint32_t k = 1 + pick(4); k-- > 0;) want.push_back(int32_t(1 + pick(3)));
          if (grow(s, want)) register_blocks(s);
        } else if (op < 8 && !seqs.empty()) {  // a rewind
          Seq& s = *seqs[pick(uint32_t(seqs.size()))];
          release(s, pick(s.table.rows() + 1));
        } else if (op < 9 && !seqs.empty() && seqs.size() < 6) {  // a fork
          Seq& s = *seqs[pick(uint32_t(seqs.size()))];
          auto f = std::make_unique<Seq>(Seq{s.table.fork(pool), s.tokens, s.salt, s.registered});
          for (uint32_t id : s.table.blocks()) m.retain(id);
          CHECK(f->table.registered_blocks() == s.registered);
          seqs.push_back(std::move(f));
        } else if (!seqs.empty()) {  // a finished sequence
          const uint32_t i = pick(uint32_t(seqs.size()));
          release(*seqs[i], 0);
          seqs.erase(seqs.begin() + i);
        }
        check_all();
      }
      for (auto& s : seqs) release(*s, 0);
      seqs.clear();
      check_all();
      CHECK(pool.used() == 0);
      CHECK(pool.evictions() > 0);
      CHECK(pool.prefix_hits() > 0);
    }
  }
}
