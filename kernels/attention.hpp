#pragma once
// Attention on the KV cache: the KV-cache store, flash-style tiled prefill and
// split-K decode, for the per-layer AttentionSpec of base/attention_spec.hpp.
//
// One kernel family covers every position scheme through the dual-branch
// contract of docs EXTRAPOLATION.md §1.2 / §5.6:
//   score(i, m) = r < W ? q1_i·k1_m : q2_i·k2_m      (r = i - m, causal)
// with branch 1 = plain RoPE at (i, m) and branch 2 = the remapped rotation.
// Tiles entirely inside / outside the window compute one branch; only tiles
// straddling r = W compute both and select per element.
#include <cstdint>
#include <string>
#include <vector>

#include "base/attention_spec.hpp"
#include "base/kv_type.hpp"
#include "engine/capabilities.hpp"
#include "engine/command.hpp"
#include "engine/memory.hpp"
#include "kernels/kernels.hpp"

namespace reach {

class Device;

// cos/sin tables: element [p][j] = (cos(p·θ_j)·af, sin(p·θ_j)·af) as two f32,
// p in [0, positions), j in [0, rotary_dim/2).  Computed on the host in double.
struct RopeTable {
  const Buffer* buffer = nullptr;
  uint32_t positions = 0;
  uint32_t pairs = 0;
};

// Positions of the tokens in flight, read by the kernels from a small buffer so
// a recorded decode step can be resubmitted with only this buffer changing.
// A paged cache (LayerCache::block_rows > 0) reads its block table from the same
// buffer: `blocks` uint32 pool block ids right after these 16 bytes
// (paged_step_bytes), block j holding positions [j·B, (j+1)·B).
struct StepParams {
  uint32_t pos0;      // absolute position of the first new token
  uint32_t n_new;     // tokens in this step (prefill chunk length, 1 in decode)
  uint32_t blocks;    // paged: the block table's entries (keys past blocks·B are dropped)
  uint32_t pad1;
};
// Bytes of the step buffer of a paged cache whose table has room for `blocks` entries.
constexpr uint64_t paged_step_bytes(uint32_t blocks) { return sizeof(StepParams) + uint64_t(blocks) * 4; }

// Kernel tunables, chosen from the device's capabilities (never its vendor);
// tests and benchmarks may force values.  0 = choose.
struct AttentionTuning {
  // Decode kernel: 1 = workgroup per split with shared-memory tiles and
  // barriers (GPUs), 2 = one subgroup per split, each lane walking its own keys
  // with its softmax in registers, no shared memory or barriers (CPU devices;
  // needs subgroup arithmetic and a fixed subgroup size).
  uint32_t decode_variant = 0;
  uint32_t decode_group = 0;   // decode workgroup size (variant 1; variant 2 runs one subgroup)
  uint32_t decode_keys = 0;    // keys per decode tile (variant 1)
  uint32_t decode_lane_keys = 0;   // keys per lane per tile (variant 2: tile = subgroup x this)
  uint32_t split_min = 0;      // decode: fewest keys per split
  uint32_t max_splits = 0;     // decode: most splits (more keys per split beyond)
  // Prefill: keys scored per online-softmax block within a tile of one key per
  // lane (a power of two <= the subgroup size).  8 (lavapipe's default tile: one
  // block), so the unrolled code stays small enough for the driver's compiler.
  uint32_t prefill_key_block = 0;
  // Read the K/V cache and rope tables through uniform texel buffers (CPU
  // devices: llvmpipe vectorises texel fetches, not per-lane buffer loads).
  // 0 = choose, 1 = storage buffers, 2 = texel buffers.
  uint32_t texel = 0;
  static AttentionTuning from(const Capabilities& caps);
};

// Tile classes of one prefill chunk (same rule as the kernel, counted on the
// host for benchmarks): per (query tile, kv tile) of one workgroup row.
struct TileCounts {
  uint64_t skipped = 0;      // fully masked by the sliding window
  uint64_t window = 0;       // branch 1 only (or single-branch schemes)
  uint64_t outside = 0;      // branch 2 only
  uint64_t mixed = 0;        // both branches, per-element select
  std::string str() const;
};

// Per-layer K and V caches: [n_kv_heads][rows()] rows of head_dim values, each
// row kv_row_bytes(type, head_dim) bytes (f32, f16, or q8_0 / q4_0 blocks:
// base/kv_type.hpp).
struct LayerCache {
  const Buffer* k = nullptr;
  const Buffer* v = nullptr;
  uint32_t capacity = 0;   // positions the cache serves (keys [0, capacity))
  // Optional, for a raw cache with a dual-branch spec (ReRoPE, Leaky,
  // Self-Extend): the same keys rotated at their positions, written by
  // kv_store, so branch 1 (the window) reads them like plain RoPE instead of
  // rotating raw keys on every read.  Same shape as k.
  const Buffer* k_rot = nullptr;
  // > 0: a ring cache for a sliding-window layer (spec.window > 0): the sinks
  // keep rows [0, sinks), key m >= sinks lives in row sinks + (m - sinks) mod
  // ring, so memory is O(window), not O(context).  A prefill chunk of n rows
  // needs ring >= window + n - 1 (its keys overwrite only keys it no longer
  // sees); decode needs ring >= window.
  uint32_t ring = 0;
  // How rows are stored: keys (and k_rot) as k_type, values as v_type.  Rows are
  // quantized as kv_store (or decode_fused) writes them; every kernel reads them
  // back to f32.  decode_fused scores the new token's own key and value at full
  // precision in the step that stores them; later steps read them as stored.
  KvType k_type = KvType::f32, v_type = KvType::f32;
  // > 0: a paged cache.  k, v (and k_rot) are a pool of pool_rows rows per kv
  // head, in blocks of block_rows rows (a power of two), which many sequences
  // share; this sequence's keys live in the blocks its block table names (in the
  // step buffer: StepParams), capacity / block_rows of them at most.  Not with a
  // ring: a paged sliding-window layer gives the blocks behind its window back.
  uint32_t block_rows = 0;
  uint32_t pool_rows = 0;
  // Optional: keys stored centred and smoothed (shaders/attention_key_calib.glsl), by the layer's
  // calibration (key_calib_bytes; Attention::kv_calibrate fills it once).  Exact for any calibration
  // where key_calib_applies; it lowers what q4_0 keys cost.  buffer VK_NULL_HANDLE: none.
  BufferRange key_calib{};
  // Rows per kv head: sinks + ring for a ring cache, the pool's for a paged one, else capacity.
  uint32_t rows(const AttentionSpec& spec) const {
    return ring ? spec.sinks + ring : block_rows ? pool_rows : capacity;
  }
};

// Per-head RMSNorms of q and k (Gemma 3, Qwen3): weights f32 [head_dim] each,
// applied by decode_fused to the query rows and the new key before anything
// else; q.buffer == VK_NULL_HANDLE: none.
struct QkRmsNorm {
  BufferRange q, k;
  float eps = 0;
};

// The rows of a batched decode_fused: `count` sequences of one paged pool (the same cache buffers, layer
// spec and rope tables), each with its own position and block table, in one dispatch.  Row r's step
// record (StepParams and its block table) starts r·step_stride bytes into the step range, its scratch
// r·scratch_stride bytes into the scratch range (each at least what one row needs, multiples of 4), and
// its q, k_new, v_new and out rows are row r of those activations.  count 1: one sequence.
struct DecodeRows {
  uint32_t count = 1;
  uint64_t step_stride = 0;
  uint64_t scratch_stride = 0;
};

// Whether a cache for `spec` benefits from LayerCache::k_rot.
bool wants_rotated_keys(const AttentionSpec& spec);
// Whether a layer of this spec can store its keys centred and smoothed (LayerCache::key_calib): the
// shift q·mu must be one the softmax ignores (no sink logits, no soft cap) and the stored key the one
// scored (no raw keys turned inside the kernel, no dual branches).  KeyNorm / CosA keys (unit length)
// keep plain blocks: their statistics would need each key's norm first, and Mesa 22.3's lavapipe
// miscompiled the kernel that took it (Mesa 26 ran it right).
bool key_calib_applies(const AttentionSpec& spec);
// Rows the statistics need before Attention::kv_calibrate takes mu from them (fewer keep the identity).
inline constexpr uint32_t kKeyCalibMinRows = 16;
// Rows from which it also smooths (s from the statistics; below, s = 1 and only mu is taken): on SmolLM2, s
// from the first 256 tokens cost more than it saved (tools/kv_quant_study.py).
inline constexpr uint32_t kKeyCalibSmoothRows = 512;
// Rows a cache that refines its calibration takes statistics from, at most (then the kernel only returns).
inline constexpr uint32_t kKeyCalibMaxRows = 8192;
// The first rows of each kv head an unpaged calibrated cache keeps exact (f32, in the calibration): the
// attention sinks, whose rounding costs q4_0 keys most (tools/kv_quant_study.py, +sink).
inline constexpr uint32_t kKeyCalibExactRows = 4;
// Bytes of one layer's calibration: a 16-byte header (u32 flag, rows taken, rows to take at most), mu and s,
// f32 [n_kv_heads][2][head_dim], then the running statistics, f32 [n_kv_heads][4][head_dim] (the mean raw
// key, the rotated key's mean and sum of squared deviations, the rotated queries' mean square), then the
// exact rows, f32 [n_kv_heads][kKeyCalibExactRows][head_dim] (a cache of its own keeps its first rows there
// unrounded as well: shaders/attention_key_calib.glsl).
uint64_t key_calib_bytes(const AttentionSpec& spec);
// The calibration a layer starts from: flag 0 (to calibrate at the next prefill), mu = 0, s = 1, no
// statistics, taking up to `cap` rows (0: the first chunk's only); frozen: flag 2 (the identity kept: the
// cache's first rows came before any calibration could).
std::vector<float> key_calib_identity(const AttentionSpec& spec, bool frozen = false, uint32_t cap = 0);
BufferRange key_calib_range(const AttentionSpec& spec, const LayerCache& cache);

// Whether keys of type k_type are stored Walsh-Hadamard rotated for `spec` (kv_hadamard of
// base/kv_type.hpp): not for raw keys that the kernels turn by their position.
bool hadamard_keys(const AttentionSpec& spec, KvType k_type);

// The lanes of the one-subgroup kernels (prefill, the lanes decode): the width every pipeline runs
// where the device has one or can pin it (Capabilities::fixed_subgroup), else subgroup_min, so that a
// workgroup fits in one subgroup whatever width the driver picks.
uint32_t attention_lanes(const Capabilities& caps);
// The subgroup size those pipelines require (PipelineDesc::required_subgroup): attention_lanes where it
// is the fixed width, 0 where the workgroup merely fits in any subgroup the device may run.
uint32_t attention_required_subgroup(const Capabilities& caps);

class Attention {
 public:
  explicit Attention(Device& device);
  Attention(Device& device, const AttentionTuning& tuning);
  const AttentionTuning& tuning() const { return tuning_; }

  // Writes k_new, v_new ([n_new, n_kv_heads*head_dim] f32) into the cache at
  // positions [pos0, pos0+n_new) (rotating k when spec.cache == rotated and spec.rope).
  // rows.count > 1: a batched decode step over a paged cache, row r of k_new / v_new the one new row of the
  // sequence whose step record is r-th (DecodeRows), all in one dispatch.
  void kv_store(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1, const BufferRange& step,
                const Act& k_new, const Act& v_new, const LayerCache& cache, const DecodeRows& rows = {});

  // Merges the chunk's q rows and new keys (as they will be stored) into cache.key_calib's statistics while
  // fewer than its cap rows were taken, and sets mu and s from all of them when its flag is 0 (at the
  // cache's first prefill, or after KeyCalibration::restart); otherwise the kernel returns at once, so a
  // recorded prefill records it every time.  Before kv_store of the same rows, with a barrier between.
  // mu: the mean raw key turned by the average rotation over positions [0, cache.capacity); s from
  // kKeyCalibSmoothRows rows on, else 1.  Fewer than kKeyCalibMinRows rows keep the identity (flag 2).
  void kv_calibrate(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1, const BufferRange& step,
                    const Act& q, const Act& k_new, const LayerCache& cache);

  // out [n_new, n_heads*head_dim] = attention of the raw (un-rotated) q rows
  // [n_new, n_heads*head_dim] over keys [0, pos0+n_new) of the cache.
  // max_new bounds n_new for sizing dispatches (the actual count comes from step).
  // sinks: the per-head sink logits (f32 [n_heads]) when spec.sink_logits.
  void prefill(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1, const RopeTable& table2,
               const BufferRange& step, const Act& q, const LayerCache& cache, const Act& out, uint32_t max_new,
               const BufferRange& sinks = {});

  // One query row (n_new == 1): keys split across workgroups, then combined.
  // The split count is fixed here from the capacity, so the recorded command
  // buffer serves every position (splits past the live keys exit at once).
  // rows.count > 1: the rows of a batched step over a paged cache, as decode_fused takes them (DecodeRows).
  void decode(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1, const RopeTable& table2,
              const BufferRange& step, const Act& q, const LayerCache& cache, const Act& out,
              const BufferRange& scratch,   // scratch: decode_scratch_bytes(spec, cache.capacity) bytes
              const BufferRange& sinks = {}, const DecodeRows& rows = {});

  // kv_store of the step's one new row, then decode, in one dispatch: the
  // split holding the new key reads it from k_new / v_new (as kv_store would
  // store it) and writes its cache rows; the last split of each head to finish
  // merges the splits (an arrival counter per head in the scratch, which must
  // start zeroed and is left zeroed).  Needs fused_decode_supported.
  void decode_fused(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1, const RopeTable& table2,
                    const BufferRange& step, const Act& q, const Act& k_new, const Act& v_new,
                    const LayerCache& cache, const Act& out, const BufferRange& scratch,
                    const BufferRange& sinks = {}, const QkRmsNorm& qk_norm = {}, const DecodeRows& rows = {});
  // Whether decode_fused can serve this layer: the cache fits one binding per
  // K / V, and a ring cache's window is at least 2 (the rows a step reads then
  // never include the row it overwrites).
  bool fused_decode_supported(const AttentionSpec& spec, const LayerCache& cache) const;

  // Scratch the decode path needs for a cache of this capacity (bytes):
  // splits x n_heads x (head_dim + 2) f32 partials, never growing with n², and
  // the fused kernel's arrival counters (one u32 per head) after them.
  uint64_t decode_scratch_bytes(const AttentionSpec& spec, uint32_t capacity) const;

  // The texel format of K / V views in the texel variant, and its bytes (a binding of the cache may
  // hold at most Capabilities::max_texel_buffer_elements of them).
  static VkFormat kv_texel_format(KvType t);
  static uint32_t kv_texel_bytes(KvType t);

  // Whether this device can run decode_variant 2 (subgroup arithmetic, a fixed subgroup size).
  bool lanes_decode_supported() const;

  // Tile classes prefill would use for a chunk of n_new rows at pos0 (all kv heads alike).
  TileCounts prefill_tiles(const AttentionSpec& spec, uint32_t pos0, uint32_t n_new) const;
  // Br (query rows per workgroup) and Bc (keys per tile) prefill uses for this spec.
  void prefill_tile_sizes(const AttentionSpec& spec, uint32_t& rows, uint32_t& keys) const;

 private:
  void select_variant(PipelineDesc& desc, ShaderId storage_kernel, ShaderId texel_kernel,
                      const LayerCache& cache) const;
  // Whether the kernels read this cache through texel buffers (tuning texel 2, and views of its types).
  bool texel_cache(const LayerCache& cache) const;
  void record_decode(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1, const RopeTable& table2,
                     const BufferRange& step, const Act& q, const Act* k_new, const Act* v_new,
                     const LayerCache& cache, const Act& out, const BufferRange& scratch, const BufferRange& sinks,
                     const QkRmsNorm& qk_norm, const DecodeRows& rows);

  Device& device_;
  AttentionTuning tuning_;
};

}  // namespace reach
