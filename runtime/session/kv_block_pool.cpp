#include "runtime/session/kv_block_pool.hpp"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace reach {

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t fnv_bytes(uint64_t h, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    h ^= (value >> (8 * i)) & 0xff;
    h *= kFnvPrime;
  }
  return h;
}

// splitmix64's finalizer: every output bit depends on every input bit (FNV-1a's low bits barely reach
// its high ones).
uint64_t finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

void KvSaltHasher::add(const void* data, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) h_ = fnv_bytes(h_, static_cast<const uint8_t*>(data)[i], 1);
}

uint64_t KvSaltHasher::value() const { return finalize(h_); }

namespace {

std::string block_name(uint32_t id) { return "KV block " + std::to_string(id); }

}  // namespace

uint64_t kv_block_hash(uint64_t parent_hash, std::span<const int32_t> tokens, uint64_t salt) {
  uint64_t h = fnv_bytes(kFnvOffset, parent_hash, 8);
  h = fnv_bytes(h, salt, 8);
  for (int32_t t : tokens) h = fnv_bytes(h, uint32_t(t), 4);
  return finalize(h);
}

KvBlockPool::KvBlockPool(uint32_t blocks, uint32_t block_rows, KvBlockHashFn hash)
    : block_rows_(block_rows), hash_(hash ? hash : kv_block_hash) {
  if (blocks == 0 || block_rows == 0)
    throw Error(ErrorCode::invalid_argument, "a KV block pool of " + std::to_string(blocks) + " blocks of " +
                                                 std::to_string(block_rows) +
                                                 " rows holds nothing: give it at least one block of one row");
  if (uint64_t(blocks) * block_rows > UINT32_MAX)
    throw Error(ErrorCode::invalid_argument,
                "a KV block pool of " + std::to_string(blocks) + " blocks of " + std::to_string(block_rows) +
                    " rows has more than 2^32 - 1 rows, past the device's 32-bit row index: use fewer blocks");
  blocks_.resize(blocks);
  free_.reserve(blocks);
  for (uint32_t id = blocks; id-- > 0;) free_.push_back(id);
}

const KvBlockPool::Block& KvBlockPool::at(uint32_t id, const char* what) const {
  if (id >= blocks_.size())
    throw Error(ErrorCode::invalid_argument, std::string(what) + " of " + block_name(id) + ", past the pool's " +
                                                 std::to_string(blocks_.size()) +
                                                 " blocks: a block id from another pool?");
  return blocks_[id];
}

KvBlockPool::Block& KvBlockPool::at(uint32_t id, const char* what) {
  return const_cast<Block&>(static_cast<const KvBlockPool*>(this)->at(id, what));
}

void KvBlockPool::check_tokens(std::span<const int32_t> tokens, const char* what) const {
  if (tokens.size() != block_rows_)
    throw Error(ErrorCode::invalid_argument, std::string(what) + " got " + std::to_string(tokens.size()) +
                                                 " tokens: only a full block (" + std::to_string(block_rows_) +
                                                 " tokens) is indexed");
}

std::optional<uint32_t> KvBlockPool::allocate() {
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    id = lru_.front();
    unindex(id);  // a cached block goes to free_
    free_.pop_back();
    ++evictions_;
  } else {
    return std::nullopt;
  }
  blocks_[id].refs = 1;
  ++used_;
  return id;
}

void KvBlockPool::retain(uint32_t id) {
  Block& b = at(id, "retain");
  if (b.refs == 0) {
    if (!b.indexed)
      throw Error(ErrorCode::invalid_argument,
                  "retain of " + block_name(id) + ", which is free: allocate() a block rather than retain a free one");
    lru_.erase(b.lru);  // revived: no longer evictable
    ++used_;
  }
  ++b.refs;
}

void KvBlockPool::release(uint32_t id) {
  Block& b = at(id, "release");
  if (b.refs == 0)
    throw Error(ErrorCode::invalid_argument,
                "release of " + block_name(id) +
                    ", which nobody holds (released twice?): release once per allocate, retain or lookup");
  if (--b.refs > 0) return;
  --used_;
  if (b.indexed) {
    lru_.push_back(id);
    b.lru = std::prev(lru_.end());
  } else {
    free_.push_back(id);
  }
}

uint32_t KvBlockPool::refcount(uint32_t id) const { return at(id, "refcount").refs; }

bool KvBlockPool::indexed(uint32_t id) const { return at(id, "indexed").indexed; }

std::optional<uint32_t> KvBlockPool::find(KvPrefix parent, std::span<const int32_t> tokens, uint64_t salt) const {
  check_tokens(tokens, "a prefix lookup");
  auto [it, end] = index_.equal_range(hash_(parent.hash, tokens, salt));
  // The hash only picks candidates: the entry itself must match, so a collision never maps another prefix.
  for (; it != end; ++it) {
    const Block& b = blocks_[it->second];
    if (b.parent == parent && b.salt == salt &&
        std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end()))
      return it->second;
  }
  return std::nullopt;
}

std::optional<uint32_t> KvBlockPool::lookup(KvPrefix parent, std::span<const int32_t> tokens, uint64_t salt) {
  std::optional<uint32_t> id = find(parent, tokens, salt);
  ++lookups_;
  if (id) {
    retain(*id);
    ++hits_;
    hit_tokens_ += block_rows_;
  }
  return id;
}

KvPrefix KvBlockPool::register_full(uint32_t id, KvPrefix parent, std::span<const int32_t> tokens, uint64_t salt) {
  Block& b = at(id, "register_full");
  if (b.refs == 0)
    throw Error(ErrorCode::invalid_argument,
                "register_full of " + block_name(id) + ", which nobody holds: register a block while holding it");
  check_tokens(tokens, "register_full");
  const std::optional<uint32_t> existing = find(parent, tokens, salt);
  if (existing == id) return prefix(id);
  if (b.indexed) {
    if (b.refs > 1)
      throw Error(ErrorCode::invalid_argument,
                  "register_full of " + block_name(id) + " with other content than it is indexed with, while " +
                      std::to_string(b.refs) +
                      " tables hold it: its shared rows were written without KvBlockTable::writable_block");
    unindex(id);
  }
  if (existing) return prefix(*existing);
  b.indexed = true;
  b.hash = hash_(parent.hash, tokens, salt);
  b.node = next_node_++;
  b.parent = parent;
  b.salt = salt;
  b.tokens.assign(tokens.begin(), tokens.end());
  index_.emplace(b.hash, id);
  return prefix(id);
}

KvPrefix KvBlockPool::prefix(uint32_t id) const {
  const Block& b = at(id, "prefix");
  if (!b.indexed)
    throw Error(ErrorCode::invalid_argument,
                "prefix of " + block_name(id) + ", which is not in the prefix index: register_full it first");
  return KvPrefix{b.hash, b.node};
}

std::vector<uint32_t> KvBlockPool::match_prefix(std::span<const int32_t> prompt, uint64_t salt) {
  std::vector<uint32_t> ids;
  if (prompt.empty()) return ids;
  // Never the block holding the last token: the caller computes that row for its logits.
  const size_t max_blocks = (prompt.size() - 1) / block_rows_;
  KvPrefix parent;
  for (size_t i = 0; i < max_blocks; ++i) {
    const std::optional<uint32_t> id = lookup(parent, prompt.subspan(i * block_rows_, block_rows_), salt);
    if (!id) break;
    ids.push_back(*id);
    parent = prefix(*id);
  }
  return ids;
}

void KvBlockPool::unindex(uint32_t id) {
  Block& b = at(id, "unindex");
  if (!b.indexed) return;
  auto [it, end] = index_.equal_range(b.hash);
  while (it != end && it->second != id) ++it;
  if (it == end)
    throw Error(ErrorCode::internal,
                block_name(id) + " is marked indexed but is not in the prefix index: a bug in reach");
  index_.erase(it);
  // Its entry's serial is never reused, so the entries registered after it become unreachable.
  b.indexed = false;
  b.tokens.clear();
  if (b.refs == 0) {
    lru_.erase(b.lru);
    free_.push_back(id);
  }
}

KvBlockTable::KvBlockTable(KvBlockTable&& other) noexcept
    : block_rows_(other.block_rows_),
      rows_(std::exchange(other.rows_, 0)),
      blocks_(std::move(other.blocks_)),
      dropped_(std::exchange(other.dropped_, 0)),
      spare_(std::move(other.spare_)),
      recycle_(std::exchange(other.recycle_, false)),
      keys_(std::move(other.keys_)) {
  other.blocks_.clear();
  other.spare_.clear();
  other.keys_.clear();
}

KvBlockTable& KvBlockTable::operator=(KvBlockTable&& other) noexcept {
  if (this != &other) {
    block_rows_ = other.block_rows_;
    rows_ = std::exchange(other.rows_, 0);
    blocks_ = std::move(other.blocks_);
    dropped_ = std::exchange(other.dropped_, 0);
    spare_ = std::move(other.spare_);
    recycle_ = std::exchange(other.recycle_, false);
    keys_ = std::move(other.keys_);
    other.blocks_.clear();
    other.spare_.clear();
    other.keys_.clear();
  }
  return *this;
}

bool KvBlockTable::ensure(uint32_t rows, KvBlockPool& pool) {
  if (rows <= rows_) return true;
  const uint64_t need = (uint64_t(rows) + block_rows_ - 1) / block_rows_;
  if (need > blocks_.size()) {
    // Checked first so a refusal evicts no cached block.
    const uint64_t missing = need - blocks_.size();
    if (missing > spare_.size() && missing - spare_.size() > pool.available()) return false;
    const size_t had = blocks_.size();
    blocks_.reserve(need);
    while (blocks_.size() < need) {
      if (!spare_.empty()) {
        blocks_.push_back(spare_.back());
        spare_.pop_back();
        continue;
      }
      const std::optional<uint32_t> id = pool.allocate();
      if (!id) {  // cannot happen after the check; handled rather than assumed
        while (blocks_.size() > had) {
          spare_.push_back(blocks_.back());   // spares and new blocks alike: held, in no entry
          blocks_.pop_back();
        }
        return false;
      }
      blocks_.push_back(*id);
    }
  }
  rows_ = rows;
  return true;
}

bool KvBlockTable::reserve_spares(uint32_t blocks, KvBlockPool& pool) {
  recycle_ = true;
  if (blocks <= held()) return true;
  const uint32_t more = blocks - held();
  if (more > pool.available()) return false;
  for (uint32_t i = 0; i < more; ++i) {
    const std::optional<uint32_t> id = pool.allocate();
    if (!id) return false;   // cannot happen after the check; what was taken stays a spare
    spare_.push_back(*id);
  }
  return true;
}

void KvBlockTable::rewind(uint32_t rows, KvBlockPool& pool) {
  if (rows > rows_)
    throw Error(ErrorCode::invalid_argument, "rewind of a KV block table to row " + std::to_string(rows) +
                                                 ", past its " + std::to_string(rows_) +
                                                 " rows: use ensure() to grow it");
  const size_t keep = (size_t(rows) + block_rows_ - 1) / block_rows_;
  // The last block first, so the least recently released (the first evicted) is the deepest: heads of
  // prefixes, the most shareable, stay cached longest.
  while (blocks_.size() > keep) {
    if (blocks_.back() == kDropped)
      --dropped_;
    else
      pool.release(blocks_.back());
    blocks_.pop_back();
  }
  rows_ = rows;
  keys_.resize(std::min(keys_.size(), size_t(rows / block_rows_)));
  if (rows == 0) {   // an empty sequence reserves nothing
    for (uint32_t id : spare_) pool.release(id);
    spare_.clear();
    recycle_ = false;
  }
}

uint32_t KvBlockTable::drop(uint32_t first, uint32_t end, KvBlockPool& pool) {
  const size_t from = (size_t(first) + block_rows_ - 1) / block_rows_;
  const size_t to = std::min<size_t>(std::min(end, rows_) / block_rows_, blocks_.size());
  uint32_t released = 0;
  for (size_t i = from; i < to; ++i) {
    if (blocks_[i] == kDropped) continue;
    if (recycle_ && pool.refcount(blocks_[i]) == 1) {
      pool.unindex(blocks_[i]);
      spare_.push_back(blocks_[i]);
    } else {
      pool.release(blocks_[i]);
    }
    blocks_[i] = kDropped;
    ++dropped_;
    ++released;
  }
  return released;
}

void KvBlockTable::release_all(KvBlockPool& pool) { rewind(0, pool); }

KvBlockTable KvBlockTable::fork(KvBlockPool& pool) const {
  KvBlockTable t(pool);
  for (uint32_t id : blocks_) {
    if (id != kDropped) pool.retain(id);
    t.blocks_.push_back(id);
  }
  t.dropped_ = dropped_;
  t.rows_ = rows_;
  t.keys_ = keys_;
  return t;
}

std::optional<uint32_t> KvBlockTable::writable_block(uint32_t row, KvBlockPool& pool,
                                                     const std::function<void(uint32_t from, uint32_t to)>& copy) {
  if (row >= rows_)
    throw Error(ErrorCode::invalid_argument, "write of row " + std::to_string(row) + " of a KV block table of " +
                                                 std::to_string(rows_) + " rows: ensure() the rows first");
  const size_t i = row / block_rows_;
  const uint32_t id = blocks_[i];
  if (id == kDropped)
    throw Error(ErrorCode::internal, "write of row " + std::to_string(row) + " into a dropped KV block: a bug in reach");
  if (pool.refcount(id) > 1) {
    const std::optional<uint32_t> fresh = pool.allocate();
    if (!fresh) return std::nullopt;
    try {
      copy(id, *fresh);
    } catch (...) {
      pool.release(*fresh);
      throw;
    }
    pool.release(id);
    blocks_[i] = *fresh;
  } else {
    pool.unindex(id);
  }
  // This block's rows change: neither it nor the blocks after it hold their registered prefixes.
  keys_.resize(std::min(keys_.size(), i));
  return blocks_[i];
}

uint32_t KvBlockTable::physical_row(uint32_t row) const {
  const size_t i = row / block_rows_;
  if (i >= blocks_.size() || blocks_[i] == kDropped)
    throw Error(ErrorCode::invalid_argument, "physical row of row " + std::to_string(row) + " of a KV block table of " +
                                                 std::to_string(blocks_.size()) + " blocks: ensure() the rows first, "
                                                 "and never ask for a dropped one");
  return blocks_[i] * block_rows_ + row % block_rows_;
}

uint32_t KvBlockTable::match_prefix(std::span<const int32_t> prompt, uint64_t salt, KvBlockPool& pool) {
  if (!blocks_.empty())
    throw Error(ErrorCode::invalid_argument, "match_prefix on a KV block table that holds " +
                                                 std::to_string(blocks_.size()) +
                                                 " blocks: match a prompt's prefix before computing any row");
  blocks_ = pool.match_prefix(prompt, salt);
  keys_.clear();
  for (uint32_t id : blocks_) keys_.push_back(pool.prefix(id));
  rows_ = uint32_t(blocks_.size()) * block_rows_;
  return rows_;
}

void KvBlockTable::register_full_blocks(std::span<const int32_t> tokens, uint64_t salt, KvBlockPool& pool) {
  if (tokens.size() > rows_)
    throw Error(ErrorCode::invalid_argument, "register_full_blocks got " + std::to_string(tokens.size()) +
                                                 " tokens for a KV block table of " + std::to_string(rows_) +
                                                 " rows: one token per computed row");
  const size_t full = tokens.size() / block_rows_;
  for (size_t i = keys_.size(); i < full; ++i) {
    const KvPrefix parent = i ? keys_[i - 1] : KvPrefix{};
    const std::span<const int32_t> block = tokens.subspan(i * block_rows_, block_rows_);
    const uint32_t id = blocks_[i];
    if (id == kDropped) break;   // gone before it was registered: the blocks after it have no parent
    const KvPrefix key = pool.register_full(id, parent, block, salt);
    if (!pool.indexed(id)) {
      // Another block already holds these rows: share it and let this copy go.
      const uint32_t other = *pool.find(parent, block, salt);
      pool.retain(other);
      pool.release(id);
      blocks_[i] = other;
    }
    keys_.push_back(key);
  }
}

}  // namespace reach
