#pragma once
// A paged KV cache on the device: one pool of KV blocks per model that many Sessions share
// (SessionOptions::kv_pool).  Each layer has a K and a V buffer of pool_rows() rows per kv head (and a
// rotated-key buffer for the layers of a dual-branch scheme), block b being rows [b·B, (b+1)·B) of
// each head's slab; the bookkeeping (free, used and cached blocks, the prefix index) is KvBlockPool's.
// A session takes blocks as it grows and gives them back when it rewinds or ends; a prompt whose
// leading blocks another sequence already computed maps them instead of computing them again.
//
// Memory is reserved once, for the pool, instead of a whole context per session; when the pool is
// full a session's step fails before it runs, with every session intact (the server queues instead).
// Threads: as KvBlockPool, one thread at a time (the sessions that share it, too).
#include <cstdint>
#include <string>
#include <vector>

#include "base/kv_type.hpp"
#include "engine/memory.hpp"
#include "kernels/attention.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/key_calibration.hpp"
#include "runtime/session/kv_block_pool.hpp"

namespace reach {

struct KvPoolOptions {
  uint32_t tokens = 0;       // rows the pool holds (rounded up to whole blocks)
  uint64_t bytes = 0;        // or, when tokens is 0, the device bytes it may take (whole blocks that fit)
  uint32_t block_rows = 0;   // rows per block, a power of two; 0 = default_block_rows(device)
  KvType cache_type_k = KvType::f16, cache_type_v = KvType::f16;
  // Keep rotated keys for every layer too (LayerCache::k_rot): sessions of a dual-branch scheme
  // (ReRoPE, Leaky ReRoPE, Self-Extend) read them for the window branch.  A session that wants them
  // refuses a pool without them.
  bool rotated_keys = false;
  // q4_0 keys: stored centred and smoothed, calibrated on the first prefill chunk any session of the
  // pool runs (runtime/session/key_calibration.hpp); false: plain q4_0 blocks.
  bool calibrate_keys = true;
  // Start that calibration from this file's statistics (SessionOptions::key_calib_file).
  std::string key_calib_file;
};

// The most bytes one K or V binding of the attention kernels may span for these types: in the texel
// variant a binding holds at most max_texel_buffer_elements texels of its type's view.  Sessions and
// pools size their caches by it.
uint64_t kv_binding_limit(const Capabilities& caps, const AttentionTuning& tuning, KvType k, KvType v);

class KvPool {
 public:
  // The kernels read one table entry per key, so correctness never depends on the block size; it sets
  // how finely prefixes are shared, how long a table is, and how many blocks one subgroup's keys span.
  // The default is the device's widest subgroup, at least 16 (vLLM's default) and at most 64: a
  // subgroup reading consecutive keys then meets one block, one contiguous run of rows, not several
  // (lavapipe and Intel: 16; NVIDIA and Apple: 32; AMD's wave64: 64).
  static uint32_t default_block_rows(const Capabilities& caps);

  // The device bytes one row of every layer takes in a pool of these options (KvPoolOptions::bytes
  // divides by it).
  static uint64_t row_bytes(const ModelConfig& c, const KvPoolOptions& options);

  // Checks the sizes against one binding per layer and the memory left (out_of_memory naming the
  // pool's size and the largest that fits), then allocates every layer's buffers.
  KvPool(Model& model, const KvPoolOptions& options);
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  Model& model() const { return model_; }
  const KvPoolOptions& options() const { return options_; }
  KvBlockPool& blocks() { return blocks_; }
  const KvBlockPool& blocks() const { return blocks_; }
  uint32_t block_rows() const { return blocks_.block_rows(); }
  uint32_t pool_rows() const { return blocks_.total() * blocks_.block_rows(); }
  const Buffer& k(size_t layer) const { return k_[layer]; }
  const Buffer& v(size_t layer) const { return v_[layer]; }
  const Buffer* k_rot(size_t layer) const { return k_rot_.empty() ? nullptr : &k_rot_[layer]; }
  // The keys' calibration every session of the pool stores its keys by (enabled for q4_0 keys).
  KeyCalibration& key_calibration() { return key_calib_; }
  uint64_t bytes() const { return bytes_; }                     // device bytes of every layer's buffers
  uint64_t bytes_per_token() const { return bytes_per_token_; } // one row of every layer
  // "KV pool 24.0 MiB: 256 blocks of 16 rows (4096 tokens), 2 used, 1 cached, K f16 V f16"
  std::string describe() const;

  // Copies block `from`'s rows to block `to` in every layer and head, and waits (copy-on-write).
  void copy_block(uint32_t from, uint32_t to);

 private:
  Model& model_;
  KvPoolOptions options_;
  KvBlockPool blocks_;
  std::vector<Buffer> k_, v_, k_rot_;
  KeyCalibration key_calib_;
  uint64_t bytes_ = 0, bytes_per_token_ = 0;
};

}  // namespace reach
