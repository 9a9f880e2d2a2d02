#pragma once
// The keys' calibration of one KV cache owner (a Session's own caches, or a KvPool that sessions share):
// for a q4_0 K cache, every layer whose scheme allows it (key_calib_applies) stores keys centred and
// smoothed, (k - mu) / s per (kv head, channel), with queries scaled by s (shaders/attention_key_calib.glsl).
// The result is exact whatever mu and s are (the softmax ignores q·mu); a good pair takes the offset that
// RoPE's slow pairs keep out of the 4-bit blocks and evens the channels' spread against the queries', which
// is what q4_0 keys cost (tools/kv_quant_study.py measures it).
//
// mu and s come from the first prefill chunk the owner's caches see (Attention::kv_calibrate, recorded in
// every prefill), and hold as long as rows stored with them do.  An owner that refines (a Session's own
// caches) keeps taking statistics from later prefill chunks (up to kKeyCalibMaxRows rows) and, whenever its
// caches are empty again (restart, at rewind(0)), sets mu and s anew from all of them at the next prefill:
// one chunk is a small sample, and a session that is reused (an eval's chunks, an app's turns) ends up
// calibrated from thousands of rows.  A KvPool does not (cached blocks outlive its sessions).  When the
// first rows come another way (a decode step) the current mu and s stay, frozen: the host marks it before
// that step runs (before_step).
#include <cstdint>
#include <filesystem>
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
  // One calibration per layer, each `layer_bytes` (key_calib_bytes), starting at the identity; `refine`:
  // statistics from later chunks too, taken up at restart.
  KeyCalibration(Allocator& allocator, uint32_t n_layers, uint32_t n_kv_heads, uint32_t head_dim, bool refine);

  bool enabled() const { return bool(buffer_); }
  // Layer l's calibration for LayerCache::key_calib; empty when disabled.
  BufferRange layer(size_t l) const;
  // Before a step of `rows` rows on the owner's caches: the first step after construction or restart that
  // records no calibration (a decode step) freezes the current mu and s in every layer.
  void before_step(uint32_t rows);
  // The owner's caches hold no rows: when it refines, the next prefill sets mu and s anew from all the
  // statistics, its own rows included (unless none came since they were set and the cap is reached).
  void restart();
  // The statistics taken so far, to a file (key_calibration_file.cpp); Error(io) when it cannot be written.
  void save(const std::filesystem::path& path) const;
  // Starts from a file's statistics instead of none: the next prefill sets mu and s from them and its own
  // rows.  Only while the owner's caches are empty (before the first step, or after restart); an error
  // naming the file for another model's shape, a truncated or corrupt file.
  void load(const std::filesystem::path& path);
  // Each layer's calibration as the device holds it (tests, `reach info`-style reports): f32 per layer, the
  // header first (u32 flag: 0 to calibrate at the next prefill, 1 calibrated, 2 kept as it was; u32 rows
  // taken; u32 rows to take at most), then mu and s, then the statistics (key_calib_bytes).
  std::vector<float> read(size_t l) const;

 private:
  Allocator* allocator_ = nullptr;
  Buffer buffer_;
  uint64_t layer_bytes_ = 0, stride_ = 0;
  uint32_t n_layers_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  bool open_ = true;           // no step since construction or restart
  bool refine_ = false;
  uint32_t cap_ = 0;           // the device's cap on rows taken
  uint64_t seen_ = 0;          // rows of prefill steps, as the device counts them (up to the cap)
  uint64_t set_at_ = 0;        // seen_ when mu and s were last set
  void write_flag(uint32_t flag);
  void upload(uint32_t layer, const std::vector<float>& data);
  uint64_t stats_floats() const;   // per layer
};

}  // namespace reach
