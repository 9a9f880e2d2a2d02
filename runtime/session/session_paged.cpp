// The Session's paged side (SessionOptions::kv_pool): mapping a prompt's cached blocks, reserving the
// blocks a step or a request needs (copy-on-write for shared ones), and giving back the blocks a
// windowed sequence leaves behind.
#include "runtime/session/session.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "runtime/session/kv_block_pool.hpp"
#include "runtime/session/kv_pool.hpp"

namespace reach {

namespace {

// A step the pool cannot hold: kv_pool_full (the scheduler requeues on it), with what it needs, what is free
// and what to do.
Error kv_pool_full(const KvPool& pool, const std::string& need) {
  return Error(ErrorCode::kv_pool_full, "the KV pool is full: " + need + " and " +
                                            std::to_string(pool.blocks().available()) + " more are free or cached (" +
                                            pool.describe() + "); retry when another sequence ends or rewinds, or make "
                                            "the pool larger");
}

}  // namespace

KvPoolOptions Session::pool_options(const Model& model, const SessionOptions& options) {
  KvPoolOptions po;
  po.cache_type_k = options.cache_type_k;
  po.cache_type_v = options.cache_type_v;
  po.rotated_keys = keeps_rotated_keys(model, options);
  return po;
}

uint32_t Session::map_prefix(std::span<const int32_t> prompt) {
  need_idle("map_prefix");
  // Blocks held at position 0 were reserved (reserve_kv) after a match already made, or found nothing.
  if (!table_ || pos_ != 0 || !table_->blocks().empty() || prompt.empty()) return 0;
  check_ids(prompt);
  const uint32_t done = table_->match_prefix(prompt.first(std::min<size_t>(prompt.size(), capacity_)), prefix_salt_,
                                             pool_->blocks());
  tokens_.assign(prompt.begin(), prompt.begin() + done);
  pos_ = done;
  return done;
}

void Session::reserve_kv(uint32_t rows) {
  need_idle("reserve_kv");
  rows = std::min(rows, capacity_);
  const uint32_t B = table_ ? pool_->block_rows() : 1;
  if (!drop_window_ || (rows + B - 1) / B <= window_peak_blocks()) return reserve_rows(rows);
  // A windowed session runs within its peak: it holds that many blocks and recycles the ones its
  // window leaves behind.  Mapped blocks others hold too go back when dropped, so they count extra.
  uint32_t shared = 0;
  for (uint32_t id : table_->blocks())
    if (id != KvBlockTable::kDropped && pool_->blocks().refcount(id) > 1) ++shared;
  if (!table_->reserve_spares(window_peak_blocks() + shared, pool_->blocks()))
    throw kv_pool_full(*pool_, "this windowed sequence runs in " + std::to_string(window_peak_blocks() + shared) +
                                   " blocks of " + std::to_string(B) + " rows");
}

uint32_t Session::window_peak_blocks() const {
  const uint64_t B = pool_->block_rows();
  // The sink blocks, the anchor, the window's and a chunk's, and a copy-on-write spare.
  return uint32_t((drop_sinks_ + B - 1) / B + (uint64_t(drop_window_) + chunk_ + B - 1) / B + 3);
}

void Session::drop_behind_window() {
  if (!drop_window_ || pos_ < drop_window_) return;
  const uint32_t B = pool_->block_rows();
  // Query pos_ and later see keys [pos_ - window + 1, ...) and the sinks; blocks wholly below that
  // start are behind, the newest of them the anchor.
  const uint32_t behind = (pos_ - drop_window_ + 1) / B;
  if (behind < 2) return;
  const uint32_t end = (behind - 1) * B;
  if (end <= drop_sinks_) return;
  // Entries below dropped_to_ went back in earlier calls: only the newly passed ones are looked at.
  if (end <= dropped_to_) return;
  if (table_->drop(std::max(drop_sinks_, dropped_to_), end, pool_->blocks()) > 0 || dropped_to_) dropped_to_ = end;
}

void Session::check_window_prefill(uint32_t n) const {
  const KvBlockPool& pool = pool_->blocks();
  const uint64_t B = pool.block_rows();
  const uint64_t rows = uint64_t(pos_) + n;
  const uint64_t peak = std::min<uint64_t>((rows + B - 1) / B, window_peak_blocks());
  const uint64_t need = peak > table_->held() ? peak - table_->held() : 0;
  if (need > pool.available())
    throw kv_pool_full(*pool_, "this windowed prefill holds up to " + std::to_string(peak) + " blocks of " +
                                   std::to_string(B) + " rows at once");
}

void Session::reserve_rows(uint32_t rows) {
  if (!table_) return;
  drop_behind_window();
  KvBlockPool& pool = pool_->blocks();
  const uint32_t B = pool.block_rows(), had = uint32_t(table_->blocks().size()), before = table_->rows();
  const uint32_t need = (rows + B - 1) / B;   // entries: dropped ones are never taken again
  if (!table_->ensure(rows, pool))
    throw kv_pool_full(*pool_, "this step needs " + std::to_string(need - had) + " more blocks of " +
                                   std::to_string(B) + " rows");
  // Copy-on-write: the blocks rows [pos_, rows) go to must be this session's alone.
  for (uint32_t r = pos_ / B * B; r < rows; r += B)
    if (!table_->writable_block(r, pool, [&](uint32_t from, uint32_t to) { pool_->copy_block(from, to); })) {
      if (table_->rows() > before) table_->rewind(before, pool);   // give back what this call took
      throw kv_pool_full(*pool_, "a shared block this sequence writes into needs a copy");
    }
}

}  // namespace reach
