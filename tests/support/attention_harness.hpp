#pragma once
// The attention kernel tests' harness: a scheme (AttentionSpec from its named
// constructors + the float64 reference's parameters), and a run of prefill
// chunks and decode steps on the device compared with
// tests/support/attention_reference.  Shared by tests/test_kernels_attention.cpp
// and tests/test_attention_fused.cpp.
//
// Tolerance: max abs error 1e-4 on outputs of size O(1) (the reasoning is in
// tests/test_kernels_attention.cpp's header).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "tests/support/attention_reference.hpp"

namespace reach::test {

inline constexpr double kTol = 1e-4;

struct Scheme {
  std::string name;
  AttentionSpec spec;
  RefScheme ref;
  double base = 10000;
  double af = 1;
};

enum class Kind { rope_rotated, rope_raw, yarn_af, rerope, leaky, self_extend, logn, key_norm, query_norm, cos_norm,
                  cos_norm_fixed, window_sinks, window_rerope, nope, alibi };

// Inverse frequencies base^(-2j/rot_dim) of `pairs` pairs, in double.
std::vector<double> inv_freqs(uint32_t pairs, uint32_t rot_dim, double base);

// The spec comes from AttentionSpec's named constructors (the ones resolve_schemes
// uses); the reference is set up from the formulas' parameters alone.
Scheme make_scheme(Kind kind, uint32_t H, uint32_t Hkv, uint32_t d, uint32_t W = 0, uint32_t window = 0,
                   uint32_t sinks = 0);

// cos/sin table [positions][pairs] (cos·af, sin·af) as f32.
std::vector<float> make_table(const std::vector<double>& inv, double af, uint32_t positions);

struct Result {
  double max_err = 0;
  std::string where;
  void add(double e, const std::string& w) {
    if (!(e <= max_err)) {   // NaN counts as worse
      max_err = std::isnan(e) ? INFINITY : e;
      where = w;
    }
  }
};

// Largest |a[off_a + i] - b[i]| over i < n (NaN counts as infinite).
double max_abs(const std::vector<float>& a, const std::vector<double>& b, size_t off_a, size_t n);

// Runs a whole sequence of n tokens through kv_store + prefill in the given
// chunks, then decodes `decode_steps` further tokens one by one with one
// recorded command buffer (only the step buffer and the new k/v/q rows change),
// once with each decode kernel (the same steps again: kv_store rewrites the
// same rows), and compares every output row with the reference.
struct Harness {
  Scheme s;
  uint32_t n;                      // prefill tokens
  std::vector<uint32_t> chunks;    // lengths summing to n
  uint32_t decode_steps = 0;
  AttentionTuning tuning{};
  uint32_t seed = 1;
  bool rotated_keys = true;        // give dual-branch specs a pre-rotated key cache (LayerCache::k_rot)
  // Decode kernels to run (AttentionTuning::decode_variant): the shared-memory
  // workgroup kernel and the lanes kernel, whatever the device would choose.
  std::vector<uint32_t> decode_variants = {1, 2};
  // Sliding-window layers only: a ring of this many rows after the sinks
  // (LayerCache::ring) instead of one row per position; 0 = full cache.
  uint32_t ring = 0;
  // Decode through Attention::decode_fused (store, attend and merge in one
  // dispatch) instead of kv_store + decode.
  bool fused = false;
  // gpt-oss sink logits, one per query head (empty: none); set on both the spec and the reference.
  std::vector<float> sink_logits;
  // How the cache stores keys and values (LayerCache::k_type, v_type).  The reference then takes the
  // values the cache reads back (tests/support/kv_quant_reference): v rounded as stored, and k as the
  // stored key implies it: the raw key rounded, or for a rotated cache R(m)⁻¹·round(R(m)·k), so its
  // own rotation gives the stored key back; "rounded" is H·round(H·x) for q4_0 blocks, which the
  // cache stores Walsh-Hadamard rotated (values always, keys unless raw keys turn in the kernel).
  // Not for key / cos norms, or dual-branch schemes with k_rot (two stored keys per position).
  KvType k_type = KvType::f32, v_type = KvType::f32;
  // false: the reference takes the unrounded k and v (to measure what a type costs).
  bool reference_rounded = true;
  // > 0: a paged cache (LayerCache::block_rows) of blocks of this many rows.  The pool holds twice
  // the blocks the sequence needs, plus one, all NaN; the block table maps the sequence's blocks to a
  // seeded shuffle of them (fragmented: neither in order nor adjacent), so a key read through a wrong
  // block, or a row written to one, poisons the output.
  uint32_t block_rows = 0;
  // Non-empty: the cache stores keys centred and smoothed by this calibration (LayerCache::key_calib;
  // key_calib_bytes / 4 floats, the layout of shaders/attention_key_calib.glsl).  The reference then
  // takes, for each stored key y (rotated, or raw without RoPE), s·round((y - mu) / s) + mu: the key the
  // cache implies, except the keys of an unpaged cache's first kKeyCalibExactRows positions (a ring's: of
  // its sinks, up to as many), kept exact.  The
  // kernels score against (s·q) instead, which differs by q·mu per query only.
  std::vector<float> key_calib;


  std::string describe() const;
  Result run();
};

// Runs h and checks its largest error against kTol, describing the case and where the error is.
void check_within_tolerance(Harness h);

// Small decode tiles and splits (many splits at n ~ 200; prefill tiles are the
// subgroup size, 8 on lavapipe, already small, scored in blocks of 2 keys as
// GPUs score 32 in blocks of 8; lanes decode tiles of subgroup x 2 keys), and
// storage-buffer K/V reads:
// the default on a CPU device is the texel variant, so the cases that use
// small_tiles() cover the storage-buffer kernels GPUs run.
AttentionTuning small_tiles();

}  // namespace reach::test
