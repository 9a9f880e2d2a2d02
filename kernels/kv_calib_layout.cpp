// The layout of a layer's key calibration (LayerCache::key_calib; shaders/attention_key_calib.glsl) and
// which layers may take one: data of the cache, apart from the recording of the attention kernels.
#include <cstring>
#include <string>

#include "kernels/attention.hpp"

#include "base/error.hpp"

namespace reach {

bool key_calib_applies(const AttentionSpec& spec) {
  const bool key_norm = spec.norm == QkNorm::key || spec.norm == QkNorm::cos;
  return !spec.sink_logits && spec.softcap == 0 && !spec.dual() && !key_norm &&
         (!spec.rope || spec.cache == KeyCacheMode::rotated);
}

uint64_t key_calib_bytes(const AttentionSpec& spec) {
  return 16 + uint64_t(spec.n_kv_heads) * (6 + kKeyCalibExactRows) * spec.head_dim * 4;
}

std::vector<float> key_calib_identity(const AttentionSpec& spec, bool frozen, uint32_t cap) {
  std::vector<float> f(size_t(key_calib_bytes(spec) / 4), 0.0f);
  const uint32_t flag = frozen ? 2u : 0u;
  std::memcpy(f.data(), &flag, 4);
  std::memcpy(f.data() + 2, &cap, 4);
  for (uint32_t g = 0; g < spec.n_kv_heads; ++g)
    for (uint32_t j = 0; j < spec.head_dim; ++j) f[4 + (2 * size_t(g) + 1) * spec.head_dim + j] = 1.0f;
  return f;
}

BufferRange key_calib_range(const AttentionSpec& spec, const LayerCache& cache) {
  if (cache.key_calib.buffer == VK_NULL_HANDLE) return {};
  const std::string what = "attention: kv cache: ";
  if (!key_calib_applies(spec))
    throw Error(ErrorCode::invalid_argument,
                what + "keys stored centred and smoothed (LayerCache::key_calib) need a layer without sink logits, "
                       "soft cap, dual branches, raw keys turned in the kernel or unit-length keys");
  if (cache.key_calib.size < key_calib_bytes(spec))
    throw Error(ErrorCode::invalid_argument, what + "the key calibration holds " + std::to_string(cache.key_calib.size) +
                                                 " bytes, the layer needs " + std::to_string(key_calib_bytes(spec)));
  return cache.key_calib;
}

}  // namespace reach
