// The fused decode step (FUSED) shared by attention_decode.comp and
// attention_decode_lanes.comp: one dispatch stores the new token's key/value,
// attends and merges the splits.
//
//  * The new key (position i) never goes through the cache within the
//    dispatch: the split holding i takes it from the qkv output (KNEW, VNEW),
//    normalised and rotated as attention_kv_store.comp would store it, and its
//    workgroup (head chunk 0 in the lanes kernel) writes the cache row(s).  No
//    workgroup reads that row: the splits walk cache keys up to i - 1, and a
//    ring cache's reads of masked keys are moved into the window
//    (fused_read_key), whose rows differ from row(i) because ring >= window.
//  * Each workgroup, after writing its partials, counts itself in its
//    (kv head, head chunk) counter; the one that completes the count merges
//    (attention_merge.glsl) and resets the counter to 0, so a recorded command
//    buffer can be submitted again.  Partials are `coherent`, with
//    memoryBarrierBuffer before the count (release) and after it (acquire).
//
//  * QKRMS (Gemma 3, Qwen3): the per-head RMSNorms of q and k run here, on
//    the query rows as they are read and on the new key, instead of a
//    norm_rms pass over the qkv output before the dispatch.
//
//  * Loops over a row's vec4s are [[unroll]]ed, so the row arrays (kn, k1, v)
//    stay registers: rolled, llvmpipe kept them in memory, and the new-key
//    path alone cost ~40 us per workgroup (lavapipe, SmolLM2 shapes), more
//    than 8 tiles of keys.
//
// The including shader declares qbuf, k_new, v_new, qnorm_w, knorm_w (vec4),
// kstore, vstore, krstore, kcal_w (vec4, written; kcal_w the calibration), counter (uint), includes
// attention_common.glsl and attention_kv_codec.glsl first, and makes the row
// writers fused_write_k, fused_write_kr, fused_write_v (KV_WRITER).

// QKRMS: 1 / rms of the D floats at vec4 index b of the query rows, as norm_rms has it.
float q_rms(uint b) {
  if (!QKRMS) return 1.0;
  float s2 = 0.0;
  [[unroll]] for (uint c = 0u; c < D4; ++c) s2 += dot(qbuf[row_q + b + c], qbuf[row_q + b + c]);
  return inversesqrt(s2 / float(D) + pc.qk_norm_eps);
}
// Dims [4c, 4c+4) of the query row at vec4 index b, RMS-normalised (QKRMS; r = q_rms(b)).
vec4 q_in(uint b, uint c, float r) { return QKRMS ? qbuf[row_q + b + c] * r * qnorm_w[c] : qbuf[row_q + b + c]; }

// The cache row a split reads for key m (FUSED): masked keys of a ring cache
// read a key inside the window instead (their scores are masked anyway).
int fused_read_key(int m, int i) {
  if (!FUSED || pc.ring == 0u || m < int(pc.sinks)) return m;
  return max(m, i - int(pc.window) + 1);
}

// k1 = kn rotated at position i (table 1), dims past the rotary ones copied.
void fused_rotate1(int i, const vec4 kn[D4], out vec4 k1[D4]) {
  [[unroll]] for (uint c = 0u; c < D4; ++c) k1[c] = kn[c];
  [[unroll]] for (uint c = 0u; c < R4; ++c) {
    vec4 cs, sn;
    table_cs1(i, c, cs, sn);
    k1[c] = kn[c] * cs - kn[c + R4] * sn;
    k1[c + R4] = kn[c + R4] * cs + kn[c] * sn;
  }
}

// The new token's key of kv head g at position i: kn as the cache of a raw or
// unrotated layer holds it (KeyNorm / CosA: divided by its norm), k1 as branch 1
// scores it (rotated at i when the layer rotates); an f16 or quantized cache's
// key as the cache will hold it (kv_round; HADK: in the Hadamard domain, both).
void fused_new_key(uint g, int i, out vec4 kn[D4], out vec4 k1[D4]) {
  const uint src = row_kv + g * D4;
  float r = 1.0;
  if (QKRMS) {
    float s2 = 0.0;
    [[unroll]] for (uint c = 0u; c < D4; ++c) s2 += dot(k_new[src + c], k_new[src + c]);
    r = inversesqrt(s2 / float(D) + pc.qk_norm_eps);
  }
  [[unroll]] for (uint c = 0u; c < D4; ++c) kn[c] = QKRMS ? k_new[src + c] * r * knorm_w[c] : k_new[src + c];
  float f = 1.0;
  if (NORM == QKNORM_KEY || NORM == QKNORM_COS) {
    float n2 = 0.0;
    [[unroll]] for (uint c = 0u; c < D4; ++c) n2 += dot(kn[c], kn[c]);
    f = 1.0 / max(sqrt(n2), 1e-30);
  }
  [[unroll]] for (uint c = 0u; c < D4; ++c) {
    kn[c] *= f;
    k1[c] = kn[c];
  }
  if (ROPE) fused_rotate1(i, kn, k1);
  // Keys stored centred and smoothed (never raw ones that turn here): the key as stored, which the
  // step scores with the scaled queries (attention_key_calib.glsl).
  if (KCAL)
    [[unroll]] for (uint c = 0u; c < D4; ++c) {
      k1[c] = (k1[c] - kcal_mean(g, c)) / kcal_scale(g, c);
      if (!ROPE) kn[c] = k1[c];
    }
  if (KTYPE == KV_F32) return;
  // An exact key (attention_key_calib.glsl) is kept as it is, unrounded.
  const bool exact = KCAL && uint(i) < kcal_exact_keys();
  // As the cache will hold them (kv_round): the rotated key where the cache or
  // k_rot stores it rotated, the raw key where it is stored raw; branch 1 of a
  // raw cache without k_rot rotates the stored raw key, as later steps do.
  // HADK (never with a raw key that rotates here): the stored block is H·key, and
  // the queries are rotated to score it (attention_hadamard.glsl).
  if (HADK && ROPE) HADAMARD_ROW(k1, D4)
  if (ROPE && (!RAW || KROT) && !exact) kv_round(KTYPE, k1);
  if (RAW || !ROPE) {
    if (HADK) HADAMARD_ROW(kn, D4)
    if (!exact) kv_round(KTYPE, kn);
    if (!ROPE) for (uint c = 0u; c < D4; ++c) k1[c] = kn[c];
    else if (!KROT) fused_rotate1(i, kn, k1);
  }
}

// The new token's value row of kv head g as the cache will hold it (HADV: rotated).
void fused_new_value(uint g, out vec4 v[D4]) {
  [[unroll]] for (uint c = 0u; c < D4; ++c) v[c] = v_new[row_kv + g * D4 + c];
  if (HADV) HADAMARD_ROW(v, D4)
  kv_round(VTYPE, v);
}

// The key branch 2 scores for the new token (a dual-branch layer whose window
// W is 0, so even r = 0 falls outside it).
void fused_new_key2(const vec4 kn[D4], int i, out vec4 k2[D4]) {
  [[unroll]] for (uint c = 0u; c < D4; ++c) k2[c] = kn[c];
  if (K2MODE == K2POS_UNROTATED) return;
  const int p = k2_position(K2MODE, i, pc.group);
  [[unroll]] for (uint c = 0u; c < R4; ++c) {
    vec4 cs, sn;
    if (TABLE2) table_cs2(p, c, cs, sn);
    else table_cs1(p, c, cs, sn);
    k2[c] = kn[c] * cs - kn[c + R4] * sn;
    k2[c + R4] = kn[c + R4] * cs + kn[c] * sn;
  }
}

// Dims [4c, 4c+4), c = first, first + stride, ..., of the new token's cache
// rows for kv head g (g_local within the bound cache).  An f16 or quantized
// cache (KTYPE / VTYPE) is written a row at a time, by the invocation with
// first == 0: a block's scale needs all of its values.
void fused_store(uint g, uint g_local, int i, const vec4 kn[D4], const vec4 k1[D4], uint first, uint stride) {
  if (kv_dropped(uint(i))) return;   // past the cache: dropped, as kv_store does
  const uint row = g_local * pc.capacity + kv_row(i);
  if (KTYPE == KV_F32 && VTYPE == KV_F32) {
    const uint dst = row * D4;
    // Every c unrolled, each invocation storing its own: a lane-varying index into kn / k1 would put
    // them in memory (llvmpipe reads such an index lane by lane).
    [[unroll]] for (uint c = 0u; c < D4; ++c) {
      if (c < first || (c - first) % stride != 0u) continue;
      kstore[dst + c] = RAW || !ROPE ? kn[c] : k1[c];
      if (KROT) krstore[dst + c] = k1[c];
      vstore[dst + c] = v_new[row_kv + g * D4 + c];
    }
    return;
  }
  if (first != 0u) return;
  vec4 v[D4];
  [[unroll]] for (uint c = 0u; c < D4; ++c) v[c] = v_new[row_kv + g * D4 + c];
  if (HADV) HADAMARD_ROW(v, D4)
  if (RAW || !ROPE) fused_write_k(row, kn);
  else fused_write_k(row, k1);
  if (KCAL && uint(i) < kcal_exact_keys())
    [[unroll]] for (uint c = 0u; c < D4; ++c) kcal_w[kcal_exact_at(g, uint(i)) + c] = RAW || !ROPE ? kn[c] : k1[c];
  if (KROT) fused_write_kr(row, k1);
  fused_write_v(row, v);
}
