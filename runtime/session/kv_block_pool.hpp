#pragma once
// The host-side bookkeeping of a paged KV cache: one pool of fixed-size KV blocks per model and device,
// a block table per sequence, reference counts, and an index of full blocks so sequences with a common
// prefix share its blocks instead of computing them again.  No Vulkan here: the caller owns the device
// memory (block b holds physical rows [b * block_rows, (b + 1) * block_rows) of every layer's K and V)
// and copies rows when asked (KvBlockTable::writable_block).
//
// Sharing.  A full block is indexed by its prefix: the block before it (KvPrefix, a chained content
// hash plus the serial of that block's index entry), its block_rows token ids, and a salt (the position
// scheme's state, and anything else that gives the same tokens other rows: such sequences must never
// share).  A lookup compares the stored tokens, salt, parent hash and parent entry, not the hash alone,
// so no hash collision, accidental or crafted, maps a block of another prefix.  Entry serials are never
// reused: when a block leaves the index its descendants' entries become unreachable (a lookup walks
// from the root), and they leave in turn when evicted.
//
// Lifetimes.  A block is free (nobody holds it, not indexed), used (refcount > 0) or cached (refcount 0
// but indexed: its rows stay valid for a later prefix hit, and it is evicted, least recently released
// first, when no free block remains).  Releasing a block the device may still read (a step in flight)
// is the caller's error: the pool may hand it out again at once.
//
// Threads: none of this locks.  The server's scheduler thread alone calls it; other threads must not.
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace reach {

// Where a block sits in a chain of full blocks: what a lookup or a registration names as the parent.
struct KvPrefix {
  uint64_t hash = 0;  // the chained content hash (0 at the root)
  uint64_t node = 0;  // the serial of the parent's index entry (0: the root, before a sequence's first block)
  bool operator==(const KvPrefix&) const = default;
};

// hash(parent_hash, a block's tokens, salt): FNV-1a 64 over the bytes (parent hash and salt as 8 bytes,
// each token as 4, little-endian) and a splitmix64 finalizer, which FNV's weak high bits need.
uint64_t kv_block_hash(uint64_t parent_hash, std::span<const int32_t> tokens, uint64_t salt);
using KvBlockHashFn = uint64_t (*)(uint64_t parent_hash, std::span<const int32_t> tokens, uint64_t salt);

// A salt of several fields (the session's position scheme): the same FNV-1a 64 and finalizer over
// their bytes, in the order added.
class KvSaltHasher {
 public:
  void add(const void* data, size_t bytes);
  uint64_t value() const;

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;   // FNV-1a's offset basis
};

class KvBlockPool {
 public:
  // Blocks 0..blocks-1 of block_rows rows each, all free.  `hash` is replaceable so the tests can force
  // collisions.  Throws invalid_argument for 0 blocks, 0 rows, or blocks * block_rows past 2^32 - 1
  // (physical rows are 32-bit on the device).
  KvBlockPool(uint32_t blocks, uint32_t block_rows, KvBlockHashFn hash = kv_block_hash);
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  uint32_t block_rows() const { return block_rows_; }

  // A block with refcount 1: a free one, else the least recently released cached one (it leaves the
  // index), else nullopt, never an error: the caller queues the sequence (or preempts one).
  std::optional<uint32_t> allocate();
  // Blocks allocate() can still supply (free + cached).
  uint32_t available() const { return free() + cached(); }

  // One more holder of a used or cached block (a cached one is revived).  A free block holds nothing to
  // share: invalid_argument, as for an id past the pool.
  void retain(uint32_t id);
  // One holder less.  At 0 the block is free again, or cached if indexed.  invalid_argument for a block
  // nobody holds (a double release) or an id past the pool.
  void release(uint32_t id);
  uint32_t refcount(uint32_t id) const;
  bool indexed(uint32_t id) const;

  // Indexes held block `id`, full of `tokens` (exactly block_rows of them), after `parent` (KvPrefix{}
  // for a sequence's first block), and returns its KvPrefix: the parent to name for the next block.
  // Where an identical entry is already reachable under another block, `id` stays unindexed and that
  // entry's KvPrefix comes back (KvBlockTable::register_full_blocks then swaps to that block).
  // Registering a block again with the same content is a no-op; a block indexed with other content
  // moves to this entry (its rows hold this now).  invalid_argument for a block nobody holds, a wrong
  // token count, or a block others hold too that was indexed with other content (its shared rows were
  // written without KvBlockTable::writable_block).
  KvPrefix register_full(uint32_t id, KvPrefix parent, std::span<const int32_t> tokens, uint64_t salt);
  // The indexed block after `parent` holding `tokens` under `salt`, if any; changes nothing.
  std::optional<uint32_t> find(KvPrefix parent, std::span<const int32_t> tokens, uint64_t salt) const;
  // find(), and on a hit retains the block (reviving a cached one) and counts a prefix hit.
  std::optional<uint32_t> lookup(KvPrefix parent, std::span<const int32_t> tokens, uint64_t salt);
  // The KvPrefix an indexed block gives its successor.  invalid_argument when not indexed.
  KvPrefix prefix(uint32_t id) const;
  // The cached leading blocks of a prompt, retained, in order: lookups from the root while they hit.  A
  // prompt's last token is always computed (its logits are needed), so at most (n - 1) / block_rows
  // blocks match.  Counts the hits and the tokens they cover.
  std::vector<uint32_t> match_prefix(std::span<const int32_t> prompt, uint64_t salt);
  // Takes a block out of the index (its rows are about to change); a cached one becomes free.  No-op
  // when not indexed.
  void unindex(uint32_t id);

  // Counters (for /metrics): blocks by state, and the prefix index's traffic.
  uint32_t total() const { return uint32_t(blocks_.size()); }
  uint32_t used() const { return used_; }
  uint32_t cached() const { return uint32_t(lru_.size()); }
  uint32_t free() const { return uint32_t(free_.size()); }
  uint64_t prefix_lookups() const { return lookups_; }  // blocks looked up (hits and misses)
  uint64_t prefix_hits() const { return hits_; }        // blocks found
  uint64_t prefix_hit_tokens() const { return hit_tokens_; }
  uint64_t evictions() const { return evictions_; }  // cached blocks allocate() took back

 private:
  struct Block {
    uint32_t refs = 0;
    bool indexed = false;
    // While indexed: the entry.
    uint64_t hash = 0;
    uint64_t node = 0;
    KvPrefix parent;
    uint64_t salt = 0;
    std::vector<int32_t> tokens;
    std::list<uint32_t>::iterator lru;  // while cached: its place in lru_
  };
  const Block& at(uint32_t id, const char* what) const;
  Block& at(uint32_t id, const char* what);
  void check_tokens(std::span<const int32_t> tokens, const char* what) const;

  uint32_t block_rows_;
  KvBlockHashFn hash_;
  std::vector<Block> blocks_;
  std::vector<uint32_t> free_;  // a stack: the block freed last is reused first (ids ascending at the start)
  std::list<uint32_t> lru_;     // cached blocks, least recently released first
  std::unordered_multimap<uint64_t, uint32_t> index_;  // hash -> indexed block (collisions: several)
  uint32_t used_ = 0;
  uint64_t next_node_ = 1;
  uint64_t lookups_ = 0, hits_ = 0, hit_tokens_ = 0, evictions_ = 0;
};

// One sequence's blocks: table entry i holds its rows [i * block_rows, (i + 1) * block_rows).  The pool
// is passed to each call (the table keeps no pointer to it); release_all() before dropping a table, or
// its blocks stay held.  Not copyable (a copy would hold references it never took): fork() shares.
class KvBlockTable {
 public:
  explicit KvBlockTable(const KvBlockPool& pool) : block_rows_(pool.block_rows()) {}
  KvBlockTable(KvBlockTable&& other) noexcept;
  KvBlockTable& operator=(KvBlockTable&& other) noexcept;
  KvBlockTable(const KvBlockTable&) = delete;
  KvBlockTable& operator=(const KvBlockTable&) = delete;

  // An entry whose block went back to the pool while the rows after it stay (drop()).
  static constexpr uint32_t kDropped = 0xffffffffu;

  // One entry per block of rows, kDropped for the dropped ones.
  const std::vector<uint32_t>& blocks() const { return blocks_; }
  // The blocks this table holds a reference to: blocks() less the dropped entries, and the spares.
  uint32_t held() const { return uint32_t(blocks_.size()) - dropped_ + uint32_t(spare_.size()); }
  uint32_t spares() const { return uint32_t(spare_.size()); }
  uint32_t rows() const { return rows_; }
  uint32_t block_rows() const { return block_rows_; }
  // Leading blocks registered (or matched) in the prefix index by this table.
  uint32_t registered_blocks() const { return uint32_t(keys_.size()); }

  // Makes the table `rows` long (never shorter), allocating the blocks that needs.  false, changing
  // nothing and evicting nothing, when the pool cannot supply them all: the caller queues the sequence.
  bool ensure(uint32_t rows, KvBlockPool& pool);
  // Shortens the table to `rows`, releasing this table's references to the blocks past it.
  // invalid_argument when `rows` is past rows().
  void rewind(uint32_t rows, KvBlockPool& pool);
  void release_all(KvBlockPool& pool);
  // Gives back the blocks wholly inside rows [first, end) while keeping their entries (kDropped), so the
  // rows after them keep their places: a sliding window's keys behind it, which no query reads again.
  // Returns the blocks released.  The caller never reads or writes a dropped row again.  After
  // reserve_spares, a dropped block this table alone holds becomes a spare instead (unindexed: its rows
  // will change), so the table keeps what it reserved.
  uint32_t drop(uint32_t first, uint32_t end, KvBlockPool& pool);
  // Holds at least `blocks` blocks in all, the ones missing as spares that ensure() takes before the
  // pool's: a table that drops as it grows can run within them, whatever other tables take.  false,
  // taking nothing, when the pool cannot supply them.  The spares go back with rewind(0).
  bool reserve_spares(uint32_t blocks, KvBlockPool& pool);
  // Another table holding the same blocks (each retained): copy-on-write keeps them apart.
  KvBlockTable fork(KvBlockPool& pool) const;

  // The block to write row `row` into.  A block others hold too is copied first: a new block is
  // allocated, copy(from, to) copies its device rows, this table's reference moves to the copy and the
  // copy's id comes back.  A block this table alone holds leaves the prefix index (its rows change).
  // nullopt, changing nothing, when a copy is needed and the pool has no block for it.  Call it for
  // each block a write touches, before the write.  invalid_argument for a row past rows(); what copy
  // throws propagates with the table unchanged.
  std::optional<uint32_t> writable_block(uint32_t row, KvBlockPool& pool,
                                         const std::function<void(uint32_t from, uint32_t to)>& copy);
  // The row of the pool's KV buffers that holds sequence row `row` (< blocks().size() * block_rows).
  uint32_t physical_row(uint32_t row) const;

  // Prefix sharing.  match_prefix: on an empty table, takes the prompt's cached leading blocks
  // (KvBlockPool::match_prefix) and returns the rows they cover, which need no computing.  They are
  // held from then on: release_all() if the sequence is queued rather than run.
  uint32_t match_prefix(std::span<const int32_t> prompt, uint64_t salt, KvBlockPool& pool);
  // Registers each full block not yet registered, given the tokens of the rows computed so far
  // (tokens[r] is row r's; at most rows() of them).  A block whose prefix another block already holds
  // is swapped for that one (identical rows) and released, so the pool keeps one copy.
  void register_full_blocks(std::span<const int32_t> tokens, uint64_t salt, KvBlockPool& pool);

 private:
  uint32_t block_rows_;
  uint32_t rows_ = 0;
  std::vector<uint32_t> blocks_;
  uint32_t dropped_ = 0;        // kDropped entries in blocks_
  std::vector<uint32_t> spare_;  // held, in no entry (reserve_spares)
  bool recycle_ = false;         // drop() keeps what it can as spares
  std::vector<KvPrefix> keys_;  // KvPrefix of leading full blocks 0..keys_.size()-1, each held by this table
};

}  // namespace reach
