// The attention family: host side of shaders/attention_*.comp for every
// scheme of kernels/attention.hpp, tested against a float64 reference in
// tests/test_kernels_attention.cpp.  Tile sizes
// and workgroup sizes are specialization constants chosen from Capabilities:
//   prefill: workgroup = one subgroup (8 lanes on lavapipe); lanes = rows x
//     query heads of one GQA group (Br = subgroup / group heads), Bc = subgroup
//     size keys per tile, exchanged with subgroup shuffles (no shared memory:
//     llvmpipe runs every memory load lane by lane, so each load must bring
//     distinct data to every lane);
//   decode on GPUs (attention_decode.comp): workgroups of 64, 64 keys per
//     shared-memory tile, splits of >= 128 keys, at most 256 splits;
//   decode on CPU devices (attention_decode_lanes.comp): one subgroup per
//     (split, kv head, head chunk), each lane walking its own keys with its
//     softmax in registers (a barrier makes llvmpipe switch lane groups, and
//     shared-memory traffic is plain memory traffic there), tiles of subgroup x
//     4 keys, splits of >= 512 keys.
#include "kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "engine/pipeline.hpp"
#include "kernels/binding.hpp"
#include "kernels/spec.hpp"

namespace reach {

namespace {

constexpr double kLog2e = 1.4426950408889634;

// The push-constant block of every attention kernel (shaders/spec/attention_push.h).
using AttnPush = spec::AttentionPush;
static_assert(sizeof(AttnPush) == 116);   // within the 128 bytes every device gives

// The shaders' mode values (shaders/spec/attention_modes.h) are base's enums.
static_assert(uint32_t(Q2Pos::constant) == spec::Q2POS_CONSTANT && uint32_t(Q2Pos::shifted) == spec::Q2POS_SHIFTED &&
              uint32_t(Q2Pos::grouped) == spec::Q2POS_GROUPED);
static_assert(uint32_t(K2Pos::unrotated) == spec::K2POS_UNROTATED && uint32_t(K2Pos::same) == spec::K2POS_SAME &&
              uint32_t(K2Pos::grouped) == spec::K2POS_GROUPED);
static_assert(uint32_t(KvType::f32) == spec::KV_F32 && uint32_t(KvType::f16) == spec::KV_F16 &&
              uint32_t(KvType::q8_0) == spec::KV_Q8_0 && uint32_t(KvType::q4_0) == spec::KV_Q4_0);
static_assert(uint32_t(QkNorm::none) == spec::QKNORM_NONE && uint32_t(QkNorm::key) == spec::QKNORM_KEY &&
              uint32_t(QkNorm::query) == spec::QKNORM_QUERY && uint32_t(QkNorm::cos) == spec::QKNORM_COS);
static_assert(kKeyCalibExactRows == spec::KCAL_EXACT_ROWS);

// Prefill and both decode kernels bind the cache, the tables and the rotated
// keys at the same numbers: select_variant marks them texel buffers for all.
template <class A, class B>
constexpr bool same_cache_bindings() {
  return A::B_STEP == B::B_STEP && A::B_Q == B::B_Q && A::B_KCACHE == B::B_KCACHE &&
         A::B_VCACHE == B::B_VCACHE && A::B_TAB1 == B::B_TAB1 && A::B_TAB2 == B::B_TAB2 && A::B_KROT == B::B_KROT;
}
using CacheBindings = spec::AttentionPrefillBindings;
static_assert(same_cache_bindings<CacheBindings, spec::AttentionDecodeBindings>() &&
              same_cache_bindings<CacheBindings, spec::AttentionDecodeLanesBindings>());
static_assert(spec::AttentionDecodeBindings::B_PART == spec::AttentionDecodeLanesBindings::B_PART);
// The unfused decode's split pass (the *_unfused kernels) binds the first 9 only (SINK carries the keys'
// calibration there): the fused step's bindings, from KNEW on, are left out of its layout.
constexpr uint32_t kUnfusedDecodeBindings = spec::AttentionDecodeBindings::B_SINK + 1;
static_assert(spec::AttentionDecodeBindings::B_PART < kUnfusedDecodeBindings &&
              CacheBindings::B_KROT < kUnfusedDecodeBindings && spec::AttentionDecodeBindings::B_KNEW >= kUnfusedDecodeBindings);

[[noreturn]] void fail(const std::string& what) { throw Error(ErrorCode::invalid_argument, "attention: " + what); }
[[noreturn]] void unsupported(const std::string& what) { throw Error(ErrorCode::unsupported, "attention: " + what); }

uint32_t rot_pairs(const AttentionSpec& s) { return s.rope ? (s.rotary_dim ? s.rotary_dim : s.head_dim) / 2 : 0; }
uint32_t group_size(const AttentionSpec& s) { return s.n_heads / s.n_kv_heads; }

void validate(const AttentionSpec& s, const RopeTable& t1, const RopeTable* t2) {
  const std::string where = "spec (heads " + std::to_string(s.n_heads) + ", kv heads " + std::to_string(s.n_kv_heads) +
                            ", head_dim " + std::to_string(s.head_dim) + ")";
  if (!s.n_heads || !s.n_kv_heads || s.n_heads % s.n_kv_heads) fail(where + ": heads must be a multiple of kv heads");
  if (s.head_dim == 0 || s.head_dim % 8) unsupported(where + ": head_dim must be a multiple of 8");
  const uint32_t rp = rot_pairs(s);
  if (s.rope) {
    if (rp * 2 > s.head_dim || rp % 4) unsupported(where + ": rotary_dim must be a multiple of 8 and <= head_dim");
    if (!t1.buffer || t1.positions == 0 || t1.pairs < rp || t1.pairs % 2)
      fail(where + ": RoPE needs table 1 with rotary_dim/2 pairs (an even count)");
  }
  // NaN fails the comparison; a negative cap would flip the scores' sign; the
  // kernels get cap·log2(e) as an f32, which must stay finite too.
  if (!(s.softcap >= 0) || !std::isfinite(float(double(s.softcap) * kLog2e)))
    fail(where + ": softcap must be finite and >= 0 (0 = none), got " + std::to_string(s.softcap));
  if (s.dual()) {
    if (!s.rope) fail(where + ": a dual-branch scheme needs RoPE");
    if (s.cache != KeyCacheMode::raw) fail(where + ": a dual-branch scheme needs the raw key cache");
    if (s.group < 1) fail(where + ": group must be >= 1");
    if (t2 && s.branch2_table2 && (!t2->buffer || t2->positions == 0 || t2->pairs < rp || t2->pairs % 2))
      fail(where + ": branch 2 needs table 2");
  }
}

// The sink-logit binding: the caller's buffer (n_heads f32) when the spec has
// sink logits, else a placeholder the kernel never reads.
BufferRange sink_range(const AttentionSpec& s, const BufferRange& sinks, const BufferRange& placeholder,
                       const char* where) {
  if (!s.sink_logits) return placeholder;
  if (sinks.buffer == VK_NULL_HANDLE || sinks.size < uint64_t(s.n_heads) * 4)
    fail(std::string(where) + ": a spec with sink logits needs their buffer (" + std::to_string(s.n_heads) +
         " f32, one per head), got " + std::to_string(sinks.size) + " bytes");
  return sinks;
}

float scale_log2(const AttentionSpec& s) {
  double sc = s.scale;
  if (sc == 0) sc = s.norm == QkNorm::none ? 1.0 / std::sqrt(double(s.head_dim)) : 1.0;
  return float(sc * kLog2e);
}

AttnPush make_push(const AttentionSpec& s, const RopeTable& t1, const RopeTable& t2, const LayerCache& cache) {
  AttnPush p{};
  p.n_heads = s.n_heads;
  p.n_kv_heads = s.n_kv_heads;
  p.capacity = cache.rows(s);
  p.ring = cache.ring;
  p.kv_base = 0;
  p.branch_window = s.branch_window;
  p.q2_const = s.q2_const;
  p.group = int32_t(std::max<uint32_t>(s.group, 1));
  p.window = s.window;
  p.sinks = s.sinks;
  p.tab1_positions = t1.buffer ? t1.positions : 1;
  p.tab1_pairs = t1.buffer ? t1.pairs : 0;
  const RopeTable& b2 = (s.branch2_table2 && t2.buffer) ? t2 : t1;
  p.tab2_positions = b2.buffer ? b2.positions : 1;
  p.tab2_pairs = b2.buffer ? b2.pairs : 0;
  p.scale_log2 = scale_log2(s);
  p.logn_inv_ln = s.logn_train_len > 1 ? float(1.0 / std::log(double(s.logn_train_len))) : 0.0f;
  p.cos_n = s.cos_n;
  if (s.alibi_max_bias > 0) {
    const AlibiParams a = alibi_params(s.n_heads, s.alibi_max_bias);
    p.alibi_nlog2 = a.n_head_log2;
    p.alibi_m0 = a.m0;
    p.alibi_m1 = a.m1;
  }
  // The kernels cap log2-domain scores (attention_common.glsl, capped_score).
  p.softcap_log2 = float(double(s.softcap) * kLog2e);
  p.block_rows = cache.block_rows;
  while (cache.block_rows >> (p.block_shift + 1)) ++p.block_shift;
  return p;
}

// Whether the kernels read branch-1 keys from cache.k_rot.
bool reads_rotated_keys(const AttentionSpec& spec, const LayerCache& cache) {
  return cache.k_rot && wants_rotated_keys(spec);
}

// A ring cache must hold every key a chunk of n rows still sees (LayerCache::ring).
void check_ring(const AttentionSpec& spec, const LayerCache& cache, uint32_t n, const char* where) {
  if (!cache.ring) return;
  if (spec.window == 0) fail(std::string(where) + ": a ring cache needs a sliding-window layer (spec.window > 0)");
  if (uint64_t(cache.ring) + 1 < uint64_t(spec.window) + std::max<uint32_t>(n, 1))
    fail(std::string(where) + ": a ring of " + std::to_string(cache.ring) + " rows is too short for window " +
         std::to_string(spec.window) + " and chunks of " + std::to_string(n) + " (needs window + chunk - 1)");
}

// A paged cache (LayerCache::block_rows): blocks of a power-of-two row count, a pool of whole blocks, no
// ring, and a step buffer with room for a table that covers the capacity.
void check_paged(const LayerCache& cache, const BufferRange& step, const char* where) {
  if (!cache.block_rows) return;
  const uint32_t b = cache.block_rows;
  const std::string w = std::string(where) + ": a paged cache";
  if (b & (b - 1)) fail(w + " needs blocks of a power-of-two row count, got " + std::to_string(b));
  if (cache.ring) fail(w + " has no ring (blocks behind a window go back to the pool)");
  if (cache.pool_rows == 0 || cache.pool_rows % b)
    fail(w + " needs a pool of whole blocks, got " + std::to_string(cache.pool_rows) + " rows in blocks of " +
         std::to_string(b));
  const uint32_t table = (cache.capacity + b - 1) / b;
  if (step.size < paged_step_bytes(table))
    fail(w + " of capacity " + std::to_string(cache.capacity) + " needs a step buffer of " +
         std::to_string(paged_step_bytes(table)) + " bytes (StepParams and " + std::to_string(table) +
         " block ids), got " + std::to_string(step.size));
}

// What an unused table binding gets: the step buffer, or for texel bindings
// the K cache (a whole number of texels; never read).
BufferRange unused_table(bool texel, const LayerCache& cache, const BufferRange& step) {
  return texel ? cache.k->range(0, 16) : step;
}

BufferRange table_range(const RopeTable& t, const BufferRange& dummy) {
  if (!t.buffer) return dummy;
  return t.buffer->range(0, uint64_t(t.positions) * t.pairs * 8);
}

// The kv heads one dispatch binds: all of them when the cache fits one binding,
// else as many whole heads as fit (each head's slab is contiguous).  K and V
// may store rows of different sizes (LayerCache::k_type, v_type): the larger
// decides, and each buffer is bound at its own slab.
struct HeadChunk {
  uint32_t first, count;
};
// One kv head's bytes of the K (and rotated K) and of the V buffer.
struct Slabs {
  uint64_t k, v;
};
Slabs cache_slabs(const AttentionSpec& s, const LayerCache& cache, uint32_t rows) {
  return {uint64_t(rows) * kv_row_bytes(cache.k_type, s.head_dim), uint64_t(rows) * kv_row_bytes(cache.v_type, s.head_dim)};
}
std::vector<HeadChunk> head_chunks(const AttentionSpec& s, const Slabs& slabs, uint64_t max_binding, uint64_t align) {
  const uint64_t slab = std::max(slabs.k, slabs.v);
  std::vector<HeadChunk> out;
  if (uint64_t(s.n_kv_heads) * slab <= max_binding) {
    out.push_back({0, s.n_kv_heads});
    return out;
  }
  const uint64_t per = max_binding / slab;
  if (per == 0)
    unsupported("one kv head's cache (" + std::to_string(slab) + " bytes) exceeds maxStorageBufferRange " +
                std::to_string(max_binding) + "; use a smaller context");
  if (align && (slabs.k % align || slabs.v % align))
    unsupported("kv cache slabs of " + std::to_string(slabs.k) + " and " + std::to_string(slabs.v) +
                " bytes are not multiples of the storage offset alignment");
  for (uint32_t g = 0; g < s.n_kv_heads; g += uint32_t(per))
    out.push_back({g, std::min<uint32_t>(uint32_t(per), s.n_kv_heads - g)});
  return out;
}

uint64_t max_binding(const Capabilities& c) { return binding_span(c); }

// The scheme block shared by the prefill and decode kernels (shaders/spec/attention_scheme.h).
template <class Spec>
void set_scheme(Spec& sc, const AttentionSpec& spec, bool krot) {
  sc.rope = spec.rope;
  sc.raw = spec.cache == KeyCacheMode::raw;
  sc.dual = spec.dual();
  sc.table2 = spec.dual() && spec.branch2_table2;
  sc.q2_mode = uint32_t(spec.q2_mode);
  sc.k2_mode = uint32_t(spec.k2_mode);
  sc.norm = uint32_t(spec.norm);
  sc.alibi = spec.alibi_max_bias > 0;
  sc.krot = krot;
  sc.softcap = spec.softcap > 0;
  sc.sink = spec.sink_logits;
}

// The storage types of a cache, for the kernels' KTYPE / VTYPE; a type the
// layer's head_dim cannot take is an error naming it.
template <class Spec>
void set_kv_types(Spec& sc, const AttentionSpec& spec, const LayerCache& cache) {
  std::string why;
  for (KvType t : {cache.k_type, cache.v_type})
    if (!kv_type_fits(t, spec.head_dim, &why)) unsupported("kv cache: " + why);
  sc.k_type = uint32_t(cache.k_type);
  sc.v_type = uint32_t(cache.v_type);
  sc.had_k = hadamard_keys(spec, cache.k_type);
  sc.had_v = kv_hadamard(cache.v_type);
  sc.kcal = key_calib_range(spec, cache).buffer != VK_NULL_HANDLE;
}

struct DecodeShape {
  uint32_t variant;       // AttentionTuning::decode_variant
  uint32_t wg, bc;        // bc: keys per tile (variant 2: subgroup x lane keys)
  uint32_t kpl, hpw, nhc; // variant 2: keys per lane per tile, heads per workgroup, head chunks per kv head
  uint32_t split_len, n_splits;
};

}  // namespace

bool wants_rotated_keys(const AttentionSpec& spec) {
  return spec.rope && spec.cache == KeyCacheMode::raw && spec.dual();
}

bool hadamard_keys(const AttentionSpec& spec, KvType k_type) {
  return kv_hadamard(k_type) && !(spec.rope && spec.cache == KeyCacheMode::raw);
}

std::string TileCounts::str() const {
  std::ostringstream o;
  o << "window " << window << ", outside " << outside << ", mixed " << mixed << ", skipped " << skipped;
  return o.str();
}

uint32_t attention_lanes(const Capabilities& caps) {
  const uint32_t fixed = caps.fixed_subgroup();
  return std::max<uint32_t>(fixed ? fixed : caps.subgroup_min, 1);
}

uint32_t attention_required_subgroup(const Capabilities& caps) {
  return caps.fixed_subgroup() ? attention_lanes(caps) : 0;
}

AttentionTuning AttentionTuning::from(const Capabilities& caps) {
  AttentionTuning t;
  const uint32_t sg = attention_lanes(caps);
  if (caps.is_cpu()) {
    // One CPU thread runs a workgroup, subgroup-size lanes at a time, and switches
    // lane groups at every barrier: one lane group per workgroup, no barriers.
    t.decode_group = sg;
    t.decode_keys = 32;
    // Each workgroup pays a fixed cost (queries, lane merge, partial): 512-key
    // splits measured 1.7 ms per SmolLM2 layer at depth 8192, 128-key splits 3 ms.
    t.split_min = 512;
  } else {
    t.decode_group = 64;
    t.decode_keys = 64;
    t.split_min = 128;
  }
  t.max_splits = 256;
  // Blocks of at most 8 keys: lavapipe's default tile (8 lanes) in one block.  Fully
  // unrolled, a tile of 32 or 64 keys (x head_dim / 4 shuffles, x 2 for ReRoPE) took
  // NVIDIA's compiler 60 s and more per pipeline (H200, driver 580), and llvmpipe at 16
  // lanes (LP_NATIVE_VECTOR_WIDTH=512) compiles its code, one thread at the first
  // dispatch, in time that grows with the unrolled block too.
  t.prefill_key_block = std::min<uint32_t>(8, sg);
  t.texel = caps.is_cpu() ? 2 : 1;
  // The lanes decode merges its lanes with subgroup reductions over the whole workgroup: it needs
  // the width fixed (a smaller workgroup in a wider subgroup would do too, but CPU devices have one width).
  t.decode_variant = caps.is_cpu() && caps.has_subgroup_arithmetic() && caps.fixed_subgroup() ? 2 : 1;
  t.decode_lane_keys = 4;
  return t;
}

Attention::Attention(Device& device) : Attention(device, AttentionTuning{}) {}

Attention::Attention(Device& device, const AttentionTuning& tuning) : device_(device) {
  const AttentionTuning d = AttentionTuning::from(device.caps());
  tuning_ = tuning;
  if (!tuning_.decode_group) tuning_.decode_group = d.decode_group;
  if (!tuning_.decode_keys) tuning_.decode_keys = d.decode_keys;
  if (!tuning_.split_min) tuning_.split_min = d.split_min;
  if (!tuning_.max_splits) tuning_.max_splits = d.max_splits;
  if (!tuning_.prefill_key_block) tuning_.prefill_key_block = d.prefill_key_block;
  if (!tuning_.texel) tuning_.texel = d.texel;
  if (!tuning_.decode_variant) tuning_.decode_variant = d.decode_variant;
  if (!tuning_.decode_lane_keys) tuning_.decode_lane_keys = d.decode_lane_keys;
}

// The lanes decode kernel merges its lanes with subgroup reductions, so its
// workgroup must be exactly one subgroup.
bool Attention::lanes_decode_supported() const {
  const Capabilities& c = device_.caps();
  return c.has_subgroup_arithmetic() && c.fixed_subgroup() != 0;
}

// The kernel and texel bindings of prefill/decode: the tables become
// R32G32B32A32 float texel buffers in the texel variant, K, rotated K and V
// integer views of their rows (kv_texel_format).
void Attention::select_variant(PipelineDesc& desc, ShaderId storage_kernel, ShaderId texel_kernel,
                               const LayerCache& cache) const {
  desc.kernel = storage_kernel;
  if (!texel_cache(cache)) return;
  desc.kernel = texel_kernel;
  using B = CacheBindings;
  for (uint32_t b : {B::B_TAB1, B::B_TAB2}) desc.texel(b, VK_FORMAT_R32G32B32A32_SFLOAT);
  for (uint32_t b : {B::B_KCACHE, B::B_KROT}) desc.texel(b, kv_texel_format(cache.k_type));
  desc.texel(B::B_VCACHE, kv_texel_format(cache.v_type));
}

// One texel per vec4 of f32 / f16 rows (shaders/attention_kv_read.glsl converts
// the bits), one per word of quantized rows.
VkFormat Attention::kv_texel_format(KvType t) {
  switch (t) {
    case KvType::f32: return VK_FORMAT_R32G32B32A32_UINT;
    case KvType::f16: return VK_FORMAT_R16G16B16A16_UINT;
    default: return VK_FORMAT_R32_UINT;
  }
}

uint32_t Attention::kv_texel_bytes(KvType t) {
  return t == KvType::f32 ? 16 : t == KvType::f16 ? 8 : 4;
}

bool Attention::texel_cache(const LayerCache& cache) const {
  if (tuning_.texel != 2) return false;
  const Capabilities& caps = device_.caps();
  if (!caps.supports_uniform_texel(VK_FORMAT_R32G32B32A32_SFLOAT)) return false;   // the tables
  for (KvType t : {cache.k_type, cache.v_type})
    if (!caps.supports_uniform_texel(kv_texel_format(t))) return false;
  return true;
}

void Attention::prefill_tile_sizes(const AttentionSpec& spec, uint32_t& rows, uint32_t& keys) const {
  // One workgroup = one subgroup: its lanes are (row, query head of the group)
  // and it takes keys in tiles of one per lane (exchanged by shuffles).
  const uint32_t wg = attention_lanes(device_.caps());
  const uint32_t hpw = std::min(group_size(spec), wg);
  rows = wg / hpw;
  keys = wg;
}

TileCounts Attention::prefill_tiles(const AttentionSpec& spec, uint32_t pos0, uint32_t n_new) const {
  uint32_t br = 0, bc = 0;
  prefill_tile_sizes(spec, br, bc);
  TileCounts tc;
  const int64_t W = spec.dual() ? int64_t(spec.branch_window) : INT64_MAX;
  for (uint32_t t0 = 0; t0 < n_new; t0 += br) {
    const int64_t q_lo = pos0 + t0, q_hi = pos0 + std::min(t0 + br, n_new) - 1;
    for (int64_t k_lo = 0; k_lo <= q_hi; k_lo += bc) {
      const int64_t k_hi = std::min<int64_t>(k_lo + bc - 1, q_hi);
      const int64_t r_min = std::max<int64_t>(0, q_lo - k_hi), r_max = q_hi - k_lo;
      if (spec.window && r_min >= spec.window && k_lo >= spec.sinks) {
        ++tc.skipped;
        continue;
      }
      const bool need1 = !spec.dual() || r_min < W, need2 = spec.dual() && r_max >= W;
      if (need1 && need2) ++tc.mixed;
      else if (need2) ++tc.outside;
      else ++tc.window;
    }
  }
  return tc;
}

// The rows of a batched decode (DecodeRows): one dispatch serves them, each row's step record and scratch at
// its stride (the shaders' attn_row_begin), every record as large as one sequence's.
static void check_rows(const LayerCache& cache, const BufferRange& step, const DecodeRows& rows, const char* what) {
  const uint32_t n = rows.count;
  if (n <= 1) return;
  if (!cache.block_rows) fail(std::string(what) + ": rows of a batch share a paged cache (a KV pool)");
  const uint64_t one_step = paged_step_bytes((cache.capacity + cache.block_rows - 1) / cache.block_rows);
  if (rows.step_stride < one_step || rows.step_stride % 4 || step.size < (n - 1) * rows.step_stride + one_step)
    fail(std::string(what) + ": " + std::to_string(n) + " rows need step records of at least " +
         std::to_string(one_step) + " bytes each, a multiple of 4 apart, in " + std::to_string(step.size) +
         " bytes with a stride of " + std::to_string(rows.step_stride));
}

void Attention::kv_store(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1, const BufferRange& step,
                         const Act& k_new, const Act& v_new, const LayerCache& cache, const DecodeRows& batch) {
  validate(spec, table1, nullptr);
  const uint32_t kvd = spec.n_kv_heads * spec.head_dim;
  if (k_new.cols != kvd || v_new.cols != kvd || v_new.rows < k_new.rows)
    fail("kv_store: k/v rows must be [n, " + std::to_string(kvd) + "]");
  if (!cache.k || !cache.v || cache.capacity == 0) fail("kv_store: no cache");
  const uint32_t n = batch.count;
  if (n == 0 || (n > 1 && k_new.rows < n))
    fail("kv_store: a batch of " + std::to_string(n) + " rows needs that many k/v rows");
  check_ring(spec, cache, n > 1 ? 1 : k_new.rows, "kv_store");
  check_paged(cache, step, "kv_store");
  check_rows(cache, step, batch, "kv_store");
  const uint32_t rows = cache.rows(spec);
  const bool rotate = spec.rope && spec.cache == KeyCacheMode::rotated;
  const bool normalize = spec.norm == QkNorm::key || spec.norm == QkNorm::cos;
  const uint32_t wg = 64;
  const bool store_rot = reads_rotated_keys(spec, cache);
  spec::AttentionKvStoreSpec sc;
  sc.wg = wg;
  sc.head_dim = spec.head_dim;
  sc.rot_pairs = rot_pairs(spec);
  sc.rotate = rotate;
  sc.normalize = normalize;
  sc.store_rot = store_rot;
  set_kv_types(sc, spec, cache);
  using B = spec::AttentionKvStoreBindings;
  const Pipeline& p =
      device_.pipelines().get({ShaderId::attention_kv_store, B::count, sizeof(AttnPush), sc.constants()});
  const uint64_t mb = max_binding(device_.caps());
  const Slabs slabs = cache_slabs(spec, cache, rows);
  const auto chunks = head_chunks(spec, slabs, mb, device_.caps().min_storage_buffer_offset_alignment);
  if (chunks.size() != 1) unsupported("kv_store: the kv cache must fit one storage binding");
  AttnPush push = make_push(spec, table1, RopeTable{}, cache);
  push.max_rows = n > 1 ? 1 : k_new.rows;   // a batch: one new row per sequence
  push.step_stride = uint32_t(n > 1 ? batch.step_stride / 4 : 0);
  const uint64_t kbytes = spec.n_kv_heads * slabs.k, vbytes = spec.n_kv_heads * slabs.v;
  const BufferRange t1 = table_range(table1, step);
  const BufferRange kr = store_rot ? cache.k_rot->range(0, kbytes) : cache.k->range(0, kbytes);
  cmd.dispatch(p,
               spec::bound<B>({{B::B_STEP, step},
                               {B::B_KNEW, k_new.range()},
                               {B::B_VNEW, v_new.range()},
                               {B::B_KCACHE, cache.k->range(0, kbytes)},
                               {B::B_VCACHE, cache.v->range(0, vbytes)},
                               {B::B_TAB1, t1},
                               {B::B_KROT, kr},
                               {B::B_KCAL, sc.kcal ? cache.key_calib : step}}),
               &push, sizeof push, groups_for(uint64_t(push.max_rows) * spec.n_kv_heads, wg), 1, n,
               "attention_kv_store");
}

void Attention::kv_calibrate(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1,
                             const BufferRange& step, const Act& q, const Act& k_new, const LayerCache& cache) {
  validate(spec, table1, nullptr);
  const uint32_t qd = spec.n_heads * spec.head_dim, kvd = spec.n_kv_heads * spec.head_dim;
  if (q.cols != qd || k_new.cols != kvd || q.rows < k_new.rows)
    fail("kv_calibrate: q rows must be [n, " + std::to_string(qd) + "] and k rows [n, " + std::to_string(kvd) + "]");
  const BufferRange kcal = key_calib_range(spec, cache);
  if (kcal.buffer == VK_NULL_HANDLE) fail("kv_calibrate: the cache has no key calibration (LayerCache::key_calib)");
  spec::AttentionKvCalibrateSpec sc;
  sc.wg = 64;
  sc.head_dim = spec.head_dim;
  sc.rot_pairs = rot_pairs(spec);
  sc.rotate = spec.rope && spec.cache == KeyCacheMode::rotated;
  sc.gq = group_size(spec);
  sc.min_rows = kKeyCalibMinRows;
  sc.smooth_rows = kKeyCalibSmoothRows;
  using B = spec::AttentionKvCalibrateBindings;
  const Pipeline& p =
      device_.pipelines().get({ShaderId::attention_kv_calibrate, B::count, sizeof(AttnPush), sc.constants()});
  AttnPush push = make_push(spec, table1, RopeTable{}, cache);
  push.max_rows = k_new.rows;
  // The positions mu's average turn spans: the context the cache serves (not a pool's rows), within the table.
  push.capacity = std::max<uint32_t>(1, std::min(cache.capacity, table1.buffer ? table1.positions : 1));
  cmd.dispatch(p,
               spec::bound<B>({{B::B_STEP, step},
                               {B::B_Q, q.range()},
                               {B::B_KNEW, k_new.range()},
                               {B::B_TAB1, table_range(table1, step)},
                               {B::B_KCAL, kcal}}),
               &push, sizeof push, 1, 1, 1, "attention_kv_calibrate");
}

void Attention::prefill(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1, const RopeTable& table2,
                        const BufferRange& step, const Act& q, const LayerCache& cache, const Act& out,
                        uint32_t max_new, const BufferRange& sinks) {
  validate(spec, table1, &table2);
  const uint32_t qd = spec.n_heads * spec.head_dim;
  if (q.cols != qd || out.cols != qd || q.rows < max_new || out.rows < max_new)
    fail("prefill: q/out must be [>= " + std::to_string(max_new) + ", " + std::to_string(qd) + "]");
  if (!cache.k || !cache.v || cache.capacity == 0) fail("prefill: no cache");
  if (max_new == 0) return;
  check_ring(spec, cache, max_new, "prefill");
  check_paged(cache, step, "prefill");
  const uint32_t cache_rows = cache.rows(spec);
  uint32_t rows = 0, wg = 0;
  prefill_tile_sizes(spec, rows, wg);
  const uint32_t gq = group_size(spec);
  const uint32_t hpw = std::min(gq, wg), nhc = (gq + hpw - 1) / hpw;
  const bool dual = spec.dual();
  const bool t2 = dual && spec.branch2_table2;
  const bool krot = reads_rotated_keys(spec, cache);
  spec::AttentionPrefillSpec sc;
  sc.wg = wg;
  sc.hpw = hpw;
  sc.rows = rows;
  sc.head_dim = spec.head_dim;
  sc.gq = gq;
  sc.rot_pairs = rot_pairs(spec);
  // A power of two (the subgroup size is one), so it divides the tile.
  uint32_t kb = 1;
  while (kb * 2 <= std::min(tuning_.prefill_key_block, wg)) kb *= 2;
  sc.key_block = kb;
  set_scheme(sc, spec, krot);
  set_kv_types(sc, spec, cache);
  using B = spec::AttentionPrefillBindings;
  PipelineDesc desc{ShaderId::attention_prefill, B::count, sizeof(AttnPush), sc.constants()};
  desc.required_subgroup = attention_required_subgroup(device_.caps());
  select_variant(desc, ShaderId::attention_prefill, ShaderId::attention_prefill_tex, cache);
  const Pipeline& p = device_.pipelines().get(desc);
  AttnPush push = make_push(spec, table1, table2, cache);
  push.max_rows = max_new;
  const BufferRange r1 = table_range(table1, unused_table(texel_cache(cache), cache, step));
  const BufferRange r2 = t2 ? table_range(table2, step) : r1;
  const BufferRange sk = sink_range(spec, sinks, step, "prefill");
  const Slabs slabs = cache_slabs(spec, cache, cache_rows);
  for (const HeadChunk& hc :
       head_chunks(spec, slabs, max_binding(device_.caps()), device_.caps().min_storage_buffer_offset_alignment)) {
    push.kv_base = hc.first;
    const Buffer* kr = krot ? cache.k_rot : cache.k;   // unused without KROT
    cmd.dispatch(p,
                 spec::bound<B>({{B::B_STEP, step},
                                 {B::B_Q, q.range()},
                                 {B::B_KCACHE, cache.k->range(hc.first * slabs.k, hc.count * slabs.k)},
                                 {B::B_VCACHE, cache.v->range(hc.first * slabs.v, hc.count * slabs.v)},
                                 {B::B_TAB1, r1},
                                 {B::B_TAB2, r2},
                                 {B::B_OUT, out.range()},
                                 {B::B_KROT, kr->range(hc.first * slabs.k, hc.count * slabs.k)},
                                 {B::B_SINK, sc.kcal ? cache.key_calib : sk}}),
                 &push, sizeof push, groups_for(max_new, rows), hc.count * nhc, 1, "attention_prefill");
  }
}

namespace {
DecodeShape decode_shape(const AttentionTuning& t, const Capabilities& c, const AttentionSpec& spec, uint32_t capacity) {
  DecodeShape d{};
  d.variant = t.decode_variant == 2 ? 2 : 1;
  const uint32_t gq = group_size(spec);
  if (d.variant == 2) {
    // Heads per workgroup: all of the group while their queries and
    // accumulators stay within ~256 floats each per lane (CPU registers spill
    // to the stack beyond).
    d.wg = attention_lanes(c);
    d.kpl = std::max<uint32_t>(t.decode_lane_keys, 1);
    d.nhc = std::max<uint32_t>(1, (gq * spec.head_dim + 255) / 256);
    d.hpw = (gq + d.nhc - 1) / d.nhc;
    d.nhc = (gq + d.hpw - 1) / d.hpw;
    d.bc = d.wg * d.kpl;
  } else {
    d.wg = std::max<uint32_t>(t.decode_group, 1);
    d.bc = std::max<uint32_t>(t.decode_keys, 1);
    d.kpl = d.hpw = d.nhc = 1;
  }
  const uint64_t shared = c.max_shared_memory ? c.max_shared_memory : 16384;
  auto bytes = [&](uint32_t bc) {
    return uint64_t(gq) * spec.head_dim * 4 * (spec.dual() ? 2 : 1) + uint64_t(gq) * bc * 8;
  };
  if (d.variant == 1) {
    while (d.bc > 1 && bytes(d.bc) > shared) d.bc /= 2;
    if (bytes(d.bc) > shared) unsupported("decode: the group's queries exceed shared memory");
  }
  // The keys one step walks: a windowed layer without sinks starts its splits
  // at the window's first key (decode_first_key in the shaders).
  const uint32_t span = spec.window && !spec.sinks ? std::min(capacity, spec.window) : capacity;
  const uint32_t cap = std::max<uint32_t>(span, 1);
  uint32_t len = std::max<uint32_t>(t.split_min, (cap + t.max_splits - 1) / std::max<uint32_t>(t.max_splits, 1));
  len = (len + d.bc - 1) / d.bc * d.bc;
  d.split_len = len;
  d.n_splits = (cap + len - 1) / len;
  return d;
}
}  // namespace

namespace {
// The scratch of decode: the fused kernel's arrival counters at 0 (one u32 per
// head: at most kv heads x head chunks are used), the partials after them at an
// offset a storage binding may start at.
struct ScratchLayout {
  uint64_t counters, partials_at, partials, total;
};
// The counters come first, at a place no layer's partials reach: a session's layers share one scratch, and a
// sliding-window layer splits fewer keys (fewer partials) than a global one, so counters placed after the
// partials would sit inside another layer's partials, which would overwrite them between its decodes.
ScratchLayout scratch_layout(const DecodeShape& d, const AttentionSpec& spec, const Capabilities& caps) {
  ScratchLayout l;
  const uint64_t align = std::max<uint64_t>(caps.min_storage_buffer_offset_alignment, 4);
  l.counters = uint64_t(spec.n_heads) * 4;
  l.partials_at = (l.counters + align - 1) / align * align;
  l.partials = uint64_t(d.n_splits) * spec.n_heads * (spec.head_dim + 2) * 4;
  l.total = l.partials_at + l.partials;
  return l;
}
}  // namespace

uint64_t Attention::decode_scratch_bytes(const AttentionSpec& spec, uint32_t capacity) const {
  const DecodeShape d = decode_shape(tuning_, device_.caps(), spec, capacity);
  return scratch_layout(d, spec, device_.caps()).total;
}

bool Attention::fused_decode_supported(const AttentionSpec& spec, const LayerCache& cache) const {
  if (!cache.k || !cache.v || cache.capacity == 0) return false;
  if (cache.ring && spec.window < 2) return false;
  const auto chunks = head_chunks(spec, cache_slabs(spec, cache, cache.rows(spec)), max_binding(device_.caps()),
                                  device_.caps().min_storage_buffer_offset_alignment);
  // The fused kernel binds all 18 (5 of them texel buffers in the texel variant): where the device allows
  // fewer per stage (Android's 12 storage buffers), kv_store + decode's 8-binding split pass serve instead.
  const Capabilities& caps = device_.caps();
  const uint32_t all = spec::AttentionDecodeBindings::count, texels = texel_cache(cache) ? 5 : 0;
  return chunks.size() == 1 && all - texels <= caps.max_stage_storage_buffers && texels <= caps.max_stage_sampled &&
         all <= caps.max_stage_resources;
}

void Attention::decode(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1, const RopeTable& table2,
                       const BufferRange& step, const Act& q, const LayerCache& cache, const Act& out,
                       const BufferRange& scratch, const BufferRange& sinks, const DecodeRows& rows) {
  record_decode(cmd, spec, table1, table2, step, q, nullptr, nullptr, cache, out, scratch, sinks, QkRmsNorm{}, rows);
}

void Attention::decode_fused(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1,
                             const RopeTable& table2, const BufferRange& step, const Act& q, const Act& k_new,
                             const Act& v_new, const LayerCache& cache, const Act& out, const BufferRange& scratch,
                             const BufferRange& sinks, const QkRmsNorm& qk_norm, const DecodeRows& rows) {
  record_decode(cmd, spec, table1, table2, step, q, &k_new, &v_new, cache, out, scratch, sinks, qk_norm, rows);
}

// decode (k_new == nullptr: the split-K kernel, a barrier, the combine) or
// decode_fused (one dispatch that also stores the new row and merges).
void Attention::record_decode(CommandList& cmd, const AttentionSpec& spec, const RopeTable& table1,
                              const RopeTable& table2, const BufferRange& step, const Act& q, const Act* k_new,
                              const Act* v_new, const LayerCache& cache, const Act& out, const BufferRange& scratch,
                              const BufferRange& sinks, const QkRmsNorm& qk_norm, const DecodeRows& rows) {
  const bool fused = k_new != nullptr;
  const char* what = fused ? "decode_fused" : "decode";
  validate(spec, table1, &table2);
  const uint32_t n = rows.count;
  const uint32_t qd = spec.n_heads * spec.head_dim, kvd = spec.n_kv_heads * spec.head_dim;
  auto shape = [n](uint32_t cols) { return "[" + std::to_string(n) + ", " + std::to_string(cols) + "]"; };
  if (n == 0) fail(std::string(what) + ": no rows");
  if (q.cols != qd || out.cols != qd || q.rows < n || out.rows < n)
    fail(std::string(what) + ": q/out must be " + shape(qd));
  if (fused && (k_new->cols != kvd || v_new->cols != kvd || k_new->rows < n || v_new->rows < n))
    fail(std::string(what) + ": k/v rows must be " + shape(kvd));
  if (!cache.k || !cache.v || cache.capacity == 0) fail(std::string(what) + ": no cache");
  check_ring(spec, cache, 1, what);
  check_paged(cache, step, what);
  check_rows(cache, step, rows, what);
  const bool qk_rms = fused && qk_norm.q.buffer != VK_NULL_HANDLE;
  if (qk_rms && (qk_norm.q.size < uint64_t(spec.head_dim) * 4 || qk_norm.k.buffer == VK_NULL_HANDLE ||
                 qk_norm.k.size < uint64_t(spec.head_dim) * 4))
    fail(std::string(what) + ": the q/k RMSNorm weights must be " + std::to_string(spec.head_dim) + " f32 each");
  if (fused && !fused_decode_supported(spec, cache))
    unsupported("decode_fused: the cache must fit one binding, and a ring cache needs a window of at least 2 "
                "(use kv_store + decode)");
  const uint32_t cache_rows = cache.rows(spec);
  const DecodeShape d = decode_shape(tuning_, device_.caps(), spec, cache.capacity);
  const ScratchLayout sl = scratch_layout(d, spec, device_.caps());
  const uint64_t scratch_stride = n > 1 ? rows.scratch_stride : sl.total;
  if (n > 1 && (scratch_stride < sl.total || scratch_stride % 4))
    fail(std::string(what) + ": rows' scratch " + std::to_string(scratch_stride) + " bytes apart, each needs " +
         std::to_string(sl.total) + " (a multiple of 4)");
  if (scratch.size < (n - 1) * scratch_stride + sl.total)
    fail(std::string(what) + ": scratch of " + std::to_string(scratch.size) + " bytes, " + std::to_string(n) +
         " rows need " + std::to_string((n - 1) * scratch_stride + sl.total));
  const uint32_t gq = group_size(spec);
  const bool dual = spec.dual();
  const bool t2 = dual && spec.branch2_table2;
  const bool krot = reads_rotated_keys(spec, cache);
  const bool lanes = d.variant == 2;
  if (lanes && !lanes_decode_supported())
    unsupported("decode: the lanes kernel (decode_variant 2) needs subgroup arithmetic and a fixed subgroup size");
  spec::AttentionDecodeSpec sc;
  sc.wg = d.wg;
  sc.keys = d.bc;
  sc.head_dim = spec.head_dim;
  sc.gq = gq;
  sc.rot_pairs = rot_pairs(spec);
  sc.lane_keys = d.kpl;
  sc.hpw = d.hpw;
  set_scheme(sc, spec, krot);
  set_kv_types(sc, spec, cache);
  sc.sink = fused && spec.sink_logits;   // unfused: the combine pass adds the sink
  sc.fused = fused;
  sc.qk_rms = qk_rms;
  using B = spec::AttentionDecodeBindings;   // attention_decode_lanes: the same (static_assert above)
  PipelineDesc desc{ShaderId::attention_decode, fused ? B::count : kUnfusedDecodeBindings, sizeof(AttnPush),
                    sc.constants()};
  if (lanes) {
    desc.required_subgroup = d.wg;   // lanes_decode_supported: the width is fixed
    if (fused) select_variant(desc, ShaderId::attention_decode_lanes, ShaderId::attention_decode_lanes_tex, cache);
    else select_variant(desc, ShaderId::attention_decode_lanes_unfused, ShaderId::attention_decode_lanes_unfused_tex, cache);
  } else if (fused) {
    select_variant(desc, ShaderId::attention_decode, ShaderId::attention_decode_tex, cache);
  } else {
    select_variant(desc, ShaderId::attention_decode_unfused, ShaderId::attention_decode_unfused_tex, cache);
  }
  const Pipeline& p = device_.pipelines().get(desc);
  AttnPush push = make_push(spec, table1, table2, cache);
  push.max_rows = 1;
  push.split_len = d.split_len;
  push.n_splits = d.n_splits;
  push.qk_norm_eps = qk_norm.eps;
  push.step_stride = uint32_t(n > 1 ? rows.step_stride / 4 : 0);
  push.scratch_stride = uint32_t(n > 1 ? scratch_stride / 4 : 0);
  const BufferRange r1 = table_range(table1, unused_table(texel_cache(cache), cache, step));
  const BufferRange r2 = t2 ? table_range(table2, step) : r1;
  const uint64_t later_rows = (n - 1) * scratch_stride;   // row r's scratch r·stride bytes on
  const BufferRange part{scratch.buffer, scratch.offset + sl.partials_at, later_rows + sl.partials};
  const BufferRange counters{scratch.buffer, scratch.offset, later_rows + sl.counters};
  const BufferRange sk = sink_range(spec, sinks, step, what);
  const Slabs slabs = cache_slabs(spec, cache, cache_rows);
  const BufferRange q1{q.buffer->handle(), q.offset, uint64_t(n) * qd * 4};
  const BufferRange o1{out.buffer->handle(), out.offset, uint64_t(n) * qd * 4};
  for (const HeadChunk& hc :
       head_chunks(spec, slabs, max_binding(device_.caps()), device_.caps().min_storage_buffer_offset_alignment)) {
    push.kv_base = hc.first;
    const Buffer* kr = krot ? cache.k_rot : cache.k;   // unused without KROT
    const BufferRange kc = cache.k->range(hc.first * slabs.k, hc.count * slabs.k);
    const BufferRange vc = cache.v->range(hc.first * slabs.v, hc.count * slabs.v);
    const BufferRange krc = kr->range(hc.first * slabs.k, hc.count * slabs.k);
    // The fused kernel's own bindings; the unfused kernel's layout stops before them.
    const BufferRange kn = fused ? BufferRange{k_new->buffer->handle(), k_new->offset, uint64_t(n) * kvd * 4} : step;
    const BufferRange vn = fused ? BufferRange{v_new->buffer->handle(), v_new->offset, uint64_t(n) * kvd * 4} : step;
    const auto bound = spec::bound<B>({{B::B_STEP, step},
                                       {B::B_Q, q1},
                                       {B::B_KCACHE, kc},
                                       {B::B_VCACHE, vc},
                                       {B::B_TAB1, r1},
                                       {B::B_TAB2, r2},
                                       {B::B_PART, part},
                                       {B::B_KROT, krc},
                                       {B::B_SINK, sc.kcal ? cache.key_calib : fused ? sk : step},
                                       {B::B_KNEW, kn},
                                       {B::B_VNEW, vn},
                                       {B::B_OUT, fused ? o1 : step},
                                       {B::B_KSTORE, fused ? kc : step},
                                       {B::B_VSTORE, fused ? vc : step},
                                       {B::B_KRSTORE, fused ? krc : step},
                                       {B::B_COUNT, fused ? counters : step},
                                       {B::B_QNORM, qk_rms ? qk_norm.q : step},
                                       {B::B_KNORM, qk_rms ? qk_norm.k : step}});
    cmd.dispatch(p, std::span<const BufferRange>(bound.data(), desc.buffers), &push, sizeof push, d.n_splits,
                 hc.count * d.nhc, n, lanes ? "attention_decode_lanes" : "attention_decode");
  }
  if (fused) return;
  cmd.barrier();
  const uint32_t cwg = std::min<uint32_t>(64, std::max<uint32_t>(spec.head_dim / 4, 1));
  spec::AttentionCombineSpec csc;
  csc.wg = cwg;
  csc.head_dim = spec.head_dim;
  csc.sink = spec.sink_logits;
  csc.had_v = kv_hadamard(cache.v_type);
  using BC = spec::AttentionCombineBindings;
  const Pipeline& pc =
      device_.pipelines().get({ShaderId::attention_combine, BC::count, sizeof(AttnPush), csc.constants()});
  cmd.dispatch(pc, spec::bound<BC>({{BC::B_STEP, step}, {BC::B_PART, part}, {BC::B_OUT, o1}, {BC::B_SINK, sk}}),
               &push, sizeof push, spec.n_heads, 1, n, "attention_combine");
}

}  // namespace reach
