#include "runtime/session/kv_pool.hpp"

#include <algorithm>

#include "base/checked.hpp"
#include "base/error.hpp"
#include "engine/command.hpp"
#include "engine/device.hpp"
#include "kernels/binding.hpp"

namespace reach {

namespace {

std::string mib(uint64_t bytes) { return std::to_string(mib_ceil(bytes)) + " MiB"; }

// The options with block_rows (0: the default) and tokens (from bytes) resolved, so the pool's options
// say what it uses.
KvPoolOptions resolved(const Capabilities& caps, const ModelConfig& c, KvPoolOptions o) {
  const uint32_t b = o.block_rows = o.block_rows ? o.block_rows : KvPool::default_block_rows(caps);
  if (b & (b - 1) || b > (1u << 16))
    throw Error(ErrorCode::invalid_argument,
                "KV pool: blocks of " + std::to_string(b) + " rows; give a power of two (16, 32, 64)");
  if (o.tokens == 0 && o.bytes > 0) {
    const uint64_t row = KvPool::row_bytes(c, o), block = row * b;
    if (o.bytes < block)
      throw Error(ErrorCode::invalid_argument,
                  "KV pool: " + std::to_string(o.bytes) + " bytes hold no block of " + std::to_string(b) + " rows (" +
                      std::to_string(block) + " bytes for this model and cache types); give a larger size");
    o.tokens = uint32_t(std::min<uint64_t>(o.bytes / block * b, uint64_t(1) << 31));
  }
  if (o.tokens == 0)
    throw Error(ErrorCode::invalid_argument, "KV pool: a pool of 0 tokens; give its size in tokens or bytes");
  return o;
}

uint32_t blocks_of(const KvPoolOptions& o) { return uint32_t((uint64_t(o.tokens) + o.block_rows - 1) / o.block_rows); }

}  // namespace

uint64_t kv_binding_limit(const Capabilities& caps, const AttentionTuning& tuning, KvType k, KvType v) {
  uint64_t limit = binding_span(caps);
  if (tuning.texel == 2)
    limit = std::min(limit, saturating_mul({caps.max_texel_buffer_elements,
                                            std::min(Attention::kv_texel_bytes(k), Attention::kv_texel_bytes(v))}));
  return limit;
}

uint32_t KvPool::default_block_rows(const Capabilities& caps) {
  const uint32_t width = std::max(caps.subgroup_size, caps.subgroup_max);
  uint32_t b = 16;
  while (b < width && b < 64) b *= 2;
  return b;
}

uint64_t KvPool::row_bytes(const ModelConfig& c, const KvPoolOptions& o) {
  const uint32_t d = uint32_t(c.head_dim);
  const uint64_t per_head = kv_row_bytes(o.cache_type_k, d) * (o.rotated_keys ? 2 : 1) + kv_row_bytes(o.cache_type_v, d);
  return per_head * uint64_t(c.n_kv_heads) * uint64_t(c.n_layers);
}

KvPool::KvPool(Model& model, const KvPoolOptions& options)
    : model_(model), options_(resolved(model.device().caps(), model.config(), options)), blocks_(blocks_of(options_), options_.block_rows) {
  const ModelConfig& c = model.config();
  const uint32_t d = uint32_t(c.head_dim);
  for (auto [t, flag] : {std::pair{options.cache_type_k, "--cache-type-k"}, std::pair{options.cache_type_v, "--cache-type-v"}}) {
    std::string why;
    if (!kv_type_fits(t, d, &why)) throw Error(ErrorCode::unsupported, std::string(flag) + " " + why);
  }
  const uint64_t row_k = kv_row_bytes(options.cache_type_k, d), row_v = kv_row_bytes(options.cache_type_v, d);
  const uint64_t heads = uint64_t(c.n_kv_heads), rows = pool_rows(), layers = uint64_t(c.n_layers);
  const Attention attention(model.device());
  const uint64_t limit = kv_binding_limit(model.device().caps(), attention.tuning(), options.cache_type_k,
                                          options.cache_type_v);
  const uint64_t per_layer = saturating_mul({heads, rows, std::max(row_k, row_v)});
  if (per_layer > limit)
    throw Error(ErrorCode::out_of_memory,
                "a KV pool of " + std::to_string(rows) + " tokens needs " + mib(per_layer) +
                    " per layer, more than one binding on this device holds (" + mib(limit) +
                    "): use a pool of at most " + std::to_string(limit / (heads * std::max(row_k, row_v))) +
                    " tokens, or a smaller --cache-type-k / --cache-type-v");
  const uint64_t per_row = row_k * (options.rotated_keys ? 2 : 1) + row_v;
  bytes_per_token_ = row_bytes(c, options_);
  bytes_ = saturating_mul({heads, rows, per_row, layers});
  model.allocator().require(Arena::cache, bytes_, "a KV pool of " + std::to_string(rows) + " tokens (" + mib(bytes_) + ")",
                            "use a smaller pool");
  Allocator& A = model.allocator();
  for (uint64_t l = 0; l < layers; ++l) {
    const std::string name = "kv pool layer " + std::to_string(l);
    k_.push_back(A.allocate(Arena::cache, heads * rows * row_k, "k " + name));
    v_.push_back(A.allocate(Arena::cache, heads * rows * row_v, "v " + name));
    if (options.rotated_keys) k_rot_.push_back(A.allocate(Arena::cache, heads * rows * row_k, "rotated k " + name));
  }
  if (KeyCalibration::wanted(options.cache_type_k, options.calibrate_keys))
    key_calib_ = KeyCalibration(A, uint32_t(c.n_layers), uint32_t(c.n_kv_heads), uint32_t(c.head_dim), false);
  if (key_calib_.enabled() && !options.key_calib_file.empty()) key_calib_.load(options.key_calib_file);
}

std::string KvPool::describe() const {
  return "KV pool " + mib(bytes_) + ": " + std::to_string(blocks_.total()) + " blocks of " +
         std::to_string(block_rows()) + " rows (" + std::to_string(pool_rows()) + " tokens), " +
         std::to_string(blocks_.used()) + " used, " + std::to_string(blocks_.cached()) + " cached, K " +
         kv_type_name(options_.cache_type_k) + " V " + kv_type_name(options_.cache_type_v);
}

void KvPool::copy_block(uint32_t from, uint32_t to) {
  const ModelConfig& c = model_.config();
  const uint32_t d = uint32_t(c.head_dim);
  const uint64_t rows = pool_rows(), B = block_rows();
  CommandList cmd(model_.device());
  cmd.begin();
  auto copy = [&](const Buffer& buf, uint64_t row_bytes) {
    for (uint64_t h = 0; h < uint64_t(c.n_kv_heads); ++h) {
      const uint64_t head = h * rows * row_bytes;
      cmd.copy(buf.range(head + from * B * row_bytes, B * row_bytes), buf.range(head + to * B * row_bytes, B * row_bytes));
    }
  };
  for (size_t l = 0; l < k_.size(); ++l) {
    copy(k_[l], kv_row_bytes(options_.cache_type_k, d));
    copy(v_[l], kv_row_bytes(options_.cache_type_v, d));
    if (!k_rot_.empty()) copy(k_rot_[l], kv_row_bytes(options_.cache_type_k, d));
  }
  cmd.end();
  cmd.run();
}

}  // namespace reach
