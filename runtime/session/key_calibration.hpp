#pragma once
// The keys' calibration of one KV cache owner (a Session's own caches, or a KvPool that sessions share):
// for a q4_0 K cache, every layer whose scheme allows it (key_calib_applies) stores keys centred and
// smoothed, (k - mu) / s per (kv head, channel), with queries scaled by s (shaders/attention_key_calib.glsl).
// The result is exact whatever mu and s are (the softmax ignores q·mu); a good pair takes the offset that
// RoPE's slow pairs keep out of the 4-bit blocks and evens the channels' spread against the queries', which
// is what q4_0 keys cost (tools/kv_quant_study.py measures it).
//
// mu and s come from the first prefill chunk the owner's caches see (Attention::kv_calibrate, recorded in
// every prefill: the device-side flag makes it run once), and stay for the owner's life, since every row
// stored is stored with them.  When the first rows come another way (a decode step, a chunk of fewer than
// 16 rows) the identity stays, frozen: the host marks it before that step runs (before_step).
#include <cstdint>
#include <vector>

#include "base/kv_type.hpp"
#include "engine/memory.hpp"
#include "kernels/attention.hpp"

namespace reach {

class KeyCalibration {
 public:
  // Rows a chunk needs to calibrate from (the kernel's MIN_ROWS).
  static constexpr uint32_t kMinRows = kKeyCalibMinRows;

  // Whether an owner of this key type calibrates at all (on: the owner's option; q4_0 keys only: q8_0's
  // 256 levels leave nothing to gain).
  static bool wanted(KvType k_type, bool on) { return on && k_type == KvType::q4_0; }

  KeyCalibration() = default;
  // One calibration per layer, each `layer_bytes` (key_calib_bytes), starting at the identity.
  KeyCalibration(Allocator& allocator, uint32_t n_layers, uint32_t n_kv_heads, uint32_t head_dim);

  bool enabled() const { return bool(buffer_); }
  // Layer l's calibration for LayerCache::key_calib; empty when disabled.
  BufferRange layer(size_t l) const;
  // Before a step of `rows` rows on the owner's caches: the first step that cannot calibrate (decode, or
  // fewer than kMinRows rows) freezes the identity in every layer.  Later steps do nothing.
  void before_step(uint32_t rows);
  // Each layer's mu and s as the device holds them (tests, `reach info`-style reports): f32 per layer,
  // the header word first (0 not calibrated, 1 calibrated, 2 frozen at the identity).
  std::vector<float> read(size_t l) const;

 private:
  Allocator* allocator_ = nullptr;
  Buffer buffer_;
  uint64_t layer_bytes_ = 0, stride_ = 0;
  uint32_t n_layers_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  bool open_ = true;
};

}  // namespace reach
